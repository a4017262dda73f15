// Package policy decides each agent tool call: allow, ask (a human
// approves) or deny, from a per-tenant rule file and built-in network rules
// that a tenant cannot switch off.
//
// # Format
//
// A policy is a YAML file with one key, rules, a list of rules:
//
//	rules:
//	  - id: ACME-001
//	    effect: deny            # deny | ask | allow
//	    tool: "mcp__*"          # glob over the tool name: * any run, ? one character
//	    when: 'args.repo.startsWith("acme/secret")'   # CEL, optional (default true)
//	    description: no MCP access to secret repositories
//
// Parsing is strict: unknown keys, duplicate keys or rule ids, a bad
// effect, a bad glob, YAML anchors and aliases, non-string values, and CEL
// that does not compile or whose type is not bool are errors naming the
// rule id and the line ([*ParseError], which wraps [ErrInvalidPolicy]).
// Rule ids match ^[A-Z][A-Z0-9]*-[A-Z0-9]+(-[A-Z0-9]+)*$ (ACME-001); ids
// starting with CUSTODY- are reserved for built-in rules. An empty file
// is a policy without rules. The file is at most 1 MiB with at most 1000
// rules. A glob is made of letters, digits and _ - . : / * ?.
//
// The policy's hash ([Policy.Hash]) is "sha256:" and the lowercase hex
// SHA-256 of the exact file bytes given to [Parse]; the signer records it
// with every decision and snapshots the bytes.
//
// # CEL environment
//
// A when expression sees:
//
//	tool    string                 the tool name
//	args    map(string, dyn)       the call's JSON arguments (integral numbers are int)
//	tenant, agent, session string  who calls
//	dest    map(string, string)    {host, ip, kind} of the call's primary destination
//	dests   list(map(string, string)) every destination found in args, in order
//
// dest is the most severe destination found (metadata, then internal,
// ambiguous, public); with none, dest is {host: "", ip: "", kind: "none"}.
// Evaluation is bounded by a cost limit ([MaxCost]) and by
// [Options.EvalTimeout].
//
// # Decision
//
// Every rule whose tool glob matches and whose when is true matches. The
// strictest effect of the matching rules wins (deny > ask > allow) and the
// decision lists every matching rule id: the built-in rules first (in the
// order below), then tenant rules in file order. A when that fails to
// evaluate (an error, a missing key, the cost limit, the time limit)
// matches with effect deny and its message in [Decision.Errors]. With no
// matching rule the effect is [Options.DefaultEffect], deny unless
// configured otherwise.
//
// # Built-in rules
//
// The built-in rules are evaluated for every call, with or without a
// tenant policy; a tenant can only add rules, and a tenant allow never
// outweighs a built-in deny.
//
//   - CUSTODY-NET-METADATA denies a call with a destination of kind
//     metadata (169.254.169.254, 169.254.170.2, 169.254.170.23,
//     100.100.100.200, 192.0.0.192, fd00:ec2::254, fd00:ec2::23,
//     metadata, metadata.google.internal, metadata.goog,
//     metadata.azure.com, instance-data, …).
//   - CUSTODY-NET-INTERNAL denies a destination of an internal kind:
//     metadata, loopback, private, link_local, cgnat, ula,
//     cluster_internal, multicast, unspecified (see [Kind.Internal]).
//   - CUSTODY-NET-AMBIGUOUS denies a destination two reasonable parsers
//     could read differently.
//   - CUSTODY-ARGS-INVALID denies a call whose arguments are not one JSON
//     object with unique keys.
//   - CUSTODY-POLICY-INVALID: the signer denies every call of a tenant
//     whose policy file does not parse, until the file is fixed (the
//     previous version is not kept: an edit that breaks the file must
//     not leave a looser policy in force).
//
// A call's destinations are found in its arguments, at every level of
// nesting (up to the 64 levels arguments may have): every string under a
// key named url, uri, endpoint, host or hostname (case-insensitive; also
// each string of a list under such a key), and every integral number
// there (2852039166 or 2852039166.0), read as its decimal string (a tool
// may format it into a URL:
// http://2852039166/ is 169.254.169.254); every string under address or
// target that looks like a host, leading and trailing whitespace aside
// (it contains ".", ":", "/" or "[", or is a numeric or special name such
// as localhost or metadata); and every
// string that starts with a scheme ("scheme://" or "scheme:\\").
//
// Any other string is free text (a shell command, a script, a prompt)
// and is searched for cloud metadata endpoints only — a URL with a scheme
// anywhere in it, a bare token written as an IP address in any notation
// (IPv6 too) or as a metadata or wildcard-DNS name, or such a host inside
// a token ("/dev/tcp/HOST/80", "TCP:HOST:80", "--resolve x:80:HOST"),
// also after removing shell quotes and $x/${x} expansions, e.g.
// "curl -s 169.254.169.254/latest" — which CUSTODY-NET-METADATA denies
// (marked in_text). So are URL-valued arguments: a value is free text too
// unless it is, as a whole, a metadata URL. Other internal
// addresses in free text are not denied (a dev server on localhost is
// ordinary); nor can a text search see an address a command computes
// ($(printf ...), variables, bash brace expansion and curl's URL globbing
// such as 169.254.169.{254,1} or 169.254.169.25[4-4], DNS names the
// agent controls): network
// policy around the sandbox is the enforcement, this is the record.
//
// # Destination classification
//
// [ClassifyURL] and [ClassifyHost] normalise every notation an HTTP client
// or resolver accepts before classifying, and call ambiguous what parsers
// disagree on:
//
//   - Whitespace, control or format characters anywhere, invalid UTF-8, a
//     backslash before the path ends (http:\\h, http://a\@h), more than
//     one @ in the authority, an unbracketed IPv6 address, a bad port,
//     "http:h" or "http:/h", an empty host for http(s), ws(s), ftp or a
//     scheme-relative URL, a host net/url reads differently: ambiguous.
//   - "//h/p" is read as http://h/p; a string without a scheme as
//     host[:port][/path]; "mailto:…" and other opaque URIs are kind none,
//     as is a URL of another scheme without a host (file:///etc/passwd).
//   - The userinfo is dropped (http://evil.example@169.254.169.254/ is
//     169.254.169.254); the host is percent-decoded once (decoding to a
//     further % is ambiguous); non-ASCII hosts are mapped by IDNA UTS #46
//     (fullwidth digits and dots become ASCII) or are ambiguous; case is
//     folded and one trailing dot removed (two, or an empty label, is
//     ambiguous); characters other than letters, digits, - _ . are
//     ambiguous.
//   - A host whose last label is numeric (digits, or 0x and hex digits)
//     is an IPv4 address as inet_aton and WHATWG read it: 1 to 4 parts,
//     decimal, octal (leading 0) or hex (0x), the last part filling the
//     remaining bytes (2852039166, 0xA9FEA9FE, 0251.0376.0251.0376,
//     169.254.43518, 169.16689662). A part with a leading zero whose
//     decimal reading gives another address, overflow, or "0x" alone is
//     ambiguous; so is 1.2.3.4.5. But when either reading of such a
//     leading zero is a metadata address (0251.254.169.254,
//     169.254.169.0254), the host is that address: some client reaches
//     the metadata service with it, and free text denies only metadata.
//   - An IPv6 address (bracketed, with or without zone; a zone on a
//     global address is ambiguous) embedding IPv4 is classified by the
//     IPv4 address: IPv4-mapped ::ffff:0:0/96, -compatible ::/96, SIIT
//     ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4
//     2002::/16, Teredo 2001::/32 (the client address).
//   - Names: metadata names are metadata; localhost and *.localhost are
//     loopback; single-label names and names under .svc, .cluster.local,
//     .internal, .local, .localdomain, .home.arpa, .intranet, .private,
//     .corp, .home, .lan, .arpa reverse zones, .test, .invalid, .example,
//     .onion, .alt are cluster_internal; other names are public.
//   - Addresses: the ranges of [Kind]; other special-purpose IPv4 ranges
//     (240/4, 192.0.0/24, documentation, benchmarking) and IPv6 addresses
//     that are not global unicast or are documentation, discard or ORCHID
//     are private.
//
// With [Options.Resolve], a public name is also resolved and the call is
// denied when any address is internal (the destination takes that
// address's kind) or when resolution fails (ambiguous).
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/cel"
	"go.yaml.in/yaml/v3"
)

// Effect is what a rule or decision says about a call.
type Effect string

const (
	Allow Effect = "allow"
	Ask   Effect = "ask"
	Deny  Effect = "deny"
)

func (e Effect) rank() int {
	switch e {
	case Allow:
		return 1
	case Ask:
		return 2
	case Deny:
		return 3
	}
	return 0
}

// Valid reports whether e is allow, ask or deny.
func (e Effect) Valid() bool { return e.rank() > 0 }

// Built-in rule ids.
const (
	RuleNetMetadata  = "CUSTODY-NET-METADATA"
	RuleNetInternal  = "CUSTODY-NET-INTERNAL"
	RuleNetAmbiguous = "CUSTODY-NET-AMBIGUOUS"
	RuleArgsInvalid  = "CUSTODY-ARGS-INVALID"
	// RulePolicyInvalid is the rule id under which the signer denies every
	// call of a tenant whose policy file does not parse (the signer, not
	// [Engine.Decide], applies it).
	RulePolicyInvalid = "CUSTODY-POLICY-INVALID"
)

// ReservedPrefix starts the ids of built-in rules.
const ReservedPrefix = "CUSTODY-"

// Limits.
const (
	// MaxPolicySize is the largest policy file in bytes.
	MaxPolicySize = 1 << 20
	// MaxRules is the most rules a policy holds.
	MaxRules = 1000
	// MaxCost is the CEL runtime cost limit of one when expression.
	MaxCost = 100_000
)

// Sentinel errors, tested with errors.Is.
var (
	// ErrInvalidPolicy: a policy file was refused ([*ParseError]).
	ErrInvalidPolicy = errors.New("invalid policy")
	// ErrInvalidArgs: a call's arguments are not a JSON object with
	// unique keys. The decision is still a valid deny.
	ErrInvalidArgs = errors.New("invalid call arguments")
	// ErrInvalidOptions: [New] was given bad options.
	ErrInvalidOptions = errors.New("invalid policy options")
)

// ParseError is why a policy file was refused. It wraps [ErrInvalidPolicy].
type ParseError struct {
	Name   string // the policy's name as given to Parse
	Line   int    // 1-based; 0 when unknown
	RuleID string // empty when the error is not in a rule or the id is unknown
	Msg    string
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("policy ")
	b.WriteString(e.Name)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.RuleID != "" {
		b.WriteString(": rule ")
		b.WriteString(e.RuleID)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

func (e *ParseError) Unwrap() error { return ErrInvalidPolicy }

// Rule is one tenant rule.
type Rule struct {
	ID          string
	Effect      Effect
	Tool        string // glob
	When        string // CEL; empty means true
	Description string
	Line        int // line of the rule in the file

	prog cel.Program // nil when When is empty
}

// Policy is a parsed tenant policy. It is immutable and safe for
// concurrent use.
type Policy struct {
	name  string
	hash  string
	rules []Rule
}

// Name is the name given to [Parse].
func (p *Policy) Name() string { return p.name }

// Hash is "sha256:" and the lowercase hex SHA-256 of the file bytes.
func (p *Policy) Hash() string { return p.hash }

// Rules returns a copy of the tenant rules in file order.
func (p *Policy) Rules() []Rule { return append([]Rule(nil), p.rules...) }

func hashBytes(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// emptyHash is the hash of an empty policy, used for a nil *Policy.
var emptyHash = hashBytes(nil)

var ruleIDRE = regexp.MustCompile(`^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$`)

// Parse parses and compiles a policy file. name is used in errors only.
// The error is a [*ParseError].
func Parse(name string, data []byte) (*Policy, error) {
	fail := func(line int, id, format string, a ...any) error {
		return &ParseError{Name: name, Line: line, RuleID: id, Msg: fmt.Sprintf(format, a...)}
	}
	if len(data) > MaxPolicySize {
		return nil, fail(0, "", "larger than %d bytes", MaxPolicySize)
	}
	p := &Policy{name: name, hash: hashBytes(data)}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fail(0, "", "%v", err)
	}
	if doc.Kind == 0 { // empty file
		return p, nil
	}
	if err := noAliases(&doc); err != nil {
		return nil, fail(err.Line, "", "anchors and aliases are not allowed")
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, fail(root.Line, "", "top level must be a mapping with key rules")
	}
	var rulesNode *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k := root.Content[i]
		if k.Value != "rules" {
			return nil, fail(k.Line, "", "unknown key %q", k.Value)
		}
		if rulesNode != nil {
			return nil, fail(k.Line, "", "duplicate key %q", k.Value)
		}
		rulesNode = root.Content[i+1]
	}
	if rulesNode == nil || rulesNode.Tag == "!!null" {
		return p, nil
	}
	if rulesNode.Kind != yaml.SequenceNode {
		return nil, fail(rulesNode.Line, "", "rules must be a list")
	}
	if len(rulesNode.Content) > MaxRules {
		return nil, fail(rulesNode.Line, "", "more than %d rules", MaxRules)
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	seen := map[string]int{}
	for _, rn := range rulesNode.Content {
		r, err := parseRule(rn, fail)
		if err != nil {
			return nil, err
		}
		if l, dup := seen[r.ID]; dup {
			return nil, fail(r.Line, r.ID, "duplicate rule id (first at line %d)", l)
		}
		seen[r.ID] = r.Line
		if r.When != "" {
			prg, msg := compileWhen(env, r.When)
			if msg != "" {
				return nil, fail(r.whenLine, r.ID, "when: %s", msg)
			}
			r.prog = prg
		}
		p.rules = append(p.rules, r.Rule)
	}
	return p, nil
}

type parsedRule struct {
	Rule
	whenLine int
}

func parseRule(n *yaml.Node, fail func(int, string, string, ...any) error) (parsedRule, error) {
	var r parsedRule
	r.Line = n.Line
	if n.Kind != yaml.MappingNode {
		return r, fail(n.Line, "", "a rule must be a mapping")
	}
	// Find the id first so that every later error names it.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == "id" && n.Content[i+1].Kind == yaml.ScalarNode {
			r.ID = n.Content[i+1].Value
		}
	}
	id := r.ID
	if !ruleIDRE.MatchString(id) {
		id = ""
	}
	got := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if got[k.Value] {
			return r, fail(k.Line, id, "duplicate key %q", k.Value)
		}
		got[k.Value] = true
		switch k.Value {
		case "id", "effect", "tool", "when", "description":
		default:
			return r, fail(k.Line, id, "unknown key %q", k.Value)
		}
		if v.Kind != yaml.ScalarNode || v.Tag != "!!str" {
			return r, fail(v.Line, id, "%s must be a string", k.Value)
		}
		switch k.Value {
		case "effect":
			r.Effect = Effect(v.Value)
		case "tool":
			r.Tool = v.Value
		case "when":
			r.When, r.whenLine = v.Value, v.Line
		case "description":
			r.Description = v.Value
		}
	}
	switch {
	case r.ID == "":
		return r, fail(n.Line, "", "missing id")
	case !ruleIDRE.MatchString(r.ID):
		return r, fail(n.Line, "", "bad id %q: want e.g. ACME-001", r.ID)
	case strings.HasPrefix(r.ID, ReservedPrefix):
		return r, fail(n.Line, r.ID, "ids starting with %s are reserved for built-in rules", ReservedPrefix)
	case !got["effect"]:
		return r, fail(n.Line, r.ID, "missing effect")
	case !r.Effect.Valid():
		return r, fail(n.Line, r.ID, "bad effect %q: want deny, ask or allow", r.Effect)
	case !got["tool"]:
		return r, fail(n.Line, r.ID, "missing tool")
	case !validGlob(r.Tool):
		return r, fail(n.Line, r.ID, "bad tool glob %q", r.Tool)
	case got["when"] && strings.TrimSpace(r.When) == "":
		return r, fail(r.whenLine, r.ID, "when is empty")
	}
	return r, nil
}

func noAliases(n *yaml.Node) *yaml.Node {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		return n
	}
	for _, c := range n.Content {
		if bad := noAliases(c); bad != nil {
			return bad
		}
	}
	return nil
}

// validGlob reports whether g is a tool glob: non-empty, at most 256
// bytes of letters, digits and _ - . : / * ?.
func validGlob(g string) bool {
	if g == "" || len(g) > 256 {
		return false
	}
	for i := 0; i < len(g); i++ {
		c := g[i]
		if !isLetter(c) && !(c >= '0' && c <= '9') && strings.IndexByte("_-.:/*?", c) < 0 {
			return false
		}
	}
	return true
}

// matchGlob reports whether name matches glob g: * matches any run of
// characters (including none), ? exactly one byte, everything else itself.
// It runs in O(len(g)·len(name)) at worst.
func matchGlob(g, name string) bool {
	gi, ni := 0, 0
	star, mark := -1, 0
	for ni < len(name) {
		switch {
		case gi < len(g) && (g[gi] == '?' || g[gi] == name[ni]):
			gi++
			ni++
		case gi < len(g) && g[gi] == '*':
			star, mark = gi, ni
			gi++
		case star >= 0:
			gi = star + 1
			mark++
			ni = mark
		default:
			return false
		}
	}
	for gi < len(g) && g[gi] == '*' {
		gi++
	}
	return gi == len(g)
}
