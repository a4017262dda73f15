package providerreach

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// multipartReach checks the parts of a multipart form (see the package
// doc): each part that is one JSON document, and, in a form
// whose purpose is "batch" (an OpenAI batch input file, whose every line
// the provider runs as a request), each line of every part that is UTF-8
// text: a line that begins with "{" must be JSON.
func multipartReach(body []byte, boundary string, batch bool, base *url.URL) (string, error) {
	if boundary == "" {
		return "", errNotJSON
	}
	type part struct {
		name string
		data []byte
	}
	var parts []part
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextRawPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", errNotJSON
		}
		for _, cte := range p.Header.Values("Content-Transfer-Encoding") {
			switch strings.ToLower(strings.TrimSpace(cte)) {
			case "", "7bit", "8bit", "binary":
			default:
				return "", errBadPart // base64 or quoted-printable: could hide JSON Lines
			}
		}
		if cd := p.Header.Values("Content-Disposition"); len(cd) > 1 || len(cd) == 1 && p.FormName() == "" {
			return "", errBadPart // parsers differ on what such a part is named
		}
		data, err := io.ReadAll(p)
		if err != nil {
			return "", errNotJSON
		}
		if p.FormName() == "purpose" && strings.EqualFold(string(trimLead(bytes.TrimSpace(data))), "batch") {
			batch = true
		}
		parts = append(parts, part{p.FormName(), data})
	}
	for i, p := range parts {
		t := trimLead(p.data)
		if json.Valid(t) {
			what, err := reachAny(t, base)
			if what != "" || err != nil {
				return partWhat(i, 0, what), err
			}
			continue
		}
		if !batch || !utf8.Valid(p.data) {
			continue // audio, an image, a text that is no request
		}
		for j, line := range bytes.Split(p.data, []byte("\n")) {
			line = trimLead(line)
			switch {
			case len(line) == 0 || line[0] != '{' && line[0] != '[':
				continue
			case !json.Valid(line):
				if line[0] == '[' {
					continue
				}
				return "", errBadPart
			}
			what, err := reachAny(line, base)
			if what != "" || err != nil {
				return partWhat(i, j+1, what), err
			}
		}
	}
	return "", nil
}

// trimLead drops leading spaces, control characters and byte order
// marks, which a reader's strip() drops before parsing.
func trimLead(b []byte) []byte {
	return bytes.TrimLeftFunc(b, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || r == '\ufeff'
	})
}

// partWhat names a finding in part i (line j of it, 0 for the whole).
func partWhat(i, j int, what string) string {
	if what == "" {
		return ""
	}
	w := "part " + strconv.Itoa(i)
	if j > 0 {
		w += " line " + strconv.Itoa(j)
	}
	return w + " " + what
}
