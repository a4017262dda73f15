package gateway_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// A Responses API request with "background": true is answered at once
// (status queued, usage null) and generated afterwards; what it used is
// reported only by a later GET /v1/responses/{id}, which the meter counts
// as one request (it reads an earlier response). So under an input budget
// each background request was charged its body's estimate (a quarter of
// its bytes) however much it used: with previous_response_id naming a
// long conversation, 100000 input tokens a time, never counted.
func TestAttack10MeterBackgroundResponse(t *testing.T) {
	up := &fakeProvider{}
	up.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		up.mu.Lock()
		up.bodies = append(up.bodies, string(b))
		up.hits++
		up.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			io.WriteString(w, `{"id":"resp_1","object":"response","status":"completed","model":"gpt-fake","output":[],"usage":{"input_tokens":100000,"output_tokens":10,"total_tokens":100010}}`)
			return
		}
		io.WriteString(w, `{"id":"resp_1","object":"response","status":"queued","background":true,"model":"gpt-fake","output":[],"usage":null}`)
	}))
	t.Cleanup(up.srv.Close)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Budget: metering.Usage{InputTokens: 1000}})
	body := `{"model":"gpt-fake","background":true,"previous_response_id":"resp_0","input":"go on"}`
	for i := range 3 {
		r := mg.post(t, tok, "/openai/v1/responses", body, nil)
		if r.status == http.StatusOK {
			req, _ := http.NewRequest(http.MethodGet, mg.data.URL+"/openai/v1/responses/resp_1", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			if res, err := http.DefaultClient.Do(req); err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
			continue
		}
		if r.status != http.StatusBadRequest || r.body != "request cannot be metered\n" {
			t.Fatalf("request %d: %d %q; want 400 %q", i, r.status, r.body, gateway.ErrUnmeterable.Error())
		}
	}
	if n := up.count(); n != 0 {
		used := mg.usage(t, metering.UsageFilter{})
		t.Fatalf("%d background requests (and retrieves) reached the provider under an input budget of 1000: counted %+v, the provider reported 3 × 100000 input tokens", n, used)
	}
	// Without a budget the request is forwarded (its usage is not
	// bounded by anything).
	free := mg.mint(t, gateway.Grant{Providers: []string{"openai"}})
	if r := mg.post(t, free, "/openai/v1/responses", body, nil); r.status != http.StatusOK {
		t.Errorf("background request without a budget: %d %q; want 200", r.status, r.body)
	}
}
