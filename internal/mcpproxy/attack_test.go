package mcpproxy_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestAttackHeldArgsCaseDifferential (held up): AGENTS-SECRET denies
// mcp__up__echo when args.text == "secret"; {"TEXT":"secret"} (which a
// Go upstream decoding with encoding/json would read as text) makes the
// rule's evaluation fail ("no such key"), and a failed deny rule denies:
// fail closed. (A rule guarded by has(args.text), as the shipped
// AGENTS-ASK rule on Bash is, would not fail and would not match.)
func TestAttackHeldArgsCaseDifferential(t *testing.T) {
	e := newEnv(t, nil)
	cs, _ := e.mustConnect(e.key, "")
	r := call(t, cs, "echo", map[string]any{"TEXT": "secret"})
	raw, _ := json.Marshal(r)
	t.Logf("result: %s; upstream ran %v", raw, e.up.callLog())
	if strings.Contains(resultText(r), "echo: secret") {
		t.Fatalf("a call the policy denies (echo text=secret) was forwarded and run as %q", resultText(r))
	}
}
