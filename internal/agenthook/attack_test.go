package agenthook

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/agentcustody/custody/client"
)

// blocked reports whether r stops a pre-tool call: exit 2 (every agent)
// or an explicit deny.
func blocked(r Result) bool {
	return r.Exit == 2 || strings.Contains(string(r.Stdout), `"deny"`)
}

// TestAttackPreToolMalformedFailsClosed: no malformed pre-tool event gets
// past the hook without a decision, for any agent, even with a signer
// that would allow the tool.
func TestAttackPreToolMalformedFailsClosed(t *testing.T) {
	valid := `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"ls"},"tool_use_id":"t1"}`
	huge := `{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"` + strings.Repeat("a", MaxEventSize) + `"}}`
	for _, c := range []struct{ name, in string }{
		{"empty", ""},
		{"null", "null"},
		{"byte order mark", "\ufeff" + valid},
		{"trailing garbage", valid + "x"},
		{"two objects", valid + valid},
		{"tool_name empty", strings.Replace(valid, `"Bash"`, `""`, 1)},
		{"tool_name missing", strings.Replace(valid, `"tool_name":"Bash",`, "", 1)},
		{"tool_name not a string", strings.Replace(valid, `"Bash"`, `["Bash"]`, 1)},
		{"tool_name with a newline", strings.Replace(valid, `"Bash"`, `"Ba\nsh"`, 1)},
		{"session_id missing", strings.Replace(valid, `"session_id":"s",`, "", 1)},
		{"session_id a number", strings.Replace(valid, `"s"`, `7`, 1)},
		{"over MaxEventSize", huge},
	} {
		for _, a := range Agents {
			t.Run(c.name+" "+string(a), func(t *testing.T) {
				in := c.in
				if a == GeminiCLI {
					in = strings.ReplaceAll(in, "PreToolUse", "BeforeTool")
				}
				f := newFakeSigner(map[string]string{"Bash": "allow", "Ba\nsh": "allow"})
				r := Handle(context.Background(), testOptions(t, a, f), []byte(in))
				if r.Exit != 2 || len(f.decided) != 0 {
					t.Fatalf("Handle = exit %d %q %q, decided %v; want exit 2 and no decision", r.Exit, r.Stdout, r.Stderr, f.decided)
				}
				if strings.Contains(r.Stderr, "command") || strings.Contains(r.Stderr, "aaaa") {
					t.Errorf("stderr quotes the event: %q", r.Stderr)
				}
			})
		}
	}
}

// oddSigner answers Decide with a fixed decision or error.
type oddSigner struct {
	*fakeSigner
	d   client.Decision
	err error
}

func (o oddSigner) Decide(context.Context, string, string, string, json.RawMessage) (client.Decision, error) {
	return o.d, o.err
}

// TestAttackPreToolUnexpectedSignerFailsClosed: only the effect "allow"
// allows.
func TestAttackPreToolUnexpectedSignerFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name string
		d    client.Decision
		err  error
	}{
		{"no effect", client.Decision{}, nil},
		{"Allow", client.Decision{Effect: "Allow"}, nil},
		{"allow with a space", client.Decision{Effect: "allow "}, nil},
		{"500", client.Decision{Effect: "allow"}, &client.Error{Status: http.StatusInternalServerError, Code: "internal"}},
		{"run_closed every time", client.Decision{Effect: "allow"}, &client.Error{Status: http.StatusConflict, Code: "run_closed"}},
		{"duplicate_call", client.Decision{Effect: "allow"}, &client.Error{Status: http.StatusConflict, Code: "duplicate_call"}},
	} {
		for _, a := range Agents {
			t.Run(c.name+" "+string(a), func(t *testing.T) {
				s := oddSigner{newFakeSigner(nil), c.d, c.err}
				ev := pre("s", "Bash", "t1")
				if a == GeminiCLI {
					ev = []byte(strings.Replace(string(ev), "PreToolUse", "BeforeTool", 1))
				}
				if r := Handle(context.Background(), testOptions(t, a, s), ev); !blocked(r) {
					t.Fatalf("Handle = %+v; want the call blocked", r)
				}
			})
		}
	}
}

// TestAttackTamperedStateFailsClosed: a state file that is not one the
// hook wrote blocks the call rather than deciding somewhere unexpected.
func TestAttackTamperedStateFailsClosed(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, base string)
	}{
		{"garbage", func(t *testing.T, base string) { must(t, os.WriteFile(base+".json", []byte("{"), 0o600)) }},
		{"another version", func(t *testing.T, base string) {
			must(t, os.WriteFile(base+".json", []byte(`{"v":2,"run":"r9"}`), 0o600))
		}},
		{"a directory", func(t *testing.T, base string) { must(t, os.Mkdir(base+".json", 0o700)) }},
		{"lock is a directory", func(t *testing.T, base string) { must(t, os.Mkdir(base+".lock", 0o700)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeSigner(map[string]string{"Bash": "allow"})
			opts := testOptions(t, ClaudeCode, f)
			st := stateFiles{dir: opts.StateDir}
			must(t, os.MkdirAll(opts.StateDir, 0o700))
			c.tamper(t, st.base(ClaudeCode, "s"))
			if r := Handle(context.Background(), opts, pre("s", "Bash", "t1")); r.Exit != 2 || len(f.decided) != 0 {
				t.Fatalf("Handle = %+v, decided %v; want exit 2, no decision", r, f.decided)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
