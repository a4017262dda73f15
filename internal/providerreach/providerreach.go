package providerreach

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/url"
	"strings"
)

// Request is what [Check] needs of a request besides its body.
type Request struct {
	// Base is the provider's base URL: https URLs under it may be named
	// (a file of Gemini's Files API). Required.
	Base *url.URL
	// ContentType is the request's Content-Type header ("" if none).
	ContentType string
	// Path is the request's path after the provider's base, e.g.
	// "/v1/uploads/upload_abc/parts" (a part of an upload is read as a
	// batch file).
	Path string
}

// MaxDepth bounds the nesting of a checked body, in arrays and objects.
const MaxDepth = 256

var (
	// ErrUnchecked: the body could not be read; the text says why, e.g.
	// "request body cannot be checked: not JSON".
	ErrUnchecked = errors.New("request body cannot be checked")

	errNotJSON   = fmt.Errorf("%w: not JSON", ErrUnchecked)
	errTooDeep   = fmt.Errorf("%w: nested too deep", ErrUnchecked)
	errNotObject = fmt.Errorf("%w: not a JSON object", ErrUnchecked)
	errMediaType = fmt.Errorf("%w: Content-Type is neither JSON nor a multipart form", ErrUnchecked)
	errBadPart   = fmt.Errorf("%w: a multipart part is neither JSON nor JSON Lines", ErrUnchecked)
	errCharset   = fmt.Errorf("%w: a charset other than utf-8", ErrUnchecked)
)

// Check returns where body has the provider connect out for the caller,
// as a JSON Pointer (RFC 6901) into it and what is there, e.g. "/tools/0
// type web_fetch_20250910", or "part 1 line 3 /body/model searches the
// web" in a multipart form; "" if nowhere. It returns an [ErrUnchecked]
// if the body cannot be read. It reads body once (about 500 MB/s) and
// keeps nothing; safe for concurrent use.
func Check(body []byte, r Request) (string, error) {
	mt, params, _ := mime.ParseMediaType(r.ContentType)
	if !JSONContentType(r.ContentType) && mt != "multipart/form-data" {
		return "", errMediaType // the provider may read it otherwise (Google's JSPB)
	}
	if !UTF8ContentType(r.ContentType) {
		return "", errCharset // read as UTF-8 here, as UTF-7 (say) by the provider
	}
	what, err := reach(body, r.Base)
	if err == nil || mt != "multipart/form-data" || json.Valid(body) {
		return what, err
	}
	if lct := strings.ToLower(r.ContentType); strings.Count(lct, "boundary") != 1 || strings.Contains(lct, "boundary*") {
		return "", errNotJSON // parsers differ on which boundary wins
	}
	// A part of an upload (OpenAI's /v1/uploads/{id}/parts) is a piece
	// of a file whose purpose was given apart: read it as a batch file.
	upload := strings.Contains(r.Path, "/uploads/")
	return multipartReach(body, params["boundary"], upload, r.Base)
}

// JSONContentType reports whether a body of Content-Type ct is read as
// JSON: no Content-Type, application/json, text/json, text/plain (what a
// bare fetch sends) or any +json type.
func JSONContentType(ct string) bool {
	if strings.TrimSpace(ct) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	switch mt {
	case "application/json", "text/json", "text/plain":
		return true
	}
	return strings.HasSuffix(mt, "+json")
}

// UTF8ContentType reports whether every reader reads a body of
// Content-Type ct as UTF-8: ct names no charset, or utf-8, once. A
// charset* or a second charset is not (mime drops a charset* it cannot
// decode and keeps one of two; Werkzeug reads them), nor is a charset in
// a ct that does not parse.
func UTF8ContentType(ct string) bool {
	lct := strings.ToLower(ct)
	if strings.Count(lct, "charset") > 1 || strings.Contains(lct, "charset*") {
		return false
	}
	_, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return !strings.Contains(lct, "charset")
	}
	cs, ok := params["charset"]
	return !ok || strings.EqualFold(cs, "utf-8") || strings.EqualFold(cs, "utf8")
}
