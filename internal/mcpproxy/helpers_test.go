package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpproxy"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/verify"
)

// tlogWriter keeps every log line (to check that no secret is logged)
// and shows warnings and errors with t.Logf.
type tlogWriter struct {
	t   testing.TB
	mu  *sync.Mutex
	all *bytes.Buffer
}

func (w tlogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.all.Write(p)
	w.mu.Unlock()
	if bytes.Contains(p, []byte("level=WARN")) || bytes.Contains(p, []byte("level=ERROR")) {
		w.t.Logf("%s", bytes.TrimRight(p, "\n"))
	}
	return len(p), nil
}

// upstream is a real go-sdk MCP server on httptest that logs the tool
// calls it runs and every credential it is sent.
type upstream struct {
	*httptest.Server
	secret string

	mu    sync.Mutex
	calls []string // tool names run
	auths []string // Authorization headers seen
}

func (u *upstream) callLog() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.calls...)
}

func (u *upstream) authLog() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.auths...)
}

type textArgs struct {
	Text string `json:"text"`
}

func newUpstream(t testing.TB, secret string) *upstream {
	u := &upstream{secret: secret}
	srv := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, nil)
	logged := func(name string) {
		u.mu.Lock()
		u.calls = append(u.calls, name)
		u.mu.Unlock()
	}
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	for _, name := range []string{"echo", "deploy", "forbidden_tool", "delete_repo"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: name + " tool"}, func(ctx context.Context, req *mcp.CallToolRequest, a textArgs) (*mcp.CallToolResult, any, error) {
			logged(name)
			return text(name + ": " + a.Text), nil, nil
		})
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "fail"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		logged("fail")
		r := text("it failed")
		r.IsError = true
		return r, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "huge"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		logged("huge")
		n, _ := a["n"].(float64)
		return text(strings.Repeat("x", int(n))), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "leak"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		logged("leak")
		return text("I was sent " + req.Extra.Header.Get("Authorization")), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		logged("slow")
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
		return text("late"), nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "malformed"}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
		logged("malformed")
		return text("never sent"), nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.auths = append(u.auths, r.Header.Get("Authorization"))
		u.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer "+secret {
			http.Error(w, "bad credential", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" && msg.Params.Name == "malformed" {
			u.mu.Lock()
			u.calls = append(u.calls, "malformed")
			u.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"result":{"content":[{"type":"text","text":`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

const testPolicy = `rules:
  - id: AGENTS-MCP
    effect: allow
    tool: "mcp__up__*"
  - id: AGENTS-NOFORBID
    effect: deny
    tool: "mcp__up__forbidden_tool"
  - id: AGENTS-DEPLOY
    effect: ask
    tool: "mcp__up__deploy"
  - id: AGENTS-SECRET
    effect: deny
    tool: "mcp__up__echo"
    when: 'args.text == "secret"'
`

// env is a real signer and key service on SQLite, an upstream, and the
// proxy in front of it on httptest.
type env struct {
	t        testing.TB
	ctx      context.Context
	s        *signer.Signer
	keys     *apikey.Service
	up       *upstream
	proxy    *mcpproxy.Proxy
	srv      *httptest.Server
	rec      mcpproxy.Recorder
	agent    apikey.Identity
	key      string // agent's custody key
	otherID  apikey.Identity
	other    string // another agent's key, same tenant
	outsider string // a key of another tenant
}

func newEnv(t testing.TB, mod func(*mcpproxy.Options)) *env {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	pdir := filepath.Join(dir, "policies")
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "agents.yaml"), []byte(testPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := tlogWriter{t: t, mu: &sync.Mutex{}, all: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var secrets []string
	t.Cleanup(func() { // runs last: after the proxy, signer and servers are closed
		logs.mu.Lock()
		defer logs.mu.Unlock()
		if !bytes.Contains(logs.all.Bytes(), []byte("mcp session started")) {
			t.Error("the logs were not captured")
		}
		for _, s := range secrets {
			if bytes.Contains(logs.all.Bytes(), []byte(s)) {
				t.Errorf("the logs carry a secret (%.8s...)", s)
			}
		}
	})
	db, err := sqlite.Open(ctx, filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	keys, err := apikey.New(apikey.Options{Store: db, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	s, err := signer.New(ctx, signer.Options{Store: db, KeyFile: filepath.Join(dir, "signer.key"), PolicyDir: pdir, Log: log,
		CheckpointInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	e := &env{t: t, ctx: ctx, s: s, keys: keys, rec: s,
		agent:   apikey.Identity{Tenant: "agents", Agent: "a", Session: "pod-a", Method: "static"},
		otherID: apikey.Identity{Tenant: "agents", Agent: "b", Session: "pod-b", Method: "static"}}
	mint := func(id apikey.Identity) string {
		m, err := keys.Mint(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m.Key
	}
	e.key, e.other = mint(e.agent), mint(e.otherID)
	e.outsider = mint(apikey.Identity{Tenant: "others", Agent: "c", Session: "pod-c", Method: "static"})

	secret := "upstream-secret-" + strings.Repeat("z", 16)
	secrets = append(secrets, secret, e.key, e.other, e.outsider)
	credFile := filepath.Join(dir, "cred")
	if err := os.WriteFile(credFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.up = newUpstream(t, secret)
	cfg, err := mcpproxy.ParseConfig([]byte(`upstreams:
  - name: up
    url: ` + e.up.URL + `
    tenants: [agents]
    credential:
      file: ` + credFile + `
    tools:
      deny: ["delete_*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	opts := mcpproxy.Options{Config: cfg, Recorder: recorderFunc{e}, Verify: keys.Verify, Log: log, CallTimeout: 5 * time.Second, ApprovalWait: 5 * time.Second}
	if mod != nil {
		mod(&opts)
	}
	p, err := mcpproxy.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	e.proxy = p
	mux := http.NewServeMux()
	mux.Handle("/mcp/servers/", p.Handler())
	e.srv = httptest.NewServer(mux)
	t.Cleanup(func() { p.Close(); e.srv.Close() })
	return e
}

// recorderFunc lets a test swap the recorder (e.g. to none: standby).
type recorderFunc struct{ e *env }

func (r recorderFunc) get() (mcpproxy.Recorder, error) {
	if r.e.rec == nil {
		return nil, mcpproxy.ErrUnavailable
	}
	return r.e.rec, nil
}

func (r recorderFunc) Register(ctx context.Context, c apikey.Identity) (signer.RunInfo, error) {
	x, err := r.get()
	if err != nil {
		return signer.RunInfo{}, err
	}
	return x.Register(ctx, c)
}
func (r recorderFunc) Status(ctx context.Context, c apikey.Identity, run string) (signer.RunInfo, error) {
	x, err := r.get()
	if err != nil {
		return signer.RunInfo{}, err
	}
	return x.Status(ctx, c, run)
}
func (r recorderFunc) MayAllow(ctx context.Context, tenant, tool string) (bool, error) {
	x, err := r.get()
	if err != nil {
		return false, err
	}
	return x.MayAllow(ctx, tenant, tool)
}
func (r recorderFunc) Decide(ctx context.Context, c apikey.Identity, run string, req signer.DecideRequest) (signer.DecideResponse, error) {
	x, err := r.get()
	if err != nil {
		return signer.DecideResponse{}, err
	}
	return x.Decide(ctx, c, run, req)
}
func (r recorderFunc) RequestApproval(ctx context.Context, c apikey.Identity, run string, req signer.ApprovalRequest) (signer.ApprovalInfo, error) {
	x, err := r.get()
	if err != nil {
		return signer.ApprovalInfo{}, err
	}
	return x.RequestApproval(ctx, c, run, req)
}
func (r recorderFunc) WaitApproval(ctx context.Context, c apikey.Identity, run, id string, wait time.Duration) (signer.ApprovalInfo, error) {
	x, err := r.get()
	if err != nil {
		return signer.ApprovalInfo{}, err
	}
	return x.WaitApproval(ctx, c, run, id, wait)
}
func (r recorderFunc) ConsumeApproval(ctx context.Context, c apikey.Identity, run, id string, req signer.ConsumeRequest) (signer.ApprovalInfo, error) {
	x, err := r.get()
	if err != nil {
		return signer.ApprovalInfo{}, err
	}
	return x.ConsumeApproval(ctx, c, run, id, req)
}
func (r recorderFunc) Complete(ctx context.Context, c apikey.Identity, run string, req signer.CompleteRequest) (signer.Appended, error) {
	x, err := r.get()
	if err != nil {
		return signer.Appended{}, err
	}
	return x.Complete(ctx, c, run, req)
}
func (r recorderFunc) CloseRun(ctx context.Context, c apikey.Identity, run string) (signer.Appended, error) {
	x, err := r.get()
	if err != nil {
		return signer.Appended{}, err
	}
	return x.CloseRun(ctx, c, run)
}

// headers adds the custody key and an optional Custody-Run header.
type headers struct {
	key, run string
	runs     *runSeen // the first Custody-Run response header, if set
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.key != "" {
		r.Header.Set("Authorization", "Bearer "+h.key)
	}
	if h.run != "" {
		r.Header.Set(mcpproxy.RunHeader, h.run)
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && h.runs != nil {
		if run := resp.Header.Get(mcpproxy.RunHeader); run != "" {
			h.runs.mu.Lock()
			if h.runs.run == "" {
				h.runs.run = run
			}
			h.runs.mu.Unlock()
		}
	}
	return resp, err
}

type runSeen struct {
	mu  sync.Mutex
	run string
}

// connect opens a sandbox session with the go-sdk client; sessionRun is
// the run the proxy named in its initialize response.
func (e *env) connect(key, run string) (cs *mcp.ClientSession, sessionRun string, err error) {
	runs := &runSeen{}
	client := mcp.NewClient(&mcp.Implementation{Name: "sandbox", Version: "1"}, nil)
	cs, err = client.Connect(e.ctx, &mcp.StreamableClientTransport{
		Endpoint:   e.srv.URL + "/mcp/servers/up",
		HTTPClient: &http.Client{Transport: headers{key: key, run: run, runs: runs}},
		MaxRetries: -1,
	}, nil)
	runs.mu.Lock()
	sessionRun = runs.run
	runs.mu.Unlock()
	return cs, sessionRun, err
}

func (e *env) mustConnect(key, run string) (*mcp.ClientSession, string) {
	e.t.Helper()
	cs, sessionRun, err := e.connect(key, run)
	if err != nil {
		e.t.Fatalf("connect: %v", err)
	}
	e.t.Cleanup(func() { cs.Close() })
	return cs, sessionRun
}

// records returns run's records (parsed) from an exported bundle.
func (e *env) records(run string) []*verify.Record {
	e.t.Helper()
	raw, err := e.s.Export(e.ctx, run)
	if err != nil {
		e.t.Fatalf("Export(%s): %v", run, err)
	}
	b, err := verify.ParseBundle(raw)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*verify.Record
	for _, r := range b.Records {
		rec, err := verify.ParseRecord(r.Record)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// postInitialize sends a bare initialize and returns the status and body.
func (e *env) postInitialize(path, key, run string) (int, string) {
	e.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if run != "" {
		req.Header.Set(mcpproxy.RunHeader, run)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
		del, _ := http.NewRequest("DELETE", e.srv.URL+path, nil)
		del.Header.Set("Mcp-Session-Id", id)
		del.Header.Set("Authorization", "Bearer "+key)
		if r, err := http.DefaultClient.Do(del); err == nil {
			r.Body.Close()
		}
	}
	return resp.StatusCode, string(b)
}

// resultText is a result's text contents, joined.
func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
