package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestReplaceHeldCountsGrowth: a rewritten body (the meter's) is counted
// for what it has beyond the body read, until the request is done; a
// shorter one takes nothing more; done gives every byte back.
func TestReplaceHeldCountsGrowth(t *testing.T) {
	e := newEnv(t)
	r := httptest.NewRequest("POST", "/x", strings.NewReader(`{"model":"m"}`))
	h := &heldBody{holder: "sandbox a"}
	if err := e.g.hold(h, r); err != nil || string(h.b) != `{"model":"m"}` {
		t.Fatalf("hold = %v, %q", err, h.b)
	}
	if n := e.g.held.total(); n != 13 {
		t.Fatalf("held after the read = %d, want 13", n)
	}
	if err := e.g.replaceHeld(h, []byte(`{"model":"m","max_tokens":16}`)); err != nil {
		t.Fatal(err)
	}
	if n := e.g.held.total(); n != 29 {
		t.Errorf("held after a rewrite 16 bytes longer = %d, want 29", n)
	}
	if err := e.g.replaceHeld(h, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if n := e.g.held.total(); n != 29 {
		t.Errorf("held after a shorter rewrite = %d, want 29 (nothing more taken)", n)
	}
	big := make([]byte, maxHeldPerHolder+1)
	if err := e.g.replaceHeld(h, big); err != ErrBusy {
		t.Errorf("a rewrite past the holder's share = %v, want ErrBusy", err)
	}
	h.done()
	if n := e.g.held.total(); n != 0 {
		t.Errorf("held once done = %d, want 0", n)
	}
}
