package gateway

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// heldTotal is what the held-body budgets count now: the per-holder
// total and the holders.
func heldTotal(g *Gateway) (int64, int) {
	g.held.mu.Lock()
	defer g.held.mu.Unlock()
	var n int64
	for _, b := range g.held.bytes {
		n += b
	}
	return n, len(g.held.bytes)
}

// waitHeldZero waits for every held body to be given back (a handler
// returns after the client has its response).
func waitHeldZero(t *testing.T, g *Gateway, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, holders := heldTotal(g)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %d bytes of %d holder(s) still counted as held after the request ended (never given back)", what, n, holders)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func newFormLeakEnv(t *testing.T) (*env, *upstream) {
	t.Helper()
	up := newUpstream(t)
	e := newEnv(t, func(o *Options) {
		o.Providers["acme"] = ProviderConfig{Kind: KindHTTP, BaseURL: up.srv.URL,
			Auth: &ProviderAuth{Header: "X-Auth"}, AllowPaths: []string{"POST /items/*"}}
		if err := os.WriteFile(filepath.Join(o.KeysDir, "acme"), []byte("acme-real-credential-9999\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	return e, up
}

// FINDING (high): serveData calls checkFormOverride for kind http and
// defers its release only when it returns no error:
//
//	release, err := g.checkFormOverride(r, bodyHolder(claims))
//	if err != nil { g.refuse(...); return }   // release never called
//	defer release()
//
// But checkFormOverride returns errMethodOverrideBody AFTER holdBody
// took the body (a form or JSON body naming _method, or one over the
// bound: then limit+1 bytes are counted). Those bytes are never given
// back to the per-sandbox share nor to the global 128 MiB semaphore.
// One refused request permanently locks its sandbox out of every
// body-checked request (503 busy until restart); four sandboxes (or four
// tokens without tenant/agent) each sending one JSON body over 32 MiB to
// an http broker take the whole global budget for good, and every other
// tenant's model-scoped or tool-checked request is 503 busy.
// Should: the held bytes are given back on every path (release called
// before refusing, or deferred before the error check).
func TestAttack5FormOverrideRefusalLeaksHeldBytes(t *testing.T) {
	e, _ := newFormLeakEnv(t)
	tok := e.mint(t, Grant{Providers: []string{"acme", "openai"}, Tenant: "t1", Agent: "a"}).Token
	hdr := map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/x-www-form-urlencoded"}
	code, _, body := e.do(t, "POST", "/acme/items/5", hdr, "name=x&_method=DELETE")
	if code == http.StatusOK {
		t.Fatalf("form naming _method forwarded: %d %q", code, body)
	}
	waitHeldZero(t, e.g, "a kind http POST refused for a _method form field")
	hdr["Content-Type"] = "application/json"
	code, _, _ = e.do(t, "POST", "/acme/items/5", hdr, `{"_method":"DELETE"}`)
	if code == http.StatusOK {
		t.Fatal("JSON body naming _method forwarded")
	}
	waitHeldZero(t, e.g, "a kind http POST refused for a JSON _method member")
}

// FINDING (high): the cross-tenant consequence of the leak above. Three
// sandboxes each send ONE JSON body just over maxModelBody to a kind
// http broker path they are allowed; each is refused (over the bound)
// and leaks maxModelBody+1 bytes; a fourth sends one ~32 MiB JSON body
// naming _method and leaks it. Afterwards an unrelated tenant's
// 40-byte model-scoped request is 503 busy, and stays so.
// Should: the victim's request is forwarded (200).
func TestAttack5FormOverrideLeakExhaustsGlobalBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 4 x 32 MiB")
	}
	e, _ := newFormLeakEnv(t)
	// Three over the bound leak maxModelBody+1 each; a fourth, naming
	// _method, leaks what is left but one byte.
	big := `{"x":"` + strings.Repeat("a", maxModelBody) + `"}`
	left := int64(maxHeldBodies - 3*(maxModelBody+1))
	pre := `{"_method":"DELETE","x":"`
	last := pre + strings.Repeat("a", int(left-2)-len(pre)-2) + `"}` // reserve = len+1 = left-1
	for i, b := range []string{big, big, big, last} {
		tok := e.mint(t, Grant{Providers: []string{"acme"}, Tenant: "evil" + string(rune('a'+i)), Agent: "a"}).Token
		code, _, msg := e.do(t, "POST", "/acme/items/5", map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, b)
		if code == http.StatusOK {
			t.Fatalf("over-bound or _method JSON body forwarded to kind http")
		}
		t.Logf("sandbox %d: %d %q", i, code, strings.TrimSpace(msg))
	}
	time.Sleep(200 * time.Millisecond)
	victim := e.mint(t, Grant{Providers: []string{"openai"}, Models: []string{"gpt-4o-mini"}, Tenant: "good", Agent: "b"}).Token
	code, _, body := e.do(t, "POST", "/openai/v1/chat/completions", map[string]string{"Authorization": "Bearer " + victim, "Content-Type": "application/json"}, `{"model":"gpt-4o-mini","messages":[]}`)
	if code != http.StatusOK {
		n, holders := heldTotal(e.g)
		t.Errorf("another tenant's small model-scoped request after four refused broker requests: %d %q (held count %d bytes over %d holders, no request in flight)", code, strings.TrimSpace(body), n, holders)
	}
}
