package mcpproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apierror"
	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/mcpauth"
	"github.com/agentcustody/custody/internal/signer"
)

// Recorder is the signer as the proxy uses it; *signer.Signer implements
// it, and so does custody serve's glue, which answers [ErrUnavailable]
// while the replica stands by. Every method acts as caller and must be
// safe for concurrent use; ownership refusals wrap signer.ErrForbidden
// or signer.ErrNotFound, a closed run signer.ErrRunClosed.
type Recorder interface {
	Register(ctx context.Context, caller apikey.Identity) (signer.RunInfo, error)
	Status(ctx context.Context, caller apikey.Identity, run string) (signer.RunInfo, error)
	MayAllow(ctx context.Context, tenant, tool string) (bool, error)
	Decide(ctx context.Context, caller apikey.Identity, run string, req signer.DecideRequest) (signer.DecideResponse, error)
	RequestApproval(ctx context.Context, caller apikey.Identity, run string, req signer.ApprovalRequest) (signer.ApprovalInfo, error)
	WaitApproval(ctx context.Context, caller apikey.Identity, run, id string, wait time.Duration) (signer.ApprovalInfo, error)
	ConsumeApproval(ctx context.Context, caller apikey.Identity, run, id string, req signer.ConsumeRequest) (signer.ApprovalInfo, error)
	Complete(ctx context.Context, caller apikey.Identity, run string, req signer.CompleteRequest) (signer.Appended, error)
	CloseRun(ctx context.Context, caller apikey.Identity, run string) (signer.Appended, error)
}

var _ Recorder = (*signer.Signer)(nil)

// ErrUnavailable is what a [Recorder] returns when no signer can decide
// (a standby replica): calls are refused, never forwarded.
var ErrUnavailable = errors.New("signer unavailable")

// RunHeader names the run a session's calls are recorded in.
const RunHeader = "Custody-Run"

// Defaults of [Options].
const (
	DefaultApprovalWait   = 60 * time.Second
	DefaultMaxResultBytes = 4 << 20
	DefaultCallTimeout    = 60 * time.Second
	DefaultSessionTimeout = 30 * time.Minute
	DefaultMaxRequestBody = 4 << 20
	DefaultMaxSessions    = 32
)

// Options configure a [Proxy]. Zero values take the defaults.
type Options struct {
	// Config lists the upstreams; required (it may list none).
	Config *Config
	// Recorder decides and records calls; required.
	Recorder Recorder
	// Verify checks the sandbox's custody key (apikey.(*Service).Verify);
	// required.
	Verify mcpauth.VerifyFunc
	// ApprovalWait bounds how long a call decided ask waits for an
	// operator. Default 60s.
	ApprovalWait time.Duration
	// MaxResultBytes bounds an upstream response (the JSON of one
	// result; tools/list too). Default 4 MiB.
	MaxResultBytes int64
	// CallTimeout bounds each upstream exchange: connecting (initialize),
	// tools/list, tools/call. Default 60s.
	CallTimeout time.Duration
	// SessionTimeout closes a sandbox session (and its upstream session)
	// without requests for this long. Default 30m.
	SessionTimeout time.Duration
	// MaxRequestBody bounds a sandbox request body. Default 4 MiB.
	MaxRequestBody int64
	// MaxSessions bounds the open sessions of one agent (tenant and
	// agent, all servers): a new one over it is refused 429
	// too_many_sessions. Default 32.
	MaxSessions int
	// Transport sends upstream requests. Default: a clone of
	// http.DefaultTransport (proxy settings from the environment).
	Transport http.RoundTripper
	// Log receives the proxy's logs; never a key, a credential or a
	// result. Default slog.Default().
	Log *slog.Logger
}

// Proxy is the MCP proxy. It is safe for concurrent use.
type Proxy struct {
	opts    Options
	log     *slog.Logger
	rec     Recorder
	servers map[string]*server

	mu       sync.Mutex
	live     map[*session]struct{}
	starting map[[2]string]int // sessions being started, by tenant and agent
	closed   bool
}

// server is one upstream and the sandbox-facing handler for it.
type server struct {
	p       *Proxy
	up      Upstream
	tenants map[string]bool
	// base answers the SDK's getServer for requests of sessions that
	// exist already (it only reads the protocol versions from it).
	base *mcp.Server
	h    *mcp.StreamableHTTPHandler
}

// New returns a proxy for opts.Config's upstreams.
func New(opts Options) (*Proxy, error) {
	if opts.Config == nil || opts.Recorder == nil || opts.Verify == nil {
		return nil, errors.New("mcpproxy: Config, Recorder and Verify are required")
	}
	if err := opts.Config.Validate(); err != nil {
		return nil, err
	}
	if opts.ApprovalWait < 0 || opts.MaxResultBytes < 0 || opts.CallTimeout < 0 || opts.SessionTimeout < 0 || opts.MaxRequestBody < 0 || opts.MaxSessions < 0 {
		return nil, errors.New("mcpproxy: negative option")
	}
	if opts.ApprovalWait == 0 {
		opts.ApprovalWait = DefaultApprovalWait
	}
	if opts.MaxResultBytes == 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = DefaultSessionTimeout
	}
	if opts.MaxRequestBody == 0 {
		opts.MaxRequestBody = DefaultMaxRequestBody
	}
	if opts.MaxSessions == 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport.(*http.Transport).Clone()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	p := &Proxy{opts: opts, log: opts.Log.With("service", "mcpproxy"), rec: opts.Recorder,
		servers: map[string]*server{}, live: map[*session]struct{}{}, starting: map[[2]string]int{}}
	for _, u := range opts.Config.Upstreams {
		srv := &server{p: p, up: u, tenants: map[string]bool{}, base: p.newMCPServer(u.Name)}
		for _, t := range u.Tenants {
			srv.tenants[t] = true
		}
		srv.h = mcp.NewStreamableHTTPHandler(srv.getServer, &mcp.StreamableHTTPOptions{
			Logger:              p.log,
			SessionTimeout:      opts.SessionTimeout,
			MaxRequestBodyBytes: opts.MaxRequestBody,
		})
		p.servers[u.Name] = srv
	}
	return p, nil
}

func (p *Proxy) newMCPServer(name string) *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "custody-mcp-proxy/" + name, Version: "1"}, &mcp.ServerOptions{
		Logger:       p.log,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
	})
}

// Handler serves /mcp/servers/{name} (see the package doc). Mount it
// at "/mcp/servers/".
func (p *Proxy) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp/servers/{name}", p.serve)
	return mcpauth.Require(p.opts.Verify, p.log, mux)
}

// Close ends every sandbox session (and so its upstream session and the
// run it registered). Later sessions are refused (503).
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	var all []*session
	for s := range p.live {
		all = append(all, s)
	}
	p.mu.Unlock()
	for _, s := range all {
		s.close()
	}
}

type sessionKey struct{}

func (srv *server) getServer(r *http.Request) *mcp.Server {
	if s, ok := r.Context().Value(sessionKey{}).(*session); ok {
		return s.mcp
	}
	return srv.base
}

func refuse(w http.ResponseWriter, status int, code, msg string) {
	apierror.Write(w, status, code, msg)
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	rec, ok := mcpauth.RecordFromContext(r.Context())
	srv := p.servers[r.PathValue("name")]
	if !ok || srv == nil || !srv.tenants[rec.Identity.Tenant] {
		refuse(w, http.StatusNotFound, "not_found", "no such MCP server")
		return
	}
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.opts.MaxRequestBody))
		if err != nil {
			refuse(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes", p.opts.MaxRequestBody))
			return
		}
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != "initialize" {
			refuse(w, http.StatusBadRequest, "bad_request", "a request without Mcp-Session-Id must be initialize")
			return
		}
		s, status, code, text := srv.newSession(r.Context(), rec.Identity, r.Header.Get(RunHeader))
		if s == nil {
			refuse(w, status, code, text)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		w.Header().Set(RunHeader, s.run)
		srv.h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
		s.mu.Lock()
		started := s.ss != nil
		s.mu.Unlock()
		if !started { // the SDK refused the request before the session began
			s.end()
		}
		return
	}
	srv.h.ServeHTTP(w, r)
}

// newSession resolves the session's run (the named one, which must be an
// open run of caller, or a new one) and makes its MCP server. On failure
// it returns the status, code and message to answer.
func (srv *server) newSession(ctx context.Context, caller apikey.Identity, run string) (s *session, status int, code, msg string) {
	p := srv.p
	// The new session holds a place among the agent's sessions (starting)
	// from the count on, so that concurrent initializes cannot all pass it.
	agent := [2]string{caller.Tenant, caller.Agent}
	p.mu.Lock()
	closed, n := p.closed, p.starting[agent]
	for o := range p.live {
		if o.caller.Tenant == caller.Tenant && o.caller.Agent == caller.Agent {
			n++
		}
	}
	if !closed && n < p.opts.MaxSessions {
		p.starting[agent]++
	}
	p.mu.Unlock()
	if closed {
		return nil, http.StatusServiceUnavailable, "unavailable", "custody is shutting down"
	}
	if n >= p.opts.MaxSessions {
		return nil, http.StatusTooManyRequests, "too_many_sessions", fmt.Sprintf("this agent has %d open MCP sessions; end one first", n)
	}
	defer func() {
		p.mu.Lock()
		if p.starting[agent]--; p.starting[agent] == 0 {
			delete(p.starting, agent)
		}
		p.mu.Unlock()
	}()
	own := run == ""
	var info signer.RunInfo
	var err error
	if own {
		info, err = p.rec.Register(ctx, caller)
	} else if len(run) > 128 {
		err = signer.ErrNotFound
	} else {
		info, err = p.rec.Status(ctx, caller, run)
		if err == nil && info.Closed {
			err = signer.ErrRunClosed
		}
	}
	switch {
	case errors.Is(err, signer.ErrForbidden), errors.Is(err, signer.ErrNotFound), errors.Is(err, signer.ErrRunClosed):
		p.log.InfoContext(ctx, "mcp session refused: run is not an open run of the caller", "server", srv.up.Name,
			"tenant", caller.Tenant, "agent", caller.Agent, "run", run)
		return nil, http.StatusForbidden, "forbidden", RunHeader + " is not an open run of this agent"
	case errors.Is(err, ErrUnavailable):
		return nil, http.StatusServiceUnavailable, "signer_unavailable", "the signer is unavailable on this replica"
	case err != nil:
		p.log.ErrorContext(ctx, "mcp session: run failed", "server", srv.up.Name, "err", err)
		return nil, http.StatusServiceUnavailable, "signer_unavailable", "the signer could not record the session"
	}
	s = &session{srv: srv, caller: caller, run: info.Run, ownRun: own}
	s.mcp = p.newMCPServer(srv.up.Name)
	s.mcp.AddReceivingMiddleware(s.middleware)
	// Close may have run meanwhile: a session it did not see is refused.
	p.mu.Lock()
	if closed = p.closed; !closed {
		p.live[s] = struct{}{}
	}
	p.mu.Unlock()
	if closed {
		s.end()
		return nil, http.StatusServiceUnavailable, "unavailable", "custody is shutting down"
	}
	p.log.InfoContext(ctx, "mcp session started", "server", srv.up.Name, "tenant", caller.Tenant,
		"agent", caller.Agent, "session", caller.Session, "run", info.Run, "registered", own)
	return s, 0, "", ""
}

// session is one sandbox MCP session: its caller, run, and upstream
// session (connected at the first tools/list or tools/call).
type session struct {
	srv    *server
	caller apikey.Identity
	run    string
	ownRun bool // registered for this session: closed when it ends
	mcp    *mcp.Server

	watch   sync.Once
	endOnce sync.Once
	mu      sync.Mutex
	ss      *mcp.ServerSession
	cs      *mcp.ClientSession
	secret  [][]byte            // secretform.Forms of the upstream credential cs sends, to keep it out of answers
	listed  map[string]struct{} // the upstream's tool names, by session.lists
	ended   bool
}

// middleware serves tools/list and tools/call from the upstream; every
// other method is the SDK's (initialize, ping, an empty resources or
// prompts list).
func (s *session) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
			s.watch.Do(func() {
				s.mu.Lock()
				s.ss = ss
				s.mu.Unlock()
				go func() { _ = ss.Wait(); s.end() }()
			})
		}
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			return s.listTools(ctx, r)
		case *mcp.CallToolRequest:
			return s.callTool(ctx, r)
		}
		return next(ctx, method, req)
	}
}

// close ends the sandbox session and returns once its upstream session
// and run are closed.
func (s *session) close() {
	s.mu.Lock()
	ss := s.ss
	s.mu.Unlock()
	if ss != nil {
		_ = ss.Close()
	}
	s.end()
}

// end closes the upstream session and the run this session registered,
// once; a concurrent caller waits for the first.
func (s *session) end() { s.endOnce.Do(s.doEnd) }

func (s *session) doEnd() {
	s.mu.Lock()
	s.ended = true
	cs := s.cs
	s.cs = nil
	s.mu.Unlock()
	p := s.srv.p
	defer func() { // last, so that Proxy.Close waits for what is under way
		p.mu.Lock()
		delete(p.live, s)
		p.mu.Unlock()
	}()
	if cs != nil {
		_ = cs.Close()
	}
	if s.ownRun {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := p.rec.CloseRun(ctx, s.caller, s.run); err != nil && !errors.Is(err, signer.ErrRunClosed) {
			p.log.WarnContext(ctx, "mcp session ended; closing its run failed", "server", s.srv.up.Name, "run", s.run, "err", err)
		}
	}
	p.log.Info("mcp session ended", "server", s.srv.up.Name, "run", s.run)
}
