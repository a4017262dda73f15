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

// chatWithToolCall is an OpenAI chat completion whose model asks for one
// tool call.
const chatWithToolCall = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-5-mini","choices":[{"index":0,"finish_reason":"tool_calls",` +
	`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"Bash","arguments":"{\"command\":\"cat /etc/shadow\"}"}}]}}],` +
	`"usage":{"prompt_tokens":50,"completion_tokens":9,"total_tokens":59}}`

// TestModelCallsRecordedFromStandbyReplica: two replicas share
// PostgreSQL, each with a gateway; one holds the signer's writer lease.
// A model call made through the standby's gateway with a token minted
// for the agent's run is signed into that run by the writer; closing the
// run revokes its token on every replica; and the tool use the model
// asked for, never decided, is reported by verify.
func TestModelCallsRecordedFromStandbyReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two replicas")
	}
	c := newGWCluster(t)
	c.up.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, chatWithToolCall)
	})
	start := func(name string) gwReplica {
		gw := freeAddr(t)
		r, stop := c.startWith(name, c.keysDir, c.db, "--gateway-listen="+gw,
			"--gateway-signing-key="+filepath.Join(c.keysDir, gateway.SigningKeyFile),
			"--gateway-keys-dir="+c.provKeys, "--gateway-provider=openai="+c.up.URL)
		waitHTTP(t, "http://"+gw+"/")
		return gwReplica{replica: r, gateway: gw, stop: stop}
	}
	a, b := start("a"), start("b")

	// The writer answers a registration; the standby 503s.
	var writer, standby gwReplica
	var run string
	deadline := time.Now().Add(20 * time.Second)
	for run == "" {
		for _, r := range []gwReplica{a, b} {
			if st, body, _ := c.do("POST", "http://"+r.api+"/v1/signer/runs", c.key(r.replica), ""); st == 201 {
				var info struct{ Run string }
				json.Unmarshal([]byte(body), &info)
				writer, run = r, info.Run
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no replica runs the signer")
		}
		time.Sleep(200 * time.Millisecond)
	}
	standby = a
	if writer.api == a.api {
		standby = b
	}
	admin := strings.Repeat("A", 40)
	st, body, _ := c.do("POST", "http://"+standby.admin+"/v1/gateway/tokens", admin,
		`{"providers":["openai"],"run_id":"`+run+`","tenant":"local","agent":"dev"}`)
	var m gateway.MintResponse
	if st != http.StatusCreated || json.Unmarshal([]byte(body), &m) != nil {
		t.Fatalf("mint = %d %s", st, body)
	}
	if code, out, _ := c.call(standby, m.Token); code != 200 || out != chatWithToolCall {
		t.Fatalf("call through the standby = %d %s", code, out)
	}
	// The standby's gateway hands the call to the inbox within its
	// interval; the writer records it within its drain interval.
	bundle := func() []byte {
		st, body, _ := c.do("GET", "http://"+writer.admin+"/v1/signer/runs/"+run+"/bundle", admin, "")
		if st != 200 {
			t.Fatalf("bundle = %d %s", st, body)
		}
		return []byte(body)
	}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(string(bundle()), `"type":"model.call"`); {
		if time.Now().After(deadline) {
			t.Fatal("the model call never reached the run")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, body, _ := c.do("POST", "http://"+writer.api+"/v1/signer/runs/"+run+"/close", c.key(writer.replica), ""); st != 200 {
		t.Fatalf("close = %d %s", st, body)
	}
	// Closing the run revoked its gateway token, on every replica: no
	// process of the run calls the model after its record ended.
	for deadline := time.Now().Add(5 * time.Second); ; {
		code, out, _ := c.call(standby, m.Token)
		if code == http.StatusUnauthorized && strings.TrimSpace(out) == "gateway token revoked" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run's token after the close = %d %s, want 401 gateway token revoked", code, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	st, tj, _ := c.do("GET", "http://"+writer.admin+"/v1/signer/trust", admin, "")
	if st != 200 {
		t.Fatalf("trust = %d %s", st, tj)
	}
	trust, err := verify.ParseTrust([]byte(tj))
	must(t, err)
	res, err := verify.Verify(bundle(), trust)
	if err != nil {
		t.Fatal(err)
	}
	if res.ModelCalls != 1 || res.Unreported != 1 || res.String() != "VERIFIED (1 model-requested tool use never decided)" {
		t.Fatalf("verify = %+v %q", res, res)
	}
	if strings.Contains(string(bundle()), "shadow") {
		t.Fatal("the bundle holds the tool use's arguments")
	}
}
