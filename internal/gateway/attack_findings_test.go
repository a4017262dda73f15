package gateway_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// An OpenAI chat stream reports its usage only in its last chunk. A
// client that closes the stream once it has the content it wants (before
// that chunk) is charged its reservation: the output it declared, and an
// input of a quarter of its body's bytes. The provider bills the real
// input, which a small body can make far larger (images by URL, a
// Responses previous_response_id or conversation, a stored prompt): an
// input budget is then not held.
func TestAttackAbortedStreamUndercountsInput(t *testing.T) {
	t.Skip("FINDING: an aborted stream is charged an input estimate (body bytes / 4); input the provider pulls in server-side (image URLs, previous_response_id, conversation) escapes input budgets. Fix needs the real usage: e.g. drain the upstream after a client abort (bounded) to read its usage.")
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Budget: metering.Usage{InputTokens: 10000}})
	body := strings.Replace(chatStream, `"stream":true`, `"stream":true,"max_tokens":10`, 1)
	req, _ := http.NewRequest(http.MethodPost, mg.data.URL+"/openai/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Fake-Delay", "100ms")
	req.Header.Set("X-Fake-Input", "50000") // what the provider bills
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(res.Body, make([]byte, 10))
	res.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for mg.usage(t, metering.UsageFilter{}).Requests < 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	bs, err := st.Budgets(context.Background(), metering.BudgetFilter{})
	if err != nil || len(bs) != 1 {
		t.Fatalf("%+v %v", bs, err)
	}
	if bs[0].Spent.InputTokens < 50000 {
		t.Errorf("spent %+v: the provider billed 50000 input tokens", bs[0].Spent)
	}
}
