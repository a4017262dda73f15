package providerreach

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// attackNestedTools is a body of levels tools each holding the next
// ({"name":"n","tools":{...}}, allowed: a named tool's "tools" is read as
// a group), the innermost with a description of pad bytes.
func attackNestedTools(levels, pad int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"model":"m","tools":`)
	for range levels {
		sb.WriteString(`{"name":"n","tools":`)
	}
	sb.WriteString(`{"name":"f","description":"` + strings.Repeat("a", pad) + `"}`)
	sb.WriteString(strings.Repeat("}", levels))
	sb.WriteString(`}`)
	return []byte(sb.String())
}

// attackFlatTools is a body of about the same size with one tool.
func attackFlatTools(pad int) []byte {
	return []byte(`{"model":"m","tools":[{"name":"f","description":"` + strings.Repeat("a", pad) + `"}]}`)
}

// BenchmarkAttackProviderReachNestedTools: the cost of the check on a
// body of nested tools against a flat body of the same size (MB/s).
func BenchmarkAttackProviderReachNestedTools(b *testing.B) {
	base := &url.URL{Scheme: "https", Host: "api.anthropic.com"}
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"flat", attackFlatTools(1 << 20)},
		{"nested200", attackNestedTools(200, 1<<20)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.body)))
			b.ReportAllocs()
			for b.Loop() {
				reach(c.body, base)
			}
		})
	}
}

// FINDING (high, denial of service of the whole gateway by one request
// on the default route): the check re-decodes every tool from its own
// bytes at each level of nesting, and keeps every level's copy alive
// while it recurses: tools() reads the tool whole (ReadValue, buffered by
// the parent decoder), toolReach decodes it once for its members and
// again with a new decoder (a new buffer as large as the tool) for the
// sub-scan, whose own "tools" does the same for the next level. A body of
// N nested tools ({"name":"n","tools":{...}}, a named tool's group, or
// OpenAI namespaces; up to maxToolsDepth = 256 levels as objects) costs
// O(N x size) in time and in live memory. Measured (go test -c; the body
// is otherwise ordinary and is forwarded): 4 MiB nested 200 deep, 7.6 s
// and 2.0 GB max RSS for one check; 8 MiB nested 250 deep, 21 s and
// 5.2 GB. A 32 MiB body (maxModelBody) nested 250 deep needs ~20 GB: one
// sandbox request gets the gateway OOM-killed, for every tenant and
// provider (the 128 MiB bound on held bodies does not bound this). With
// BenchmarkAttackProviderReachNestedTools (1 MiB, 200 levels): 1.09 s and
// 1.7 GB allocated per check against 20 ms and 12.6 MB for the flat body
// of the same size. The check should decode each byte a bounded number of
// times with one decoder (read a tool's members in one pass, as value()
// does), not hold a copy per level. This test measures bytes allocated
// per call, which is deterministic, against the body's size.
func TestAttackProviderReachNestedToolsCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocation")
	}
	base := &url.URL{Scheme: "https", Host: "api.anthropic.com"}
	body := attackNestedTools(200, 256<<10)
	if got, err := reach(body, base); err != nil || got != "" {
		t.Fatalf("providerReach = %q, %v; want an ordinary body", got, err)
	}
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			reach(body, base)
		}
	})
	if per := float64(r.AllocedBytesPerOp()) / float64(len(body)); per > 16 {
		t.Errorf("checking a %d-byte body of 200 nested tools allocates %d bytes (%.0fx the body; %v per check): the work grows with depth x size",
			len(body), r.AllocedBytesPerOp(), per, r.T/time.Duration(r.N))
	}
}
