package verify_test

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/verify"
)

func ExampleVerify() {
	t := &testing.T{}
	f := newFixture(t) // a log with a closed run "run-a" and an open run "run-b"
	trustJSON, _ := f.trust.Marshal()

	trust, err := verify.ParseTrust(trustJSON)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, b := range []*verify.Bundle{f.closedA, f.openB} {
		data, _ := b.Marshal()
		res, err := verify.Verify(data, trust)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(res)
	}
	// A record deleted from the middle of the run:
	b := clone(f.closedA)
	b.Records = append(b.Records[:2], b.Records[3:]...)
	data, _ := b.Marshal()
	_, err = verify.Verify(data, trust)
	fmt.Println(verify.ExitCode(err), err)
	// Output:
	// VERIFIED
	// VERIFIED TO HEAD 2 (open)
	// 1 record 2 (index 5, run_seq 3): bundle refused: run_seq or index out of order: run_seq 3 at position 2 (previous 1)
}

func ExampleCommitArgs() {
	salt := bytes.Repeat([]byte{1}, verify.ArgsSaltSize) // use crypto/rand in real code
	args, _ := verify.CanonicalizeJSON([]byte(`{"url": "http://169.254.169.254/", "method": "GET"}`))
	commitment, _ := verify.CommitArgs(salt, args)
	fmt.Println(string(args))
	fmt.Println(verify.VerifyArgsReveal(commitment, salt, []byte(`{"method":"GET","url":"http://169.254.169.254/"}`)))
	// Output:
	// {"method":"GET","url":"http://169.254.169.254/"}
	// <nil>
}

func ExampleKeyID() {
	pub := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	vkey, _ := note.NewEd25519VerifierKey("example.com/log", pub)
	fmt.Println(verify.KeyID("example.com/log", pub))
	fmt.Println(vkey)
	// Output:
	// 1dde4531
	// example.com/log+1dde4531+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop
}

func ExampleResult_String() {
	fmt.Println(verify.Result{Closed: true, Head: 6})
	fmt.Println(verify.Result{Head: 3})
	// Output:
	// VERIFIED
	// VERIFIED TO HEAD 3 (open)
}
