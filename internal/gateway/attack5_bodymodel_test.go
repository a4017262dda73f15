package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// HELD: bodyModel against Python's json.loads (results taken from
// CPython 3; JS JSON.parse and encoding/json agree on these): for each
// body, bodyModel gives either "" (refused for a models list) or the
// model Python runs (or Python refuses the body). Escaped names, case variants, lone surrogates,
// BOM, NaN, trailing data, trailing commas, huge numbers, non-objects,
// fallback fields in another case, invalid UTF-8 outside the model.
func TestAttack5BodyModelAgreesWithPython(t *testing.T) {
	for _, c := range []struct{ body, python string }{
		{`{"model":"cheap-model"}`, "cheap-model"},
		{`{"model":"cheap-model","mod\u0065l":"o1-pro"}`, "o1-pro"},
		{`{"mod\u0065l":"o1-pro","model":"cheap-model"}`, "cheap-model"},
		{`{"model":"cheap-model","MODEL":"o1-pro"}`, "cheap-model"},
		{`{"model":"cheap-model\ud800"}`, "cheap-model<lone surrogate>"},
		{`{"model":"cheap\u002dmodel"}`, "cheap-model"},
		{`{"model":"cheap-model"} `, "cheap-model"},
		{`{"model":"cheap-model"}{"model":"o1-pro"}`, "error"},
		{`{"model":"cheap-model","x":NaN}`, "cheap-model"},
		{`{"model":"cheap-model","x":1e99999}`, "cheap-model"},
		{`{"model":"cheap-model","x":"\ud800\udc00"}`, "cheap-model"},
		{`{"model" : "cheap-model" , "x" : [ ] }`, "cheap-model"},
		{`{"model":"cheap-model",}`, "error"},
		{`[{"model":"cheap-model"}]`, "not an object"},
		{`{"model":"cheap-model","Models":["o1-pro"]}`, "cheap-model (router: Models?)"},
		{"\ufeff{\"model\":\"cheap-model\"}", "cheap-model"},
		{"{\"model\":\"cheap-model\"}\x00", "error"},
		{"{\"model\":\"cheap-model\",\"x\":\"\xff\"}", "error (not UTF-8)"},
		{`{"model":"cheap-model","x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, "error (recursion)"},
	} {
		got := bodyModel([]byte(c.body))
		if got != "" && got != c.python && !strings.HasPrefix(c.python, "error") {
			t.Errorf("bodyModel(%.80q) = %q, Python runs %q", c.body, got, c.python)
		}
	}
}

// FINDING (low, parser-dependent): a member named "model\u0000" is not
// "model" to bodyModel (nor to Python/JS/Go), so
// {"model\u0000":"o1-pro","model":"cheap-model"} is allowed as
// cheap-model. C parsers that keep names as NUL-terminated strings read
// it as a second "model": cJSON (parse_string writes U+0000 as a 0 byte;
// cJSON_GetObjectItem compares with strcmp, case-insensitively, and
// returns the FIRST match) runs o1-pro. bodyModel already refuses other
// names that parsers may take for "model" (case variants). Should: a
// member whose decoded name is "model" up to a NUL (or contains NUL at
// all) makes the model ambiguous: "".
func TestAttack5BodyModelNULInName(t *testing.T) {
	for _, b := range []string{
		`{"model\u0000":"o1-pro","model":"cheap-model"}`,
		`{"MODEL\u0000x":"o1-pro","model":"cheap-model"}`,
	} {
		if got := bodyModel([]byte(b)); got != "" {
			t.Errorf("bodyModel(%s) = %q: a parser keeping names as C strings (cJSON) takes the first, o1-pro", b, got)
		}
	}
}

// FINDING (low-medium, upstream-dependent): bodyModel reads the body as
// UTF-8 whatever its Content-Type says, and the gateway forwards the
// Content-Type as sent. aiohttp's Request.json() decodes the body with
// the declared charset (text(): bytes_body.decode(self.charset or
// "utf-8")), and Python decodes "utf-7": there
// {"model":"cheap-model","x":"+ACIALAAiAG0AbwBkAGUAbAAiADoAIgBvADEALQBwAHIAbw-"}
// is {"model":"cheap-model","x":"","model":"o1-pro"} and the last model
// (o1-pro) wins. A model-scoped token runs o1-pro on such an upstream
// (a compat provider served by aiohttp). Should: for a body whose model
// is checked, a charset other than utf-8 (or absent) is refused (or the
// parameter removed before forwarding).
func TestAttack5BodyModelCharsetUTF7(t *testing.T) {
	e := newEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"compat"}, Models: []string{"cheap-model"}}).Token
	body := `{"model":"cheap-model","x":"+ACIALAAiAG0AbwBkAGUAbAAiADoAIgBvADEALQBwAHIAbw-"}`
	code, _, _ := e.do(t, "POST", "/compat/v1/chat/completions", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json; charset=utf-7"}, body)
	if code != http.StatusOK {
		return // refused: fine
	}
	got := e.up["compat"].last(t)
	if strings.Contains(strings.ToLower(got.Header.Get("Content-Type")), "utf-7") {
		t.Errorf("forwarded %s as %q: decoded as UTF-7 (aiohttp) its last model is o1-pro", got.Body, got.Header.Get("Content-Type"))
	}
}
