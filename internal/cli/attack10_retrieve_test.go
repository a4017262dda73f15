package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/verify"
)

// TestAttack10RetrievedResponseReconciledOnce, end to end: a Responses
// API response whose model asks for one Bash use is created (POST
// /v1/responses) and retrieved twice (GET /v1/responses/{id}, then its
// stream resumed with starting_after) through the gateway; the agent
// decides the use once. Each call is signed into the run as model.call,
// and the run reconciles clean: the retrieves' uses are listed as
// repeated, not unreported (attack round 10 made retrieves record their
// uses, which counted this use three times).
func TestAttack10RetrievedResponseReconciledOnce(t *testing.T) {
	c := newGWCluster(t)
	const resp = `{"id":"resp_1","object":"response","status":"completed","model":"gpt-5","output":[` +
		`{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"command\":\"ls\"}","call_id":"call_1","name":"Bash"}],` +
		`"usage":{"input_tokens":5,"output_tokens":7}}`
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.URL.Query().Get("stream") == "true" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "event: response.completed\n"+`data: {"type":"response.completed","sequence_number":10,"response":`+resp+"}\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, resp)
	})
	c.upHandler.Store(&h)
	gw := freeAddr(t)
	r, _ := c.startWith("a", c.keysDir, c.db, "--gateway-listen="+gw,
		"--gateway-signing-key="+filepath.Join(c.keysDir, gateway.SigningKeyFile),
		"--gateway-keys-dir="+c.provKeys, "--gateway-provider=openai="+c.up.URL)
	waitHTTP(t, "http://"+gw+"/")
	key := c.key(r)
	var run string
	for deadline := time.Now().Add(20 * time.Second); run == ""; time.Sleep(200 * time.Millisecond) {
		if st, body, _ := c.do("POST", "http://"+r.api+"/v1/signer/runs", key, ""); st == 201 {
			var info struct{ Run string }
			json.Unmarshal([]byte(body), &info)
			run = info.Run
		} else if time.Now().After(deadline) {
			t.Fatalf("register = %d %s", st, body)
		}
	}
	if st, body, _ := c.do("POST", "http://"+r.api+"/v1/signer/runs/"+run+"/decide", key,
		`{"call_id":"c1","tool":"Bash","args":{"command":"ls"}}`); st != 200 {
		t.Fatalf("decide = %d %s", st, body)
	}
	admin := strings.Repeat("A", 40)
	st, body, _ := c.do("POST", "http://"+r.admin+"/v1/gateway/tokens", admin,
		`{"providers":["openai"],"run_id":"`+run+`","tenant":"local","agent":"dev"}`)
	var m gateway.MintResponse
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("mint = %d %s", st, body)
	}
	for _, q := range []struct{ method, path, body string }{
		{"POST", "/openai/v1/responses", `{"model":"gpt-5","input":"list files"}`},
		{"GET", "/openai/v1/responses/resp_1", ""},
		{"GET", "/openai/v1/responses/resp_1?stream=true&starting_after=9", ""},
	} {
		if st, body, _ := c.do(q.method, "http://"+gw+q.path, m.Token, q.body); st != 200 {
			t.Fatalf("%s %s = %d %s", q.method, q.path, st, body)
		}
	}
	bundle := func() []byte {
		st, body, _ := c.do("GET", "http://"+r.admin+"/v1/signer/runs/"+run+"/bundle", admin, "")
		if st != 200 {
			t.Fatalf("bundle = %d %s", st, body)
		}
		return []byte(body)
	}
	for deadline := time.Now().Add(10 * time.Second); strings.Count(string(bundle()), `"type":"model.call"`) < 3; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the model calls never reached the run")
		}
	}
	if st, body, _ := c.do("POST", "http://"+r.api+"/v1/signer/runs/"+run+"/close", key, ""); st != 200 {
		t.Fatalf("close = %d %s", st, body)
	}
	st, tj, _ := c.do("GET", "http://"+r.admin+"/v1/signer/trust", admin, "")
	if st != 200 {
		t.Fatalf("trust = %d %s", st, tj)
	}
	trust, err := verify.ParseTrust([]byte(tj))
	must(t, err)
	res, err := verify.Verify(bundle(), trust)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelCalls != 3 || res.Unreported != 0 || res.Repeated != 2 || res.String() != "VERIFIED" {
		t.Fatalf("verify = %+v %q, want 3 model calls, 2 repeated uses, VERIFIED", res, res)
	}
}
