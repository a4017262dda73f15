package jcs

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// integerArgs is call arguments with only integers for numbers, the only
// numbers custody accepted before floats: canonicalizing them must not get
// slower for the float support.
func integerArgs() []byte {
	var b strings.Builder
	b.WriteString(`{"command":"kubectl get pods -n agents","limits":{`)
	for i := range 200 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%03d": [%d, -%d, %d, "v%d"]`, i, i, (i+1)*7919, int64(i)*1_000_003_117, i)
	}
	b.WriteString(`},"timeout":9007199254740991}`)
	return []byte(b.String())
}

// BenchmarkCanonicalizeIntegers reports canonicalization of integer-only
// arguments against a floor measured in the same run: encoding/json.Valid
// over the same bytes (a scan that builds nothing). x_floor is the ratio.
func BenchmarkCanonicalizeIntegers(b *testing.B) {
	in := integerArgs()
	b.SetBytes(int64(len(in)))
	var work, floor time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := Canonicalize(in); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if !json.Valid(in) {
			b.Fatal("invalid")
		}
		floor += time.Since(t1)
		work += t1.Sub(t0)
	}
	b.ReportMetric(float64(work)/float64(floor), "x_floor")
}
