package policy

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

// internalByStdlib is an independent check of an address using only
// net/netip predicates.
func internalByStdlib(a netip.Addr) bool {
	a = a.Unmap().WithZone("")
	return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsUnspecified() || a.IsMulticast() || a.IsInterfaceLocalMulticast() ||
		netip.MustParsePrefix("100.64.0.0/10").Contains(a) || netip.MustParsePrefix("0.0.0.0/8").Contains(a)
}

func FuzzClassifyURL(f *testing.F) {
	for _, tt := range destTests {
		f.Add(tt.in)
	}
	f.Add("http://[::ffff:7f00:1]:80/")
	f.Add("HTTP://LocalHost./")
	f.Fuzz(func(t *testing.T, in string) {
		d := ClassifyURL(in)
		if d.Kind != KindPublic {
			return
		}
		cands := []string{in}
		if !strings.Contains(in, "://") && !strings.HasPrefix(in, "//") {
			cands = append(cands, "http://"+in) // how ClassifyURL reads a bare host
		}
		for _, s := range cands {
			u, err := url.Parse(s)
			if err != nil {
				continue
			}
			h := u.Hostname()
			if a, err := netip.ParseAddr(h); err == nil && internalByStdlib(a) {
				t.Errorf("ClassifyURL(%q) = public (host %q), but net/url reads %q as host %q, internal", in, d.Host, s, h)
			}
			if l := strings.ToLower(strings.TrimSuffix(h, ".")); l == "localhost" || l == "metadata.google.internal" {
				t.Errorf("ClassifyURL(%q) = public (host %q), but net/url reads %q as host %q", in, d.Host, s, h)
			}
		}
	})
}

func FuzzParsePolicy(f *testing.F) {
	f.Add([]byte(testPolicy))
	f.Add([]byte(""))
	f.Add([]byte("rules:\n  - {id: A-1, effect: deny, tool: '*', when: 'dest.kind == \"public\"'}\n"))
	f.Add([]byte("rules:\n  - id: A-1\n    effect: deny\n    tool: x\n    when: 'args.x.y[0] > 1'\n"))
	f.Add([]byte("x: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil {
				t.Errorf("Parse() = %v, %v: want nil policy with error", p, err)
			}
			return
		}
		if !strings.HasPrefix(p.Hash(), "sha256:") {
			t.Errorf("Hash() = %q", p.Hash())
		}
	})
}
