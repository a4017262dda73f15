package gateway

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// A path rule admits requests to one endpoint of a provider. Its text is
//
//	[METHOD ]PATH
//
// where METHOD is GET, HEAD, POST, PUT, PATCH or DELETE (absent: any
// method) and PATH is the path after /{provider}, "/"-separated
// segments, each of which is
//
//	a literal         "v1", "messages", "count_tokens" (compared exactly)
//	*                 one segment name: [A-Za-z0-9._@+~-]+
//	PREFIX*SUFFIX     a segment name between literals, e.g. "*:generateContent"
//	**                (last only) one or more further segment names
//
// The path checked is the decoded one with dot segments resolved, as it
// is forwarded. A segment name never holds "/", ":" or a character an
// upstream could decode or normalize into another path ("%", "\", "?"),
// and an empty segment (a double or trailing slash) never matches, so a
// refused endpoint cannot be reached by encoding it differently. Letter
// case matters: "/V1/Files" matches no rule.
type pathRule struct {
	method string // "" for any
	segs   []string
}

// segmentName is what a wildcard matches within one segment. A whole
// segment "*" right after a segment "models" also matches wholeSegment,
// for a fine-tuned model's ID ("GET /v1/models/ft:gpt-4o-mini:org::abc");
// nowhere else does a wildcard match ":", which names a method in
// Google's APIs ("*:generateContent" is one method, "things/*" no
// custom method).
var (
	segmentName  = regexp.MustCompile(`^[A-Za-z0-9._@+~-]+$`)
	wholeSegment = regexp.MustCompile(`^[A-Za-z0-9._@+~:-]+$`)
)

// DefaultAllowPaths are the endpoints each kind of provider admits
// unless configured otherwise ([ProviderConfig.AllowPaths] adds to
// them): the ones the official SDKs use for inference. Files, batches,
// fine-tuning, stored completions, organization and admin endpoints are
// not among them. For KindOpenAI each rule also admits its path without
// the leading "/v1", for OpenAI-compatible providers whose base URL ends
// in /v1. The Responses API's retrieve, cancel and input_items are
// admitted because the SDKs use them to resume a stream and to poll a
// background response (they name a response id, which only its creator
// knows); listing and deleting responses are not.
//
// [KindHTTP] has none: only declared paths are forwarded. For
// [KindGitHub] they are REST endpoints under /repos/*/* (see
// [githubAllowPaths]); its git smart HTTP endpoints are admitted apart.
func DefaultAllowPaths(kind string) []string {
	switch kind {
	case KindAnthropic:
		return []string{
			"POST /v1/messages",
			"POST /v1/messages/count_tokens",
			"POST /v1/complete",
			"GET /v1/models",
			"GET /v1/models/*",
		}
	case KindGemini:
		var out []string
		for _, v := range []string{"v1beta", "v1"} {
			for _, m := range []string{"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"} {
				out = append(out, "POST /"+v+"/models/*:"+m)
			}
			out = append(out, "GET /"+v+"/models", "GET /"+v+"/models/*")
		}
		return out
	case KindGitHub:
		return append([]string(nil), githubAllowPaths...)
	case KindHTTP:
		return nil
	default:
		return []string{
			"POST /v1/chat/completions",
			"POST /v1/completions",
			"POST /v1/embeddings",
			"GET /v1/models",
			"GET /v1/models/*",
			"POST /v1/responses",
			"POST /v1/responses/input_tokens",
			"GET /v1/responses/*",
			"POST /v1/responses/*/cancel",
			"GET /v1/responses/*/input_items",
		}
	}
}

// parsePathRule parses one rule (see [pathRule]).
func parsePathRule(s string) (pathRule, error) {
	var r pathRule
	p := strings.TrimSpace(s)
	if m, rest, ok := strings.Cut(p, " "); ok {
		switch m {
		case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		default:
			return r, fmt.Errorf("path rule %q: method must be GET, HEAD, POST, PUT, PATCH or DELETE", s)
		}
		r.method, p = m, strings.TrimSpace(rest)
	}
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return r, fmt.Errorf("path rule %q: path must start with / and name an endpoint", s)
	}
	r.segs = strings.Split(p[1:], "/")
	for i, seg := range r.segs {
		ok := false
		switch n := strings.Count(seg, "*"); {
		case seg == "**":
			ok = i == len(r.segs)-1
		case n == 0:
			ok = seg != "" && !strings.ContainsAny(seg, `%\?#`)
		case n == 1:
			pre, suf, _ := strings.Cut(seg, "*")
			ok = !strings.ContainsAny(pre+suf, `%\?#`)
		}
		if !ok {
			return r, fmt.Errorf("path rule %q: segment %q must be a literal, *, PREFIX*SUFFIX or a final **", s, seg)
		}
	}
	return r, nil
}

// matches reports whether rule r admits method and the path split into
// segs (decoded, dot segments resolved).
func (r pathRule) matches(method string, segs []string) bool {
	if r.method != "" && r.method != method {
		return false
	}
	for i, rs := range r.segs {
		if rs == "**" {
			if len(segs) <= i {
				return false
			}
			for _, s := range segs[i:] {
				if !segmentName.MatchString(s) {
					return false
				}
			}
			return true
		}
		if i >= len(segs) {
			return false
		}
		if modelID := rs == "*" && i > 0 && r.segs[i-1] == "models"; modelID && !wholeSegment.MatchString(segs[i]) ||
			!modelID && !segmentMatches(rs, segs[i]) {
			return false
		}
	}
	return len(segs) == len(r.segs)
}

func segmentMatches(rule, seg string) bool {
	pre, suf, wild := strings.Cut(rule, "*")
	if !wild {
		return rule == seg
	}
	if len(seg) <= len(pre)+len(suf) || !strings.HasPrefix(seg, pre) || !strings.HasSuffix(seg, suf) {
		return false
	}
	return segmentName.MatchString(seg[len(pre) : len(seg)-len(suf)])
}

// allowsPath reports whether provider p admits method on path (decoded,
// dot segments resolved, starting with "/").
func (p *provider) allowsPath(method, path string) bool {
	if !strings.HasPrefix(path, "/") {
		return false
	}
	segs := strings.Split(path[1:], "/")
	for _, r := range p.allow {
		if r.matches(method, segs) {
			return true
		}
	}
	return false
}

// buildAllow parses a provider's rules: the defaults of its kind and
// extra. For KindOpenAI a rule under /v1 is also taken without it.
func buildAllow(kind string, extra []string) ([]pathRule, error) {
	var out []pathRule
	for _, s := range append(DefaultAllowPaths(kind), extra...) {
		r, err := parsePathRule(s)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		if kind == KindOpenAI && len(r.segs) > 1 && r.segs[0] == "v1" {
			out = append(out, pathRule{method: r.method, segs: r.segs[1:]})
		}
	}
	return out, nil
}

// pathClass is a bounded, echo-safe name for the kind of endpoint path
// asks for: its first segment after a version segment ("files",
// "batches", "organization", "fine_tuning"), or "other".
func pathClass(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) > 1 && versionSegment.MatchString(segs[0]) {
		segs = segs[1:]
	}
	c, _, _ := strings.Cut(segs[0], ":")
	if !pathClassName.MatchString(c) {
		return "other"
	}
	return c
}

var (
	versionSegment = regexp.MustCompile(`^v[0-9]+[a-z0-9]*$`)
	pathClassName  = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]{0,47}$`)
)

// CheckPathRule returns why s is not a valid "[METHOD ]PATH" rule for
// [ProviderConfig.AllowPaths], or nil.
func CheckPathRule(s string) error {
	_, err := parsePathRule(s)
	return err
}
