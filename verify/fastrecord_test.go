package verify

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
)

func seedRecord(prev, body string) []byte {
	sig := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 64))
	return []byte(`{"body":` + body + `,"index":12,"key_id":"0a0b0c0d","log":"custody.local/log","prev":"` + prev +
		`","run":"r1","run_seq":3,"sig":"` + sig + `","time":"2026-11-25T10:00:01.500Z","type":"call.decided","v":1}`)
}

// FuzzFastRecordAgrees is the differential check of the verifier's fast
// record parser: whatever it accepts, ParseRecord accepts too, with the
// same field values. (It may refuse more; the verifier then falls back to
// ParseRecord.)
func FuzzFastRecordAgrees(f *testing.F) {
	f.Add(seedRecord("", `{}`))
	f.Add(seedRecord(strings.Repeat("ab", 32), `{"args_commitment":"x","policy_hash":"y"}`))
	f.Add(seedRecord("", `{"a":[1,2,{"b":"\u0000"}],"n":-9007199254740991}`))
	f.Add(seedRecord("", `{"b":1,"a":2}`))
	f.Add(seedRecord("", `{"a":[1.5,1e+21,-5e-324],"policy_hash":"y"}`))
	f.Add(seedRecord("", `{"a":[1.0,1e21]}`))
	f.Add(bytes.Replace(seedRecord("", `{}`), []byte(`"v":1`), []byte(`"v":2`), 1))
	f.Add(bytes.Replace(seedRecord("", `{"key_id":"0a0b0c0d","retired_from_index":5}`), []byte(`call.decided`), []byte(`key.retired`), 1))
	f.Add([]byte(`{"body":`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fr fastRecord
		var fast Record
		if !fr.parse(raw, &fast, func(_ int, b []byte) string { return string(b) }) {
			return
		}
		slow, err := ParseRecord(raw)
		if err != nil {
			t.Fatalf("fast parser accepted a record ParseRecord refuses (%v):\n%s", err, raw)
		}
		prev := ""
		if fr.hasPrev {
			prev = hex.EncodeToString(fr.prev[:])
		}
		if fast.V != slow.V || fast.Log != slow.Log || fast.Index != slow.Index || fast.Run != slow.Run ||
			fast.RunSeq != slow.RunSeq || prev != slow.Prev || fast.Type != slow.Type || !fast.Time.Equal(slow.Time) ||
			fast.KeyID != slow.KeyID || !bytes.Equal(fr.sig[:], slow.Sig) {
			t.Fatalf("fast and strict parsers disagree on\n%s\nfast %+v prev %q\nslow %+v", raw, fast, prev, slow)
		}
		// The body is built only when the verifier reads it.
		if (fast.Body != nil || fast.Type == TypeKeyRetired || bytes.Contains(raw, []byte(`"policy_hash"`))) && !reflect.DeepEqual(fast.Body, slow.Body) {
			t.Fatalf("fast and strict parsers disagree on the body of\n%s\nfast %#v\nslow %#v", raw, fast.Body, slow.Body)
		}
	})
}
