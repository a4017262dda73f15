package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// testLogger routes slog to t.Logf.
type tlogWriter struct{ t testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

func newEngine(t testing.TB, o Options) *Engine {
	t.Helper()
	o.Log = slog.New(slog.NewTextHandler(tlogWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	e, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v) = %v", o, err)
	}
	return e
}

func mustParse(t testing.TB, src string) *Policy {
	t.Helper()
	p, err := Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	return p
}

const testPolicy = `rules:
  - id: ACME-001
    effect: allow
    tool: "*"
  - id: ACME-002
    effect: ask
    tool: "mcp__*"
  - id: ACME-003
    effect: deny
    tool: "mcp__github__*"
    when: 'args.repo.startsWith("acme/secret")'
  - id: ACME-004
    effect: allow
    tool: WebFetch
  - id: ACME-005
    effect: deny
    tool: Bash
    when: 'args.command.contains("rm -rf")'
  - id: ACME-006
    effect: ask
    tool: Bash
    when: 'args.missing == "x"'
  - id: ACME-007
    effect: deny
    tool: Loop
    when: 'args.items.all(x, args.items.all(y, args.items.all(z, x + y + z >= 0)))'
  - id: ACME-008
    effect: deny
    tool: WebFetch
    when: 'dest.host.endsWith("evil.com")'
  - id: ACME-009
    effect: ask
    tool: Who
    when: 'tenant == "acme" && agent == "bot" && session == "pod-1" && tool == "Who"'
  - id: ACME-010
    effect: deny
    tool: Count
    when: 'args.n > 5'
`

func TestDecide(t *testing.T) {
	e := newEngine(t, Options{})
	p := mustParse(t, testPolicy)
	items := make([]string, 200)
	for i := range items {
		items[i] = fmt.Sprint(i)
	}
	tests := []struct {
		name       string
		pol        *Policy
		call       Call
		want       Effect
		wantIDs    []string
		wantErrIDs []string
		wantDef    bool
	}{
		{"allow all", p, Call{Tool: "Read", Args: json.RawMessage(`{"path":"/a"}`)}, Allow, []string{"ACME-001"}, nil, false},
		{"ask beats allow", p, Call{Tool: "mcp__slack__post", Args: json.RawMessage(`{}`)}, Ask, []string{"ACME-001", "ACME-002"}, nil, false},
		{"deny beats ask", p, Call{Tool: "mcp__github__create_issue", Args: json.RawMessage(`{"repo":"acme/secret-x"}`)},
			Deny, []string{"ACME-001", "ACME-002", "ACME-003"}, nil, false},
		{"when false", p, Call{Tool: "mcp__github__create_issue", Args: json.RawMessage(`{"repo":"acme/public"}`)},
			Ask, []string{"ACME-001", "ACME-002"}, nil, false},
		{"eval error denies with id", p, Call{Tool: "Bash", Args: json.RawMessage(`{"command":"ls"}`)},
			Deny, []string{"ACME-001", "ACME-006"}, []string{"ACME-006"}, false},
		{"eval error missing key first", p, Call{Tool: "Bash", Args: json.RawMessage(`{}`)},
			Deny, []string{"ACME-001", "ACME-005", "ACME-006"}, []string{"ACME-005", "ACME-006"}, false},
		{"cost limit denies", p, Call{Tool: "Loop", Args: mustJSON(t, map[string]any{"items": items})},
			Deny, []string{"ACME-001", "ACME-007"}, []string{"ACME-007"}, false},
		{"public fetch allowed", p, Call{Tool: "WebFetch", Args: json.RawMessage(`{"url":"https://example.com/"}`)},
			Allow, []string{"ACME-001", "ACME-004"}, nil, false},
		{"dest in CEL", p, Call{Tool: "WebFetch", Args: json.RawMessage(`{"url":"https://x.evil.com/"}`)},
			Deny, []string{"ACME-001", "ACME-004", "ACME-008"}, nil, false},
		{"builtin beats tenant allow", p, Call{Tool: "WebFetch", Args: json.RawMessage(`{"url":"http://169.254.169.254/latest/meta-data/"}`)},
			Deny, []string{RuleNetMetadata, RuleNetInternal, "ACME-001", "ACME-004"}, nil, false},
		{"builtin internal", p, Call{Tool: "WebFetch", Args: json.RawMessage(`{"url":"http://10.0.0.1/"}`)},
			Deny, []string{RuleNetInternal, "ACME-001", "ACME-004"}, nil, false},
		{"builtin ambiguous", p, Call{Tool: "WebFetch", Args: json.RawMessage(`{"url":"http://a@example.org@example.com/"}`)},
			Deny, []string{RuleNetAmbiguous, "ACME-001", "ACME-004"}, nil, false},
		// Ambiguous as a URL, and one of its readings is the metadata address.
		{"builtin ambiguous metadata", p, Call{Tool: "WebFetch", Args: json.RawMessage(`{"url":"http://a@169.254.169.254@example.com/"}`)},
			Deny, []string{RuleNetMetadata, RuleNetInternal, RuleNetAmbiguous, "ACME-001", "ACME-004"}, nil, false},
		{"identity vars", p, Call{Tool: "Who", Tenant: "acme", Agent: "bot", Session: "pod-1"},
			Ask, []string{"ACME-001", "ACME-009"}, nil, false},
		{"int args", p, Call{Tool: "Count", Args: json.RawMessage(`{"n": 6}`)}, Deny, []string{"ACME-001", "ACME-010"}, nil, false},
		{"float args", p, Call{Tool: "Count", Args: json.RawMessage(`{"n": 5.5}`)}, Deny, []string{"ACME-001", "ACME-010"}, nil, false},
		{"nil policy default deny", nil, Call{Tool: "Read"}, Deny, []string{}, nil, true},
		{"nil policy builtin", nil, Call{Tool: "X", Args: json.RawMessage(`{"cfg":{"Endpoint":"http://[::ffff:a9fe:a9fe]/"}}`)},
			Deny, []string{RuleNetMetadata, RuleNetInternal}, nil, false},
		{"nested list url", nil, Call{Tool: "X", Args: json.RawMessage(`{"opts":{"urls":["https://ok.example.com","http://127.1/"]}}`)},
			Deny, []string{RuleNetInternal}, nil, false},
		{"host key", nil, Call{Tool: "Ssh", Args: json.RawMessage(`{"Host":"0x7f.1"}`)}, Deny, []string{RuleNetInternal}, nil, false},
		{"target weak word", nil, Call{Tool: "Deploy", Args: json.RawMessage(`{"target":"production"}`)}, Deny, []string{}, nil, true},
		{"target host", nil, Call{Tool: "Deploy", Args: json.RawMessage(`{"target":"10.1.2.3:22"}`)}, Deny, []string{RuleNetInternal}, nil, false},
		{"address text", nil, Call{Tool: "Mail", Args: json.RawMessage(`{"address":"1 Main St."}`)}, Deny, []string{}, nil, true},
		{"no dest", p, Call{Tool: "Write", Args: json.RawMessage(`{"content":"see http://localhost:3000 in the README"}`)},
			Allow, []string{"ACME-001"}, nil, false},
		{"bare v6 host", nil, Call{Tool: "X", Args: json.RawMessage(`{"host":"::1"}`)}, Deny, []string{RuleNetInternal}, nil, false},
		{"args null", p, Call{Tool: "Read", Args: json.RawMessage(`null`)}, Allow, []string{"ACME-001"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := e.Decide(context.Background(), tt.pol, tt.call)
			if err != nil {
				t.Fatalf("Decide(%+v) error = %v", tt.call, err)
			}
			var errIDs []string
			for id := range d.Errors {
				errIDs = append(errIDs, id)
			}
			slices.Sort(errIDs)
			if d.Effect != tt.want || !slices.Equal(d.RuleIDs, tt.wantIDs) || !slices.Equal(errIDs, tt.wantErrIDs) || d.Default != tt.wantDef {
				t.Errorf("Decide(%s %s) = %s %v errors %v default %v, want %s %v errors %v default %v",
					tt.call.Tool, tt.call.Args, d.Effect, d.RuleIDs, d.Errors, d.Default, tt.want, tt.wantIDs, tt.wantErrIDs, tt.wantDef)
			}
			wantHash := emptyHash
			if tt.pol != nil {
				wantHash = tt.pol.Hash()
			}
			if d.PolicyHash != wantHash {
				t.Errorf("Decide().PolicyHash = %q, want %q", d.PolicyHash, wantHash)
			}
		})
	}
}

func mustJSON(t testing.TB, v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecideInvalidArgs(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	p := mustParse(t, testPolicy)
	for _, args := range []string{`[1]`, `{"a":1`, `{"url":"https://ok.example","url":"http://169.254.169.254"}`, `{} {}`, `"x"`, `{"a":1e999}`,
		strings.Repeat(`{"a":`, 100) + "1" + strings.Repeat("}", 100)} {
		d, err := e.Decide(context.Background(), p, Call{Tool: "Read", Args: json.RawMessage(args)})
		if !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("Decide(args %.40s) error = %v, want ErrInvalidArgs", args, err)
		}
		if d.Effect != Deny || !slices.Equal(d.RuleIDs, []string{RuleArgsInvalid}) || d.Errors[RuleArgsInvalid] == "" || d.PolicyHash != p.Hash() {
			t.Errorf("Decide(args %.40s) = %+v, want deny by %s", args, d, RuleArgsInvalid)
		}
	}
}

func TestDefaultEffect(t *testing.T) {
	for _, eff := range []Effect{"", Allow, Ask, Deny} {
		e := newEngine(t, Options{DefaultEffect: eff})
		d, _ := e.Decide(context.Background(), mustParse(t, "rules:\n  - {id: A-1, effect: allow, tool: Bash}\n"), Call{Tool: "Read"})
		want := eff
		if want == "" {
			want = Deny
		}
		if d.Effect != want || !d.Default {
			t.Errorf("Decide() with DefaultEffect %q = %s default %v, want %s default true", eff, d.Effect, d.Default, want)
		}
	}
	if _, err := New(Options{DefaultEffect: "maybe"}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(DefaultEffect maybe) = %v, want ErrInvalidOptions", err)
	}
	if _, err := New(Options{EvalTimeout: -1}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("New(EvalTimeout -1) = %v, want ErrInvalidOptions", err)
	}
}

func TestEvalTimeout(t *testing.T) {
	e := newEngine(t, Options{EvalTimeout: 1})
	p := mustParse(t, "rules:\n  - {id: A-1, effect: allow, tool: Bash, when: 'args.x == 1'}\n")
	d, _ := e.Decide(context.Background(), p, Call{Tool: "Bash", Args: json.RawMessage(`{"x":1}`)})
	if d.Effect != Deny || d.Errors["A-1"] == "" {
		t.Errorf("Decide() with 1ns timeout = %s %v, want deny with error for A-1", d.Effect, d.Errors)
	}
}

func TestResolve(t *testing.T) {
	var calls atomic.Int32
	fake := func(_ context.Context, host string) ([]netip.Addr, error) {
		calls.Add(1)
		switch host {
		case "rebind.example.com":
			return []netip.Addr{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("169.254.169.254")}, nil
		case "private.example.com":
			return []netip.Addr{netip.MustParseAddr("::ffff:10.0.0.1")}, nil
		case "fail.example.com":
			return nil, errors.New("no such host")
		}
		return []netip.Addr{netip.MustParseAddr("93.184.216.34")}, nil
	}
	tests := []struct {
		name    string
		resolve bool
		url     string
		want    []string
	}{
		{"off", false, "http://rebind.example.com/", []string{"A-1"}},
		{"metadata", true, "http://rebind.example.com/", []string{RuleNetMetadata, RuleNetInternal, "A-1"}},
		{"private mapped", true, "http://private.example.com/", []string{RuleNetInternal, "A-1"}},
		{"failure", true, "http://fail.example.com/", []string{RuleNetAmbiguous, "A-1"}},
		{"public", true, "http://ok.example.com/", []string{"A-1"}},
		{"literal not resolved", true, "http://93.184.216.34/", []string{"A-1"}},
	}
	p := mustParse(t, "rules:\n  - {id: A-1, effect: allow, tool: WebFetch}\n")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			e := newEngine(t, Options{Resolve: tt.resolve, Resolver: fake})
			d, _ := e.Decide(context.Background(), p, Call{Tool: "WebFetch", Args: mustJSON(t, map[string]any{"url": tt.url, "other": map[string]any{"uri": tt.url}})})
			if !slices.Equal(d.RuleIDs, tt.want) {
				t.Errorf("Decide(%s, resolve %v) = %s %v, want %v", tt.url, tt.resolve, d.Effect, d.RuleIDs, tt.want)
			}
			if tt.name == "literal not resolved" || !tt.resolve {
				if n := calls.Load(); n != 0 {
					t.Errorf("resolver called %d times, want 0", n)
				}
			} else if n := calls.Load(); n != 1 {
				t.Errorf("resolver called %d times for one host, want 1", n)
			}
		})
	}
}

func TestDecideDestination(t *testing.T) {
	e := newEngine(t, Options{})
	d, _ := e.Decide(context.Background(), nil, Call{Tool: "X", Args: json.RawMessage(`{"a":{"url":"https://example.com"},"b":{"url":"http://0xA9FEA9FE/"}}`)})
	if d.Destination == nil || d.Destination.Kind != KindMetadata || d.Destination.Host != "169.254.169.254" || len(d.Destinations) != 2 {
		t.Errorf("Decide().Destination = %+v (of %d), want metadata 169.254.169.254 of 2", d.Destination, len(d.Destinations))
	}
}
