package policy

// MayAllow reports whether some call of tool could be allowed under
// policy p (nil: built-in rules and the default only), directly or after
// an approval (ask), whatever its arguments: false when a tenant rule
// without when denies tool (no arguments can escape it), or when no rule
// that allows or asks matches tool and the default effect is deny. A rule
// with a when counts as possibly matching (its condition is not
// evaluated), so true means "not ruled out", not "allowed". The built-in
// rules deny by arguments only and never rule a tool out. It costs one
// glob match per tenant rule.
//
// The MCP proxy hides the tools for which it is false from tools/list.
func (e *Engine) MayAllow(p *Policy, tool string) bool {
	canAllow := e.opts.DefaultEffect != Deny
	if p == nil {
		return canAllow
	}
	for i := range p.rules {
		r := &p.rules[i]
		if !matchGlob(r.Tool, tool) {
			continue
		}
		switch {
		case r.Effect == Deny && r.prog == nil:
			return false
		case r.Effect == Allow, r.Effect == Ask:
			canAllow = true
		}
	}
	return canAllow
}
