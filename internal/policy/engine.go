package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
)

// Resolver looks up the addresses of a host name. It must be safe for
// concurrent use and honour ctx's deadline.
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// Options configure an [Engine]. The zero value of each field means its
// default.
type Options struct {
	// DefaultEffect is the effect when no rule matches. Default [Deny]:
	// a tenant must allow (or ask for) what its agents may do.
	DefaultEffect Effect
	// EvalTimeout bounds the CEL evaluation of all rules of one decision;
	// a rule still running when it passes fails (deny). Default 100 ms.
	EvalTimeout time.Duration
	// Resolve makes the engine resolve public host names and treat the
	// destination as internal when any address is. Off by default: it
	// costs a lookup per call and the tool may still resolve differently
	// later (DNS rebinding), so the network policy of the tool's sandbox
	// stays the real barrier.
	Resolve bool
	// Resolver resolves names when Resolve is set. Default
	// net.DefaultResolver.LookupNetIP(ctx, "ip", host).
	Resolver Resolver
	// ResolveTimeout bounds each lookup, and twice it all lookups of one
	// decision. Default 2 s. A failed or timed out lookup makes the
	// destination ambiguous (deny), as does every host of a decision past
	// the first maxResolveHosts distinct ones.
	ResolveTimeout time.Duration
	// Log receives one Warn line per failed rule evaluation. Default
	// slog.Default().
	Log *slog.Logger
}

// Engine decides calls. It is safe for concurrent use.
type Engine struct {
	opts Options
	log  *slog.Logger
}

// New returns an engine. It rejects an invalid DefaultEffect and negative
// durations ([ErrInvalidOptions]).
func New(opts Options) (*Engine, error) {
	if opts.DefaultEffect == "" {
		opts.DefaultEffect = Deny
	}
	if !opts.DefaultEffect.Valid() {
		return nil, fmt.Errorf("%w: default effect %q", ErrInvalidOptions, opts.DefaultEffect)
	}
	if opts.EvalTimeout < 0 || opts.ResolveTimeout < 0 {
		return nil, fmt.Errorf("%w: negative timeout", ErrInvalidOptions)
	}
	if opts.EvalTimeout == 0 {
		opts.EvalTimeout = 100 * time.Millisecond
	}
	if opts.ResolveTimeout == 0 {
		opts.ResolveTimeout = 2 * time.Second
	}
	if opts.Resolver == nil {
		opts.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if _, err := celEnv(); err != nil {
		return nil, fmt.Errorf("policy: CEL environment: %w", err)
	}
	return &Engine{opts: opts, log: opts.Log.With("service", "policy")}, nil
}

// Call is one agent tool call to decide.
type Call struct {
	Tool string
	// Args is the call's JSON arguments: an object, or empty or null for
	// none.
	Args    json.RawMessage
	Tenant  string
	Agent   string
	Session string
}

// Decision is the outcome for one call.
type Decision struct {
	Effect Effect `json:"effect"`
	// RuleIDs lists every matching rule: built-in rules first, then
	// tenant rules in file order. Empty when Default is set.
	RuleIDs []string `json:"rule_ids"`
	// Errors maps the id of each rule whose evaluation failed (and that
	// therefore denies) to the reason. Nil when none failed.
	Errors map[string]string `json:"errors,omitempty"`
	// Default is set when no rule matched and Effect is the default.
	Default bool `json:"default,omitempty"`
	// PolicyHash is the tenant policy's [Policy.Hash], or the hash of an
	// empty file for a nil policy.
	PolicyHash string `json:"policy_hash"`
	// Destination is the primary (most severe) destination, nil when the
	// arguments name none.
	Destination *Destination `json:"destination,omitempty"`
	// Destinations lists every destination found in the arguments.
	Destinations []Destination `json:"destinations,omitempty"`
}

// Decide decides call under policy p (nil: built-in rules and the
// default only). The returned Decision is always complete and usable; the
// error is non-nil only when the arguments are invalid ([ErrInvalidArgs]),
// and then the decision is a deny by [RuleArgsInvalid].
func (e *Engine) Decide(ctx context.Context, p *Policy, call Call) (Decision, error) {
	d := Decision{PolicyHash: emptyHash}
	if p != nil {
		d.PolicyHash = p.hash
	}
	args, err := decodeArgs(call.Args)
	if err != nil {
		d.Effect = Deny
		d.RuleIDs = []string{RuleArgsInvalid}
		d.Errors = map[string]string{RuleArgsInvalid: err.Error()}
		return d, fmt.Errorf("decide %s: %w", call.Tool, err)
	}
	d.Destinations = findDestinations(args)
	if e.opts.Resolve {
		e.resolve(ctx, d.Destinations)
	}
	best := -1
	var meta, internal, amb bool
	for i := range d.Destinations {
		k := d.Destinations[i].Kind
		meta = meta || k == KindMetadata
		internal = internal || k.Internal()
		amb = amb || k == KindAmbiguous
		if best < 0 || k.severity() > d.Destinations[best].Kind.severity() {
			best = i
		}
	}
	effect := Effect("")
	match := func(id string, eff Effect) {
		d.RuleIDs = append(d.RuleIDs, id)
		if eff.rank() > effect.rank() {
			effect = eff
		}
	}
	if meta {
		match(RuleNetMetadata, Deny)
	}
	if internal {
		match(RuleNetInternal, Deny)
	}
	if amb {
		match(RuleNetAmbiguous, Deny)
	}
	dest := map[string]string{"host": "", "ip": "", "kind": string(KindNone)}
	if best >= 0 {
		d.Destination = &d.Destinations[best]
		dest = d.Destination.celValue()
	}
	if p != nil && len(p.rules) > 0 {
		var act map[string]any
		var cancel context.CancelFunc = func() {}
		ectx := ctx
		for i := range p.rules {
			r := &p.rules[i]
			if !matchGlob(r.Tool, call.Tool) {
				continue
			}
			if r.prog == nil {
				match(r.ID, r.Effect)
				continue
			}
			if act == nil {
				dests := make([]map[string]string, len(d.Destinations))
				for j := range d.Destinations {
					dests[j] = d.Destinations[j].celValue()
				}
				act = map[string]any{
					"tool": call.Tool, "args": args, "tenant": call.Tenant, "agent": call.Agent,
					"session": call.Session, "dest": dest, "dests": dests,
				}
				ectx, cancel = context.WithTimeout(ctx, e.opts.EvalTimeout)
			}
			ok, err := evalBool(ectx, r.prog, act)
			if err != nil {
				if d.Errors == nil {
					d.Errors = map[string]string{}
				}
				d.Errors[r.ID] = err.Error()
				e.log.WarnContext(ctx, "policy rule evaluation failed", "rule", r.ID,
					"policy_hash", d.PolicyHash, "tool", call.Tool, "error", err)
				match(r.ID, Deny)
				continue
			}
			if ok {
				match(r.ID, r.Effect)
			}
		}
		cancel()
	}
	if effect == "" {
		effect, d.Default = e.opts.DefaultEffect, true
	}
	d.Effect = effect
	if d.RuleIDs == nil {
		d.RuleIDs = []string{}
	}
	return d, nil
}

func evalBool(ctx context.Context, prg cel.Program, act map[string]any) (ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("not evaluated: %w", err)
	}
	defer func() {
		if r := recover(); r != nil {
			ok, err = false, fmt.Errorf("panic in evaluation: %v", r)
		}
	}()
	out, _, err := prg.ContextEval(ctx, act)
	if err != nil {
		return false, err
	}
	b, isBool := out.Value().(bool)
	if !isBool {
		return false, fmt.Errorf("when evaluated to %s, want bool", out.Type().TypeName())
	}
	return b, nil
}

// maxResolveHosts bounds the distinct hosts one decision looks up: the
// arguments may name thousands (each a DNS query to the cluster's
// resolver, and up to ResolveTimeout with a name server that never
// answers); a call naming more is ambiguous anyway.
const maxResolveHosts = 16

// resolve looks up public names (once per host, at most maxResolveHosts
// of them, all within 2 ResolveTimeout) and reclassifies them.
func (e *Engine) resolve(ctx context.Context, ds []Destination) {
	type res struct {
		d  Destination
		ok bool
	}
	ctx, cancel := context.WithTimeout(ctx, 2*e.opts.ResolveTimeout)
	defer cancel()
	cache := map[string]res{}
	for i := range ds {
		d := &ds[i]
		if d.Kind != KindPublic || d.IP.IsValid() || d.Host == "" {
			continue
		}
		r, seen := cache[d.Host]
		if !seen {
			if len(cache) < maxResolveHosts {
				r = res{d: e.lookup(ctx, d.Host)}
			} else {
				r = res{d: ambiguous(fmt.Sprintf("more than %d hosts to resolve", maxResolveHosts))}
			}
			cache[d.Host] = r
		}
		if r.d.Kind != KindPublic {
			d.Kind, d.IP, d.Reason = r.d.Kind, r.d.IP, r.d.Reason
		}
	}
}

func (e *Engine) lookup(ctx context.Context, host string) Destination {
	ctx, cancel := context.WithTimeout(ctx, e.opts.ResolveTimeout)
	defer cancel()
	addrs, err := e.opts.Resolver(ctx, host)
	if err != nil {
		e.log.DebugContext(ctx, "policy resolve failed", "host", host, "error", err)
		return ambiguous("resolve failed")
	}
	if len(addrs) == 0 {
		return ambiguous("resolves to no address")
	}
	for _, a := range addrs {
		if c := classifyIP(a); c.Kind != KindPublic {
			c.Reason = "resolves to " + a.String() + ": " + c.Reason
			return c
		}
	}
	return Destination{Kind: KindPublic}
}

// celEnv is the one CEL environment; it is immutable once built.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("tool", cel.StringType),
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tenant", cel.StringType),
		cel.Variable("agent", cel.StringType),
		cel.Variable("session", cel.StringType),
		cel.Variable("dest", cel.MapType(cel.StringType, cel.StringType)),
		cel.Variable("dests", cel.ListType(cel.MapType(cel.StringType, cel.StringType))),
	)
})

// compileWhen compiles a when expression; msg is non-empty on failure.
func compileWhen(env *cel.Env, src string) (prg cel.Program, msg string) {
	defer func() {
		if r := recover(); r != nil {
			prg, msg = nil, fmt.Sprintf("compiler panic: %v", r)
		}
	}()
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, iss.Err().Error()
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) {
		return nil, fmt.Sprintf("type is %s, want bool (compare with == true for a dyn value)", t)
	}
	prg, err := env.Program(ast, cel.CostLimit(MaxCost), cel.InterruptCheckFrequency(64))
	if err != nil {
		return nil, err.Error()
	}
	return prg, ""
}
