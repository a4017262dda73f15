package gateway_test

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

// meteredStore is what a metered gateway keeps its rows in: the real
// SQLite or PostgreSQL store.
type meteredStore interface {
	gateway.Store
	metering.Store
}

// meteredGW is one gateway replica with a meter, on a store.
type meteredGW struct {
	g     *gateway.Gateway
	m     *metering.Meter
	data  *httptest.Server
	store meteredStore
	// started and done count the data plane's requests: when they are
	// equal every answered request is settled (or queued).
	started, done atomic.Int64
}

type meteredOpts struct {
	policy  metering.Policy
	reserve int64
	// providerTools: the providers allow provider-run tools.
	providerTools bool
}

func newMeteredGW(t testing.TB, st meteredStore, key ed25519.PrivateKey, up *fakeProvider, o meteredOpts) *meteredGW {
	t.Helper()
	keys := t.TempDir()
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		if err := os.WriteFile(filepath.Join(keys, p), []byte(fakeRealKey), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	quiet := slog.New(slog.DiscardHandler)
	m, err := metering.New(metering.Options{Store: st, Policy: o.policy, DefaultOutputReserve: o.reserve, FlushInterval: 20 * time.Millisecond, Log: quiet})
	if err != nil {
		t.Fatal(err)
	}
	providers := map[string]gateway.ProviderConfig{}
	for _, p := range []string{"anthropic", "openai", "gemini"} {
		providers[p] = gateway.ProviderConfig{BaseURL: up.srv.URL, ProviderTools: o.providerTools}
	}
	g, err := gateway.New(context.Background(), gateway.Options{
		Store: st, Providers: providers, KeysDir: keys, SigningKey: key,
		PollInterval: 50 * time.Millisecond, Meter: m, Log: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	mg := &meteredGW{g: g, m: m, store: st}
	h := g.DataHandler()
	mg.data = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mg.started.Add(1)
		defer mg.done.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(mg.close)
	return mg
}

// close stops the replica as a shutdown does: the listener, the
// gateway, then the meter (which writes what is pending).
func (mg *meteredGW) close() {
	mg.data.Close()
	mg.g.Close()
	mg.m.Close(context.Background())
}

func openSQLite(t testing.TB, dir string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newKey(t testing.TB) ed25519.PrivateKey {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (mg *meteredGW) mint(t testing.TB, g gateway.Grant) string {
	t.Helper()
	m, err := mg.g.Mint(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	return m.Token
}

type reply struct {
	status int
	header http.Header
	body   string
}

// post sends a request with the token the way the provider's SDK does.
func (mg *meteredGW) post(t testing.TB, tok, path, body string, hdr map[string]string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, mg.data.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return reply{res.StatusCode, res.Header, string(b)}
}

// usage flushes the meter and reads the usage rows of filter f summed,
// once the requests already answered are all counted: a request is
// settled just after its client got the last byte.
func (mg *meteredGW) usage(t testing.TB, f metering.UsageFilter) metering.Usage {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for mg.started.Load() != mg.done.Load() && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	return mg.usageNow(t, f)
}

func (mg *meteredGW) usageNow(t testing.TB, f metering.UsageFilter) metering.Usage {
	t.Helper()
	if err := mg.m.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := mg.store.Usage(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var u metering.Usage
	for _, r := range rows {
		u = u.Add(r.Used)
	}
	return u
}

const (
	anthropicBody = `{"model":"claude-fake","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
	chatBody      = `{"model":"gpt-fake","messages":[{"role":"user","content":"hi"}]}`
	chatStream    = `{"model":"gpt-fake","stream":true,"messages":[{"role":"user","content":"hi"}]}`
)

// Usage is metered from JSON and event-stream responses of every
// provider, once per request, per token, run, tenant and model.
func TestMeterUsageEveryFormat(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"anthropic", "openai", "gemini"}, RunID: "r1", Tenant: "agents", Agent: "a1"})
	for _, c := range []struct{ path, body string }{
		{"/anthropic/v1/messages", anthropicBody},
		{"/anthropic/v1/messages", strings.Replace(anthropicBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)},
		{"/openai/v1/chat/completions", chatBody},
		{"/openai/v1/chat/completions", chatStream},
		{"/gemini/v1beta/models/gemini-fake:generateContent", `{"contents":[]}`},
		{"/gemini/v1beta/models/gemini-fake:streamGenerateContent?alt=sse", `{"contents":[]}`},
	} {
		r := mg.post(t, tok, c.path, c.body, map[string]string{"X-Fake-Input": "10", "X-Fake-Output": "20"})
		if r.status != http.StatusOK {
			t.Fatalf("%s: %d %s", c.path, r.status, r.body)
		}
	}
	got := mg.usage(t, metering.UsageFilter{Tenant: "agents"})
	if want := (metering.Usage{Requests: 6, InputTokens: 60, OutputTokens: 120}); got != want {
		t.Errorf("usage of tenant = %+v, want %+v", got, want)
	}
	rows, err := mg.store.Usage(context.Background(), metering.UsageFilter{RunID: "r1", GroupBy: []string{"provider", "model"}})
	if err != nil {
		t.Fatal(err)
	}
	byModel := map[string]metering.Usage{}
	for _, r := range rows {
		byModel[r.Provider+"/"+r.Model] = r.Used
	}
	for _, k := range []string{"anthropic/claude-fake", "openai/gpt-fake", "gemini/gemini-fake"} {
		if byModel[k] != (metering.Usage{Requests: 2, InputTokens: 20, OutputTokens: 40}) {
			t.Errorf("usage of %s = %+v (all: %+v)", k, byModel[k], byModel)
		}
	}
}

// The gateway asks an OpenAI chat stream for its usage and keeps that
// chunk from a client that did not ask: its stream is as the provider
// would have sent it.
func TestMeterOpenAIStreamUsageChunk(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents"})

	r := mg.post(t, tok, "/openai/v1/chat/completions", chatStream, map[string]string{"X-Fake-Output": "9"})
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	so, _ := up.lastBody(t)["stream_options"].(map[string]any)
	if so["include_usage"] != true {
		t.Errorf("provider got stream_options %v, want include_usage true", up.lastBody(t)["stream_options"])
	}
	// The other chunks carry "usage": null, as the provider sends them
	// when include_usage is set; no chunk carries a usage.
	if strings.Contains(r.body, `"usage":{`) || strings.Contains(r.body, `"choices":[]`) || !strings.HasSuffix(r.body, "data: [DONE]\n\n") {
		t.Errorf("client stream holds usage or lost its end:\n%s", r.body)
	}
	if got := mg.usage(t, metering.UsageFilter{Tenant: "agents"}); got.OutputTokens != 9 {
		t.Errorf("usage = %+v, want 9 output tokens", got)
	}

	// A client that asked gets the chunk.
	asked := strings.Replace(chatStream, `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`, 1)
	r = mg.post(t, tok, "/openai/v1/chat/completions", asked, nil)
	if !strings.Contains(r.body, `"choices":[],"usage":{"prompt_tokens"`) {
		t.Errorf("client that asked for usage did not get it:\n%s", r.body)
	}
}

// A token's budget refuses the request that does not fit, with the fixed
// text, a status no SDK retries, and nothing sent upstream; it holds
// after the token is cached as verified (LiteLLM #23714), and a request
// whose declared max_tokens cannot fit is refused before forwarding.
func TestMeterTokenBudgetRefuses(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"anthropic"}, Budget: metering.Usage{Requests: 3, OutputTokens: 250}})

	big := strings.Replace(anthropicBody, `"max_tokens":100`, `"max_tokens":251`, 1)
	r := mg.post(t, tok, "/anthropic/v1/messages", big, nil)
	if r.status != http.StatusPaymentRequired || r.body != "budget exceeded\n" || r.header.Get("X-Should-Retry") != "false" {
		t.Fatalf("max_tokens over the budget: %d %q retry=%q", r.status, r.body, r.header.Get("X-Should-Retry"))
	}
	if up.count() != 0 {
		t.Fatal("a refused request reached the provider")
	}
	for i := range 2 { // 100 reserved each, 20 used each
		if r := mg.post(t, tok, "/anthropic/v1/messages", anthropicBody, map[string]string{"X-Fake-Output": "20"}); r.status != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	// Settled at 20 each: 210 left, so 100 more fits; then the request
	// count (3) is spent.
	if r := mg.post(t, tok, "/anthropic/v1/messages", anthropicBody, nil); r.status != http.StatusOK {
		t.Fatalf("third request: %d %s", r.status, r.body)
	}
	hits := up.count()
	for range 3 {
		if r := mg.post(t, tok, "/anthropic/v1/messages", anthropicBody, nil); r.status != http.StatusPaymentRequired {
			t.Fatalf("over the request budget: %d %s", r.status, r.body)
		}
	}
	if up.count() != hits {
		t.Error("a request over budget reached the provider")
	}
}

// Without any budget configured nothing is refused and no budget row is
// written (LiteLLM #22726, #20615: budgets hit with none configured).
func TestMeterNoBudgetNoRefusal(t *testing.T) {
	up := newFakeProvider(t)
	st := openSQLite(t, t.TempDir())
	mg := newMeteredGW(t, st, newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents", RunID: "r"})
	for range 20 {
		if r := mg.post(t, tok, "/openai/v1/chat/completions", chatBody, map[string]string{"X-Fake-Output": "100000"}); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	if b, err := st.Budgets(context.Background(), metering.BudgetFilter{}); err != nil || len(b) != 0 {
		t.Errorf("budgets = %+v, %v; want none", b, err)
	}
	if body := up.lastBody(t); body["max_completion_tokens"] != nil {
		t.Errorf("a request without an output budget got a maximum: %v", body)
	}
}

// Under an output limit a request that declares no maximum gets the
// default one, and what it reserves is that.
func TestMeterDefaultMaxOutput(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{reserve: 64})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"openai", "gemini"}, Budget: metering.Usage{OutputTokens: 1000}})
	if r := mg.post(t, tok, "/openai/v1/chat/completions", strings.Replace(chatBody, `{`, `{"n":2,`, 1), nil); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if got := up.lastBody(t)["max_completion_tokens"]; got != float64(32) {
		t.Errorf("max_completion_tokens = %v, want 32 (64 over n=2)", got)
	}
	if r := mg.post(t, tok, "/gemini/v1beta/models/gemini-fake:generateContent", `{"contents":[],"generationConfig":{"temperature":0}}`, nil); r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	gc, _ := up.lastBody(t)["generationConfig"].(map[string]any)
	if gc["maxOutputTokens"] != float64(64) || gc["temperature"] != float64(0) {
		t.Errorf("generationConfig = %v", gc)
	}
	// A body whose limit cannot be told is refused while a budget applies.
	if r := mg.post(t, tok, "/openai/v1/chat/completions", `{"max_tokens":1,"max_tokens":900000}`, nil); r.status != http.StatusBadRequest || r.body != "request cannot be metered\n" {
		t.Errorf("duplicate max_tokens: %d %q", r.status, r.body)
	}
}

// A stream that reports more than its budget allows is cut after the
// event that crossed it, with the provider's own in-stream error.
func TestMeterStreamCutOverBudget(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"gemini"}, Budget: metering.Usage{OutputTokens: 300}})
	// Declares 200 (fits); the provider ignores it and reports 100, 200,
	// 300, 400 over four chunks: 300 is over the reservation and the
	// extension does not fit.
	r := mg.post(t, tok, "/gemini/v1beta/models/gemini-fake:streamGenerateContent?alt=sse",
		`{"contents":[],"generationConfig":{"maxOutputTokens":200}}`, map[string]string{"X-Fake-Output": "400", "X-Fake-Delay": "30ms"})
	if r.status != http.StatusOK {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if !strings.Contains(r.body, `"w2"`) || strings.Contains(r.body, `"w4"`) {
		t.Errorf("stream not cut where it crossed:\n%s", r.body)
	}
	if !strings.HasSuffix(r.body, `{"error":{"code":402,"message":"budget exceeded","status":"RESOURCE_EXHAUSTED"}}`+"\n\n") {
		t.Errorf("stream does not end with the in-stream error:\n%s", r.body)
	}
	// What was reported is spent; the budget refuses the next request.
	if got := mg.usage(t, metering.UsageFilter{}); got.OutputTokens < 300 {
		t.Errorf("usage = %+v, want at least the 300 reported", got)
	}
	if r := mg.post(t, tok, "/gemini/v1beta/models/gemini-fake:generateContent", `{"contents":[],"generationConfig":{"maxOutputTokens":1}}`, nil); r.status != http.StatusPaymentRequired {
		t.Errorf("after the cut: %d %s", r.status, r.body)
	}
}

// A stream the client aborts, and one the provider never reports usage
// for, are counted once, at their reservation.
func TestMeterAbortedStreamSettlesAtReservation(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"anthropic"}, Budget: metering.Usage{OutputTokens: 10000}})
	req, _ := http.NewRequest(http.MethodPost, mg.data.URL+"/anthropic/v1/messages",
		strings.NewReader(strings.Replace(anthropicBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Fake-Delay", "100ms")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(res.Body).ReadString('\n')
	if !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q", line)
	}
	res.Body.Close() // the client goes away mid-stream
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := mg.usage(t, metering.UsageFilter{})
		if got.Requests == 1 {
			if got.OutputTokens != 100 {
				t.Errorf("aborted stream counted %+v, want its reservation of 100 output tokens", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("aborted stream never counted: %+v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if got := mg.usage(t, metering.UsageFilter{}); got.Requests != 1 {
		t.Errorf("counted %d times", got.Requests)
	}
}

// An error from the provider counts one request and no tokens.
func TestMeterProviderErrorCountsRequestOnly(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	tok := mg.mint(t, gateway.Grant{Providers: []string{"anthropic"}, Budget: metering.Usage{OutputTokens: 10000}})
	if r := mg.post(t, tok, "/anthropic/v1/messages", anthropicBody, map[string]string{"X-Fake-Status": "429"}); r.status != 429 {
		t.Fatalf("%d", r.status)
	}
	if got := mg.usage(t, metering.UsageFilter{}); got != (metering.Usage{Requests: 1}) {
		t.Errorf("usage = %+v", got)
	}
	b, err := mg.store.Budgets(context.Background(), metering.BudgetFilter{Scope: metering.ScopeToken})
	if err != nil || len(b) != 1 || !b[0].Reserved.IsZero() || b[0].Spent != (metering.Usage{Requests: 1}) {
		t.Errorf("budget = %+v, %v", b, err)
	}
}

// A tenant's budget per period binds every token of the tenant (LiteLLM
// PR #9658: end-user budgets not blocking), and a restarted replica
// resumes the spend it had.
func TestMeterTenantBudgetAcrossTokensAndRestart(t *testing.T) {
	up := newFakeProvider(t)
	dir := t.TempDir()
	key := newKey(t)
	policy := metering.Policy{Tenants: map[string]metering.TenantBudget{"agents": {Period: metering.PeriodDay, Usage: metering.Usage{Requests: 4}}}}
	st := openSQLite(t, dir)
	mg := newMeteredGW(t, st, key, up, meteredOpts{policy: policy})
	for i := range 3 {
		tok := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents", Agent: "a" + string(rune('0'+i))})
		if r := mg.post(t, tok, "/openai/v1/chat/completions", chatBody, nil); r.status != http.StatusOK {
			t.Fatalf("%d %s", r.status, r.body)
		}
	}
	other := mg.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "others"})
	mg.close()
	st.Close()

	// Restart: a new process on the same data directory.
	st2 := openSQLite(t, dir)
	mg2 := newMeteredGW(t, st2, key, up, meteredOpts{policy: policy})
	tok := mg2.mint(t, gateway.Grant{Providers: []string{"openai"}, Tenant: "agents"})
	if r := mg2.post(t, tok, "/openai/v1/chat/completions", chatBody, nil); r.status != http.StatusOK {
		t.Fatalf("4th request: %d %s", r.status, r.body)
	}
	if r := mg2.post(t, tok, "/openai/v1/chat/completions", chatBody, nil); r.status != http.StatusPaymentRequired {
		t.Fatalf("5th request of the tenant: %d %s", r.status, r.body)
	}
	if r := mg2.post(t, other, "/openai/v1/chat/completions", chatBody, nil); r.status != http.StatusOK {
		t.Fatalf("another tenant: %d %s", r.status, r.body)
	}
}

// A stream cut by its token's revocation is counted once, at least at
// its reservation.
func TestMeterRevokedStreamCountedOnce(t *testing.T) {
	up := newFakeProvider(t)
	mg := newMeteredGW(t, openSQLite(t, t.TempDir()), newKey(t), up, meteredOpts{})
	m, err := mg.g.Mint(context.Background(), gateway.Grant{Providers: []string{"anthropic"}, Budget: metering.Usage{OutputTokens: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, mg.data.URL+"/anthropic/v1/messages",
		strings.NewReader(strings.Replace(anthropicBody, `"max_tokens"`, `"stream":true,"max_tokens"`, 1)))
	req.Header.Set("Authorization", "Bearer "+m.Token)
	req.Header.Set("X-Fake-Delay", "100ms")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	br := bufio.NewReader(res.Body)
	if line, _ := br.ReadString('\n'); !strings.HasPrefix(line, "event: message_start") {
		t.Fatalf("first line %q", line)
	}
	if err := mg.g.Revoke(context.Background(), m.JTI); err != nil {
		t.Fatal(err)
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "gateway token revoked") {
		t.Errorf("stream not ended with the revocation:\n%s", rest)
	}
	got := mg.usage(t, metering.UsageFilter{})
	if got.Requests != 1 || got.OutputTokens != 100 {
		t.Errorf("revoked stream counted %+v, want once at its reservation of 100 output tokens", got)
	}
}
