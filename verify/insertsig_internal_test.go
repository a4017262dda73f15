package verify

import (
	"testing"
	"time"
)

// TestInsertSigTakesTheFastPath: SignRecord's one-canonicalisation path
// (insertSig) must apply to an ordinary record, not fall back silently.
func TestInsertSigTakesTheFastPath(t *testing.T) {
	r := &Record{V: RecordVersion, Log: "custody.test/log", Index: 7, Run: "r1", Type: TypeCallDecided,
		Time: time.Date(2026, 12, 2, 3, 4, 5, 0, time.UTC), Body: map[string]any{"s": `,"time":"x"}`}, KeyID: "0011aabb"}
	m, err := r.object(false)
	if err != nil {
		t.Fatal(err)
	}
	msg, canonical, err := signedMessage(r, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := insertSig(msg[canonical:], m, make([]byte, 64)); !ok {
		t.Fatal("insertSig refused an ordinary record; SignRecord would canonicalise twice")
	}
}
