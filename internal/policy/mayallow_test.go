package policy

import "testing"

func TestMayAllow(t *testing.T) {
	p := mustParse(t, `rules:
  - id: T-1
    effect: allow
    tool: "mcp__gh__*"
  - id: T-2
    effect: deny
    tool: "mcp__gh__delete_*"
  - id: T-3
    effect: deny
    tool: "mcp__gh__push"
    when: 'args.force == true'
  - id: T-4
    effect: ask
    tool: "mcp__gh__merge"
  - id: T-5
    effect: allow
    tool: "mcp__fs__read"
    when: 'args.path.startsWith("/work")'
`)
	deny := newEngine(t, Options{})
	allow := newEngine(t, Options{DefaultEffect: Allow})
	for _, tc := range []struct {
		tool              string
		policy            *Policy
		wantDeny, wantAll bool
	}{
		{"mcp__gh__list_issues", p, true, true},
		{"mcp__gh__delete_repo", p, false, false}, // unconditional deny wins
		{"mcp__gh__push", p, true, true},          // conditional deny: some args pass
		{"mcp__gh__merge", p, true, true},         // ask: may be approved
		{"mcp__fs__read", p, true, true},          // conditional allow: maybe
		{"mcp__fs__write", p, false, true},        // no rule: the default decides
		{"Bash", nil, false, true},
	} {
		if got := deny.MayAllow(tc.policy, tc.tool); got != tc.wantDeny {
			t.Errorf("MayAllow(%s) default deny = %v, want %v", tc.tool, got, tc.wantDeny)
		}
		if got := allow.MayAllow(tc.policy, tc.tool); got != tc.wantAll {
			t.Errorf("MayAllow(%s) default allow = %v, want %v", tc.tool, got, tc.wantAll)
		}
	}
}
