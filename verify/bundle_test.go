package verify

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
)

// FuzzProofLinesAgrees is the differential check of the verifier's bundle
// line parser, which reuses the previous line's decoded proof hashes,
// against parseRecordLineInto.
func FuzzProofLinesAgrees(f *testing.F) {
	tr := newTestTree(f, 20, 0)
	line := func(i int64) []byte {
		b, err := (&Bundle{Records: []BundleRecord{{Record: []byte("{}"), Proof: tr.proof(i)}}}).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		// Marshal writes magic, header, "R\t" line, blank line.
		l := bytes.Split(b, []byte("\n"))[2]
		return l[2:]
	}
	f.Add(line(4), line(5), line(6))
	f.Add(line(19), line(3), line(19))
	f.Add([]byte("{}"), line(1), []byte("{}\t"))
	f.Add(line(4), bytes.Replace(line(5), []byte("\t"), []byte("\t\t"), 1), line(6))
	f.Fuzz(func(t *testing.T, l1, l2, l3 []byte) {
		var pl proofLines
		for _, l := range [][]byte{l1, l2, l3, l2} {
			rec, proof, err := pl.parse(l)
			wrec, wproof, werr := parseRecordLineInto(l, nil)
			if fmt.Sprint(err) != fmt.Sprint(werr) || !bytes.Equal(rec, wrec) || !slices.Equal(proof, wproof) {
				t.Fatalf("proofLines.parse(%q) = %q, %x, %v; parseRecordLineInto: %q, %x, %v", l, rec, proof, err, wrec, wproof, werr)
			}
		}
	})
}
