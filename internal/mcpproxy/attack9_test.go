package mcpproxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpproxy"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
)

// upstreamCall is the method, tool name and raw arguments of a JSON-RPC
// request body on its way to the upstream ("" when it is not one).
func upstreamCall(body []byte) (method, tool string, args json.RawMessage) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return "", "", nil
	}
	return msg.Method, msg.Params.Name, msg.Params.Arguments
}

// completion waits up to 5s for the call.completed of the last decided
// call of tool in run.
func (e *env) completion(run, tool string) *verify.Record {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		recs := e.records(run)
		if done := byCall(recs, lastDecided(recs, tool))[verify.TypeCallCompleted]; done != nil || time.Now().After(deadline) {
			return done
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// slowAnswer is an upstream transport that lets a tools/call of echo
// whose arguments hold marker run upstream, marks ran done (once), then
// holds its answer 700 ms, or until the proxy gives up on the request.
func slowAnswer(marker string, ran *sync.WaitGroup) rtFunc {
	var once sync.Once
	return func(r *http.Request) (*http.Response, error) {
		var body []byte
		if r.Body != nil {
			body, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		resp, err := http.DefaultTransport.RoundTrip(r)
		if m, tool, args := upstreamCall(body); err == nil && m == "tools/call" && tool == "echo" && strings.Contains(string(args), marker) {
			// The upstream ran the call; its answer is slow to come back.
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(out))
			once.Do(ran.Done)
			select {
			case <-r.Context().Done():
				return nil, r.Context().Err()
			case <-time.After(700 * time.Millisecond):
			}
		}
		return resp, err
	}
}

// TestAttack9CancelledCallRecordedAsRun: the sandbox cancels a tools/call
// (notifications/cancelled, or it drops the request) once it has been
// sent upstream. The upstream has run it (the side effect happened), but
// the proxy's upstream exchange was bound to the sandbox's request, so it
// was abandoned and recorded as outcome "error" with a commitment to an
// "upstream_failed" refusal: a compromised agent could make every
// allowed call it wanted hidden read as failed in the record. The
// exchange must be carried to its end and the upstream's real result
// recorded.
func TestAttack9CancelledCallRecordedAsRun(t *testing.T) {
	var ran sync.WaitGroup
	ran.Add(1)
	e := newEnv(t, func(o *mcpproxy.Options) { o.Transport = slowAnswer("transfer", &ran) })
	cs, run := e.mustConnect(e.key, "")
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "transfer"}})
		errc <- err
	}()
	ran.Wait()
	cancel()
	<-errc
	if got := e.up.callLog(); len(got) != 1 || got[0] != "echo" {
		t.Fatalf("upstream calls = %v, want [echo]", got)
	}
	done := e.completion(run, "mcp__up__echo")
	if done == nil || done.Body["outcome"] != "ok" {
		t.Fatalf("the upstream ran echo, but its completion = %v, want outcome ok (the upstream's result)", done)
	}
}

// TestAttack9ArgsCaseFoldCollision: {"text":"hi","TEXT":"secret"} has
// no duplicate member, so the signer decides it on args.text == "hi"
// (AGENTS-SECRET does not match: allow), while an upstream that binds
// arguments case-insensitively, last member wins (Go encoding/json into
// a struct, as mcp-go's BindArguments does; System.Text.Json with
// case-insensitive names) runs echo with text "secret". Arguments with
// member names equal under case folding, at any depth, must be refused
// before anything is forwarded.
func TestAttack9ArgsCaseFoldCollision(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	e := newEnv(t, func(o *mcpproxy.Options) {
		o.Transport = rtFunc(func(r *http.Request) (*http.Response, error) {
			if r.Body != nil {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				if m, _, args := upstreamCall(body); m == "tools/call" {
					mu.Lock()
					sent = append(sent, string(args))
					mu.Unlock()
				}
			}
			return http.DefaultTransport.RoundTrip(r)
		})
	})
	cs, _ := e.mustConnect(e.key, "")
	for _, args := range []string{
		`{"text":"hi","TEXT":"secret"}`,
		`{"text":"hi","Text":"secret"}`,
		`{"text":"hi","te\u0058t":"secret"}`,
		`{"n":{"k":1,"\u212a":2},"text":"x"}`, // KELVIN SIGN folds to k
		`{"a":[{"text":"hi","tExt":"secret"}],"text":"y"}`,
	} {
		var v struct{ Text string }
		if err := json.Unmarshal([]byte(args), &v); err == nil && v.Text == "secret" {
			t.Logf("%s: a Go upstream binding into a struct reads text %q", args, v.Text)
		}
		r := call(t, cs, "echo", json.RawMessage(args))
		if !r.IsError {
			t.Errorf("%s: forwarded and answered %q, want a refusal", args, resultText(r))
		}
	}
	mu.Lock()
	if len(sent) != 0 {
		t.Errorf("the upstream was sent tools/call with case-colliding argument names: %v", sent)
	}
	mu.Unlock()
	// Distinct names are fine.
	if r := call(t, cs, "huge", json.RawMessage(`{"n":3,"N2":{"k":1,"kk":2}}`)); r.IsError {
		t.Errorf("distinct names refused: %q", resultText(r))
	}
}

// TestAttack9UpstreamRedirectNotFollowed: the proxy's upstream client
// followed HTTP redirects, and the credential is added by the transport
// under the client, so it went with every hop: an upstream (or anything
// on its path, e.g. an open redirect) answering 307 sent the tool call,
// with the operator's credential, to another server (here another
// tenant's upstream), recorded as a call of the declared one. Redirects
// must not be followed.
func TestAttack9UpstreamRedirectNotFollowed(t *testing.T) {
	other := newUpstream(t, "upstream-secret-"+strings.Repeat("z", 16)) // another server, same secret so it would run the call
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirector.Close)
	e := newEnv(t, func(o *mcpproxy.Options) {
		cfg, err := mcpproxy.ParseConfig([]byte(`upstreams:
  - name: up
    url: ` + redirector.URL + `/mcp
    tenants: [agents]
    credential:
      file: ` + o.Config.Upstreams[0].Credential.File + `
`))
		if err != nil {
			t.Fatal(err)
		}
		o.Config = cfg
	})
	cs, run := e.mustConnect(e.key, "")
	r := call(t, cs, "echo", map[string]any{"text": "x"})
	if got := other.authLog(); len(got) != 0 {
		t.Errorf("the redirect target got %d requests (with the credential: %v), want none", len(got), slicesContain(got, "Bearer "+other.secret))
	}
	if got := other.callLog(); len(got) != 0 {
		t.Errorf("the redirect target ran %v", got)
	}
	if !r.IsError {
		t.Errorf("echo through a redirecting upstream = %q, want an error result", resultText(r))
	}
	if done := e.completion(run, "mcp__up__echo"); done != nil && done.Body["outcome"] != "error" {
		t.Errorf("completion = %v, want none or outcome error", done.Body)
	}
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestAttack9HeldSessionEndMidCall (held up): the sandbox ends its
// session (DELETE) while an allowed call it made is on its way back
// from the upstream, which has run it. The go-sdk's session close waits
// for the calls under way before the proxy closes the upstream session
// and the run, so the call's real outcome (ok) is recorded before
// run.closing: the agent cannot choose what the record says of it.
func TestAttack9HeldSessionEndMidCall(t *testing.T) {
	var ran sync.WaitGroup
	ran.Add(1)
	e := newEnv(t, func(o *mcpproxy.Options) { o.Transport = slowAnswer("", &ran) })
	cs, run := e.mustConnect(e.key, "")
	go cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "transfer"}})
	ran.Wait()
	cs.Close() // DELETE
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := e.s.Status(e.ctx, e.agent, run)
		if err == nil && info.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still open after the session ended: %+v, %v", run, info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	recs := e.records(run)
	id := lastDecided(recs, "mcp__up__echo")
	c := byCall(recs, id)
	if done := c[verify.TypeCallCompleted]; done == nil || done.Body["outcome"] != "ok" {
		t.Fatalf("the upstream ran echo (%v), but its completion = %v, want outcome ok", e.up.callLog(), done)
	}
}

// TestAttack9UpstreamErrorTextLogged: an upstream answering a JSON-RPC
// error whose message echoes the request's Authorization header (the
// connect, or tools/list) had that text logged at Warn: the credential
// reached custody's log, which the package promises it never does
// (tools/call's JSON-RPC errors were logged by code only). newEnv's
// cleanup fails the test if a log line holds the credential.
func TestAttack9UpstreamErrorTextLogged(t *testing.T) {
	for _, method := range []string{"initialize", "tools/list"} {
		t.Run(strings.ReplaceAll(method, "/", "_"), func(t *testing.T) {
			e := newEnv(t, func(o *mcpproxy.Options) {
				o.Transport = rtFunc(func(r *http.Request) (*http.Response, error) {
					var body []byte
					if r.Body != nil {
						body, _ = io.ReadAll(r.Body)
						r.Body = io.NopCloser(bytes.NewReader(body))
					}
					var msg struct {
						ID json.RawMessage `json:"id"`
					}
					if m, _, _ := upstreamCall(body); m == method && json.Unmarshal(body, &msg) == nil {
						text, _ := json.Marshal("bad request; you sent " + r.Header.Get("Authorization"))
						out := `{"jsonrpc":"2.0","id":` + string(msg.ID) + `,"error":{"code":-32600,"message":` + string(text) + `}}`
						h := http.Header{"Content-Type": {"application/json"}}
						if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
							h.Set("Mcp-Session-Id", sid)
						}
						return &http.Response{StatusCode: http.StatusBadRequest, Header: h, Body: io.NopCloser(strings.NewReader(out)), Request: r}, nil
					}
					return http.DefaultTransport.RoundTrip(r)
				})
			})
			cs, _ := e.mustConnect(e.key, "")
			if _, err := cs.ListTools(t.Context(), nil); err == nil {
				t.Error("tools/list succeeded")
			} else if strings.Contains(err.Error(), e.up.secret) {
				t.Errorf("the sandbox got the credential: %v", err)
			}
			r := call(t, cs, "echo", map[string]any{"text": "x"})
			if strings.Contains(resultText(r), e.up.secret) {
				t.Errorf("the sandbox got the credential: %s", resultText(r))
			}
		})
	}
}

// TestAttack9ToolFilterSlash: the tools filter's globs are documented
// as path.Match syntax where * is "any run of characters", and the
// signer's policy globs match that way (mcp__up__* allows
// mcp__up__delete_repo/force); but path.Match's * stops at '/', so
// deny ["delete_*"] did not deny an upstream tool named
// "delete_repo/force": it was offered, decided allow and run. A deny
// glob must match such a name (and allow ["*"] offer it).
func TestAttack9ToolFilterSlash(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "slashes", Version: "1"}, nil)
	var mu sync.Mutex
	var ran []string
	for _, name := range []string{"delete_repo/force", "repo/read"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name}, func(ctx context.Context, req *mcp.CallToolRequest, a map[string]any) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			ran = append(ran, name)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran " + name}}}, nil, nil
		})
	}
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true}))
	t.Cleanup(up.Close)
	for _, filter := range []string{`deny: ["delete_*"]`, `allow: ["*"], deny: ["delete_*"]`} {
		e := newEnv(t, func(o *mcpproxy.Options) {
			cfg, err := mcpproxy.ParseConfig([]byte(`upstreams:
  - name: up
    url: ` + up.URL + `
    tenants: [agents]
    tools: {` + filter + `}
`))
			if err != nil {
				t.Fatal(err)
			}
			o.Config = cfg
		})
		cs, _ := e.mustConnect(e.key, "")
		lt, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range lt.Tools {
			names = append(names, tl.Name)
		}
		if len(names) != 1 || names[0] != "repo/read" {
			t.Errorf("%s: tools/list = %v, want [repo/read]", filter, names)
		}
		if r := call(t, cs, "delete_repo/force", map[string]any{}); !r.IsError {
			t.Errorf("%s: delete_repo/force = %q, want a refusal (deny delete_*)", filter, resultText(r))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, n := range ran {
		if n == "delete_repo/force" {
			t.Errorf("the upstream ran %s, which the filter denies", n)
		}
	}
}

// rawSession opens a sandbox session by hand and returns a function
// posting one body in it (status and response body).
func (e *env) rawSession(key string) (run string, post func(body string) (int, string)) {
	e.t.Helper()
	url := e.srv.URL + "/mcp/servers/up"
	do := func(body, sid string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, b := do(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, "")
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || sid == "" {
		e.t.Fatalf("initialize = %d %s", resp.StatusCode, b)
	}
	do(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, sid)
	return resp.Header.Get(mcpproxy.RunHeader), func(body string) (int, string) {
		resp, b := do(body, sid)
		return resp.StatusCode, b
	}
}

// TestAttack9HeldJSONRPCShapes (held up): odd JSON-RPC shapes in a
// session: a batch mixing tools/call with others, a tools/call
// notification (no id), duplicate "method", "params" and "name" members
// (the last wins in the SDK as in any encoding/json reader), a method
// in another case or with escapes, an id reused by concurrent calls.
// Every message goes through the SDK's dispatch to the proxy's
// middleware, the only code holding the upstream session, so whatever
// the upstream ran was decided allow and recorded under its own name,
// and the denied tool never ran.
func TestAttack9HeldJSONRPCShapes(t *testing.T) {
	e := newEnv(t, nil)
	run, post := e.rawSession(e.key)
	call := func(id, name, text string) string {
		return `{"jsonrpc":"2.0",` + id + `"method":"tools/call","params":{"name":"` + name + `","arguments":{"text":"` + text + `"}}}`
	}
	bodies := []string{
		`[` + call(`"id":2,`, "forbidden_tool", "a") + `,{"jsonrpc":"2.0","id":3,"method":"ping"}]`,
		call("", "forbidden_tool", "b"),
		`{"jsonrpc":"2.0","id":4,"method":"ping","method":"tools/call","params":{"name":"echo","arguments":{"text":"secret"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}},"params":{"name":"forbidden_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","name":"forbidden_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":7,"Method":"tools/call","params":{"name":"forbidden_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":8,"method":"tools\u002fcall","params":{"name":"forbidden_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":9,"method":"TOOLS/CALL","params":{"name":"forbidden_tool","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"forbidden\u005ftool","arguments":{}}}`,
	}
	for _, b := range bodies {
		st, out := post(b)
		t.Logf("%.90s -> %d %.160s", b, st, out)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(call(`"id":77,`, "echo", "dup"+string(rune('a'+i))))
		}()
	}
	wg.Wait()
	time.Sleep(300 * time.Millisecond) // notifications are answered before they run
	ranEcho := 0
	for _, c := range e.up.callLog() {
		switch c {
		case "forbidden_tool":
			t.Errorf("the upstream ran forbidden_tool: %v", e.up.callLog())
		case "echo":
			ranEcho++
		}
	}
	allowed := 0
	for _, r := range e.records(run) {
		if r.Type == verify.TypeCallDecided && r.Body["tool"] == "mcp__up__echo" && r.Body["effect"] == "allow" {
			allowed++
		}
	}
	if ranEcho > allowed {
		t.Errorf("the upstream ran echo %d times, %d decided allow", ranEcho, allowed)
	}
}

// TestAttack9MaxSessionsRace: MaxSessions was checked by counting the
// agent's live sessions, and the new one joined them only after the
// signer registered its run, so concurrent initializes all passed the
// check: an agent could open any number of sessions (each a registered
// run and an upstream session), not MaxSessions.
func TestAttack9MaxSessionsRace(t *testing.T) {
	e := newEnv(t, func(o *mcpproxy.Options) { o.MaxSessions = 2 })
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	var mu sync.Mutex
	var sids []string
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", e.srv.URL+"/mcp/servers/up", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+e.key)
			<-start
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if sid := resp.Header.Get("Mcp-Session-Id"); resp.StatusCode == 200 && sid != "" {
				mu.Lock()
				sids = append(sids, sid)
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	for _, sid := range sids {
		del, _ := http.NewRequest("DELETE", e.srv.URL+"/mcp/servers/up", nil)
		del.Header.Set("Mcp-Session-Id", sid)
		del.Header.Set("Authorization", "Bearer "+e.key)
		if r, err := http.DefaultClient.Do(del); err == nil {
			r.Body.Close()
		}
	}
	if len(sids) > 2 {
		t.Errorf("%d concurrent sessions opened, MaxSessions 2", len(sids))
	}
}

// TestAttack9HeldCancelledListDuringCall (held up): the sandbox cancels
// a tools/list while a call it made is under way; the failed list drops
// (closes) the upstream session, which could have cut the call the
// upstream had run and had it recorded as an error. The go-sdk client's
// close lets the call under way finish: its real outcome is recorded.
func TestAttack9HeldCancelledListDuringCall(t *testing.T) {
	var ran, listing sync.WaitGroup
	ran.Add(1)
	listing.Add(1)
	var onceRan, onceList sync.Once
	var sentCall sync.Once
	callSent := make(chan struct{})
	e := newEnv(t, func(o *mcpproxy.Options) {
		o.Transport = rtFunc(func(r *http.Request) (*http.Response, error) {
			var body []byte
			if r.Body != nil {
				body, _ = io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			m, tool, _ := upstreamCall(body)
			select {
			case <-callSent:
				if m == "tools/list" { // a tools/list after the call: slow
					onceList.Do(listing.Done)
					select {
					case <-r.Context().Done():
						return nil, r.Context().Err()
					case <-time.After(2 * time.Second):
					}
				}
			default:
			}
			resp, err := http.DefaultTransport.RoundTrip(r)
			if err == nil && m == "tools/call" && tool == "echo" {
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				resp.Body = io.NopCloser(bytes.NewReader(out))
				sentCall.Do(func() { close(callSent) })
				onceRan.Do(ran.Done)
				select {
				case <-r.Context().Done():
					return nil, r.Context().Err()
				case <-time.After(time.Second):
				}
			}
			return resp, err
		})
	})
	cs, run := e.mustConnect(e.key, "")
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "transfer"}})
		errc <- err
	}()
	ran.Wait()
	ctx, cancel := context.WithCancel(t.Context())
	go func() { listing.Wait(); cancel() }()
	cs.ListTools(ctx, nil)
	<-errc
	done := e.completion(run, "mcp__up__echo")
	if done == nil || done.Body["outcome"] != "ok" {
		t.Fatalf("the upstream ran echo, but its completion = %v, want outcome ok", done)
	}
}

// slowRegister holds one Register, once hold is set, until release is
// closed.
type slowRegister struct {
	recorderFunc
	hold    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (r *slowRegister) Register(ctx context.Context, c apikey.Identity) (signer.RunInfo, error) {
	if r.hold.CompareAndSwap(true, false) {
		close(r.entered)
		<-r.release
	}
	return r.recorderFunc.Register(ctx, c)
}

// TestAttack9SessionStartedAfterClose: Proxy.Close ends the sessions it
// knows of and refuses later ones, but a session whose initialize was
// past the closed check (its run being registered) when Close ran was
// added afterwards and served: a live session, with an upstream session
// and an open registered run, that no Close would end.
func TestAttack9SessionStartedAfterClose(t *testing.T) {
	slow := &slowRegister{entered: make(chan struct{}), release: make(chan struct{})}
	e := newEnv(t, func(o *mcpproxy.Options) {
		slow.recorderFunc = o.Recorder.(recorderFunc)
		o.Recorder = slow
	})
	e.mustConnect(e.key, "")
	slow.hold.Store(true)
	type answer struct {
		code int
		run  string
	}
	got := make(chan answer, 1)
	go func() {
		body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
		req, _ := http.NewRequest("POST", e.srv.URL+"/mcp/servers/up", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+e.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{}
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got <- answer{resp.StatusCode, resp.Header.Get(mcpproxy.RunHeader)}
	}()
	<-slow.entered
	e.proxy.Close()
	close(slow.release)
	a := <-got
	if a.code == http.StatusOK {
		t.Errorf("a session started while the proxy closed was served (run %s)", a.run)
	}
	if a.run != "" {
		if info, err := e.s.Status(e.ctx, e.agent, a.run); err != nil || !info.Closed {
			t.Errorf("run %s is still open after Proxy.Close: %+v, %v", a.run, info, err)
		}
	}
}

// TestAttack9HeldSessionAndPathCrossing (held up): another agent of the
// tenant, or a key of another tenant, presenting an agent's
// Mcp-Session-Id (POST tools/call, GET stream, DELETE) is refused
// (go-sdk: the session's user is tenant/agent/session; the server's
// tenants are checked on every request), and spellings of the server's
// name (case, percent-encoding, trailing slash, encoded slash) do not
// reach it for another tenant.
func TestAttack9HeldSessionAndPathCrossing(t *testing.T) {
	e := newEnv(t, nil)
	_, post := e.rawSession(e.key)
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	send := func(method, path, key, sid, body string) int {
		req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Authorization", "Bearer "+key)
		if sid != "" {
			req.Header.Set("Mcp-Session-Id", sid)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		resp, err := http.DefaultClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		return resp.StatusCode
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/mcp/servers/up", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	send("POST", "/mcp/servers/up", e.key, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	callBody := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`
	for _, tc := range []struct {
		name, method, key, body string
		want                    int
	}{
		{"other agent POST", "POST", e.other, callBody, http.StatusForbidden},
		{"other agent GET", "GET", e.other, "", http.StatusForbidden},
		{"other agent DELETE", "DELETE", e.other, "", http.StatusForbidden},
		{"other tenant POST", "POST", e.outsider, callBody, http.StatusNotFound},
		{"other tenant DELETE", "DELETE", e.outsider, "", http.StatusNotFound},
	} {
		if got := send(tc.method, "/mcp/servers/up", tc.key, sid, tc.body); got != tc.want {
			t.Errorf("%s = %d, want %d", tc.name, got, tc.want)
		}
	}
	for _, path := range []string{"/mcp/servers/UP", "/mcp/servers/u%70", "/mcp/servers/up/", "/mcp/servers/up%2F", "/mcp/servers//up", "/mcp/servers/./up"} {
		if got := send("POST", path, e.outsider, "", body); got == http.StatusOK {
			t.Errorf("another tenant's initialize at %s = %d", path, got)
		}
	}
	if got := e.up.callLog(); len(got) != 0 {
		t.Errorf("the upstream ran %v", got)
	}
	// The owner's session still works.
	if st, out := post(callBody); st != 200 || !strings.Contains(out, "echo: x") {
		t.Errorf("owner's call = %d %.200s", st, out)
	}
}
