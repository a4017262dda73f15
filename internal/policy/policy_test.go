package policy

import (
	"errors"
	"strings"
	"testing"
)

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantID   string
		wantLine int
		wantMsg  string
	}{
		{"not yaml", "rules: [", "", 0, "yaml"},
		{"top level list", "- a\n", "", 1, "top level"},
		{"unknown top key", "rulez: []\n", "", 1, `unknown key "rulez"`},
		{"rules not list", "rules: 3\n", "", 1, "must be a list"},
		{"rule not map", "rules:\n  - x\n", "", 2, "must be a mapping"},
		{"unknown field", "rules:\n  - id: ACME-001\n    effect: deny\n    tool: Bash\n    whne: 'true'\n", "ACME-001", 5, `unknown key "whne"`},
		{"duplicate field", "rules:\n  - id: ACME-001\n    effect: deny\n    effect: allow\n    tool: Bash\n", "ACME-001", 4, `duplicate key "effect"`},
		{"duplicate id", "rules:\n  - {id: ACME-001, effect: deny, tool: Bash}\n  - {id: ACME-001, effect: allow, tool: Bash}\n", "ACME-001", 3, "duplicate rule id (first at line 2)"},
		{"missing id", "rules:\n  - {effect: deny, tool: Bash}\n", "", 2, "missing id"},
		{"bad id", "rules:\n  - {id: acme-1, effect: deny, tool: Bash}\n", "", 2, "bad id"},
		{"reserved id", "rules:\n  - {id: CUSTODY-NET-METADATA, effect: allow, tool: Bash}\n", "CUSTODY-NET-METADATA", 2, "reserved"},
		{"bad effect", "rules:\n  - {id: ACME-001, effect: permit, tool: Bash}\n", "ACME-001", 2, `bad effect "permit"`},
		{"missing effect", "rules:\n  - {id: ACME-001, tool: Bash}\n", "ACME-001", 2, "missing effect"},
		{"missing tool", "rules:\n  - {id: ACME-001, effect: deny}\n", "ACME-001", 2, "missing tool"},
		{"bad glob", "rules:\n  - {id: ACME-001, effect: deny, tool: 'Web Fetch'}\n", "ACME-001", 2, "bad tool glob"},
		{"bracket glob", "rules:\n  - {id: ACME-001, effect: deny, tool: 'mcp__[a]'}\n", "ACME-001", 2, "bad tool glob"},
		{"non-string effect", "rules:\n  - {id: ACME-001, effect: [deny], tool: Bash}\n", "ACME-001", 2, "effect must be a string"},
		{"bool when", "rules:\n  - {id: ACME-001, effect: deny, tool: Bash, when: true}\n", "ACME-001", 2, "when must be a string"},
		{"empty when", "rules:\n  - {id: ACME-001, effect: deny, tool: Bash, when: ' '}\n", "ACME-001", 2, "when is empty"},
		{"cel syntax", "rules:\n  - id: ACME-001\n    effect: deny\n    tool: Bash\n    when: 'args.x =='\n", "ACME-001", 5, "when:"},
		{"cel unknown var", "rules:\n  - id: ACME-001\n    effect: deny\n    tool: Bash\n    when: 'nope == 1'\n", "ACME-001", 5, "undeclared reference"},
		{"cel not bool", "rules:\n  - id: ACME-001\n    effect: deny\n    tool: Bash\n    when: 'tool + \"x\"'\n", "ACME-001", 5, "want bool"},
		{"cel dyn", "rules:\n  - id: ACME-001\n    effect: deny\n    tool: Bash\n    when: 'args.flag'\n", "ACME-001", 5, "want bool"},
		{"alias", "x: &a ACME\nrules: []\n", "", 1, "anchors"},
		{"too big", "rules: []\n" + strings.Repeat("#", MaxPolicySize), "", 0, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse("acme.yaml", []byte(tt.in))
			if err == nil {
				t.Fatalf("Parse(%q) = %v, nil, want error", tt.in, p)
			}
			if !errors.Is(err, ErrInvalidPolicy) {
				t.Errorf("Parse(%q) error %v does not wrap ErrInvalidPolicy", tt.in, err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T, want *ParseError", tt.in, err)
			}
			if pe.RuleID != tt.wantID || pe.Line != tt.wantLine || !strings.Contains(pe.Msg, tt.wantMsg) {
				t.Errorf("Parse(%q) = %v (rule %q line %d), want rule %q line %d msg containing %q",
					tt.in, err, pe.RuleID, pe.Line, tt.wantID, tt.wantLine, tt.wantMsg)
			}
		})
	}
}

func TestParseOK(t *testing.T) {
	in := `# acme policy
rules:
  - id: ACME-001
    effect: allow
    tool: Bash
  - id: ACME-002
    effect: deny
    tool: "mcp__*"
    when: 'args.repo.startsWith("acme/secret")'
    description: no secret repos
`
	p, err := Parse("acme.yaml", []byte(in))
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	if got, want := p.Hash(), "sha256:"; !strings.HasPrefix(got, want) || len(got) != 7+64 {
		t.Errorf("Hash() = %q, want sha256:<64 hex>", got)
	}
	rs := p.Rules()
	if len(rs) != 2 || rs[1].ID != "ACME-002" || rs[1].Line != 6 || rs[1].Description != "no secret repos" {
		t.Errorf("Rules() = %+v", rs)
	}
	for _, in := range []string{"", "rules:\n", "rules: []\n", "# nothing\n"} {
		if _, err := Parse("x", []byte(in)); err != nil {
			t.Errorf("Parse(%q) = %v, want nil", in, err)
		}
	}
	p2, _ := Parse("other-name", []byte(in+" "))
	if p2.Hash() == p.Hash() {
		t.Errorf("Hash() same for different bytes")
	}
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		g, name string
		want    bool
	}{
		{"WebFetch", "WebFetch", true},
		{"WebFetch", "webfetch", false},
		{"WebFetch", "WebFetchX", false},
		{"*", "anything", true},
		{"*", "", true},
		{"mcp__*", "mcp__github__create_issue", true},
		{"mcp__*", "mcp_x", false},
		{"mcp__*__create_*", "mcp__github__create_issue", true},
		{"mcp__*__create_*", "mcp__github__delete_issue", false},
		{"Web????h", "WebFetch", true},
		{"*a*a*a*b", strings.Repeat("a", 100), false},
		{"a/*", "a/b/c", true},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.g, tt.name); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tt.g, tt.name, got, tt.want)
		}
	}
}
