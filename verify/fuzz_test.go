package verify_test

import (
	"bytes"
	"testing"

	"github.com/agentcustody/custody/verify"
)

func FuzzParseRecord(f *testing.F) {
	fx := newFixture(f)
	for _, r := range fx.closedA.Records {
		f.Add(r.Record)
	}
	f.Add([]byte(`{"body":{},"body":{}}`))
	f.Add([]byte(`{"body":{"n":9007199254740993}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := verify.ParseRecord(raw)
		if err != nil {
			return
		}
		// Whatever parses must re-encode to the same bytes.
		out, err := verify.CanonicalRecord(r)
		if err != nil || !bytes.Equal(out, raw) {
			t.Fatalf("CanonicalRecord(ParseRecord(%q)) = %q, %v", raw, out, err)
		}
	})
}

func FuzzVerifyBundle(f *testing.F) {
	fx := newFixture(f)
	f.Add(marshal(f, fx.closedA))
	f.Add(marshal(f, fx.openB))
	f.Add([]byte(verify.BundleMagic + "\n{\"v\":1,\"run\":\"r\",\"closed\":false}\nR\t{}\tAAAA\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		res, err := verify.Verify(b, fx.trust, verify.WithWorkers(2))
		if err == nil && res.Records == 0 {
			t.Fatalf("Verify accepted a bundle with no records")
		}
	})
}

func FuzzParseCheckpoint(f *testing.F) {
	f.Add([]byte("example.com/log\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n"))
	f.Add([]byte("example.com/log\n0\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\nx\n"))
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := verify.ParseCheckpoint(text)
		if err != nil {
			return
		}
		out, err := verify.FormatCheckpoint(c)
		if err != nil || !bytes.Equal(out, text) {
			t.Fatalf("FormatCheckpoint(ParseCheckpoint(%q)) = %q, %v", text, out, err)
		}
	})
}
