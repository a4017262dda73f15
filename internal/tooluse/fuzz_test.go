package tooluse

import (
	"encoding/json"
	"testing"
)

// FuzzScanner checks that no body makes a Scanner panic, that the
// Result does not depend on how the body is split, and that it keeps its
// bounds.
func FuzzScanner(f *testing.F) {
	for _, tc := range scanCases {
		f.Add([]byte(tc.body), uint8(tc.f), tc.ct == ctSSE, uint64(7))
		f.Add([]byte(lineEnds(tc.body, "\r\n")), uint8(tc.f), tc.ct == ctSSE, uint64(31))
	}
	f.Fuzz(func(t *testing.T, body []byte, format uint8, stream bool, seed uint64) {
		fm := Format(format%4 + 1)
		ct := ctJSON
		if stream {
			ct = ctSSE
		}
		lim := Limits{MaxUses: 3, MaxArgs: 64, MaxJSON: 512}
		whole := NewScanner(fm, ct, lim)
		whole.Write(body)
		want := whole.Result()

		// Split where the seed says: piece sizes from its bits.
		split := NewScanner(fm, ct, lim)
		rest, x := body, seed|1
		for len(rest) > 0 {
			n := min(len(rest), int(x%17))
			x = x*6364136223846793005 + 1442695040888963407
			split.Write(rest[:n])
			rest = rest[n:]
		}
		if got := split.Result(); !same(got, want) {
			t.Fatalf("split by seed %d: Result() =\n%s\nwant\n%s", seed, show(got), show(want))
		}

		if len(want.Uses) > lim.MaxUses {
			t.Errorf("%d uses, want at most %d", len(want.Uses), lim.MaxUses)
		}
		for _, u := range want.Uses {
			if (u.Malformed || u.Truncated) != (u.Args == nil) {
				t.Errorf("use %+v: Args must be nil exactly when Malformed or Truncated", u)
			}
			if u.Args != nil && !json.Valid(u.Args) {
				t.Errorf("use %+v: Args not JSON", u)
			}
			if len(u.ID) > maxName || len(u.Name) > maxName {
				t.Errorf("use id or name over %d bytes", maxName)
			}
		}
	})
}
