package runlease_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	processv1 "sigs.k8s.io/agent-sandbox/packages/sandboxd/spec/process/v1"

	"github.com/agentcustody/custody/internal/runlease"
	"github.com/agentcustody/custody/test/e2e/controlplane"
)

// The tests run commands through a real sandboxd, built from tools/go.mod
// by the e2e harness (cached after the first build) and run on loopback.

var (
	sandboxdBin string
	shared      *sandboxd
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	bins, err := controlplane.Build(ctx, os.Stderr)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runlease: build sandboxd:", err)
		os.Exit(1)
	}
	sandboxdBin = bins["sandboxd"]
	dir, err := os.MkdirTemp("", "runlease-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared, err = startSandboxd(filepath.Join(dir, "shared"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "runlease:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	// The shared sandboxd's client connection must be closed before the
	// leak check, so goleak.VerifyTestMain (which checks first) won't do.
	shared.stop()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sandboxd is one sandboxd process on loopback.
type sandboxd struct {
	addr string
	root string // --root-dir: the processes' working directory
	cmd  *exec.Cmd
	conn *grpc.ClientConn
	once sync.Once
}

func startSandboxd(dir string) (*sandboxd, error) {
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "sandboxd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	grpcPort, restPort, err := freePorts()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(sandboxdBin, "--grpc-port", strconv.Itoa(grpcPort), "--rest-port", strconv.Itoa(restPort),
		"--root-dir", root, "--shutdown-timeout", "2s")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start sandboxd: %w", err)
	}
	s := &sandboxd{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort)), root: root, cmd: cmd}
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			s.stop()
			log, _ := os.ReadFile(logf.Name())
			return nil, fmt.Errorf("sandboxd did not listen on %s: %v\n%s", s.addr, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.conn, err = grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

func (s *sandboxd) client() processv1.ProcessServiceClient {
	return processv1.NewProcessServiceClient(s.conn)
}

// kill ends sandboxd with SIGKILL: its streams break without an ExitEvent.
func (s *sandboxd) kill() {
	_ = s.cmd.Process.Kill()
}

func (s *sandboxd) stop() {
	s.once.Do(func() {
		if s.conn != nil {
			s.conn.Close()
		}
		// SIGKILL: every test's process has exited by now, and a
		// graceful sandboxd shutdown costs 2 s.
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	})
}

func freePorts() (int, int, error) {
	var ports [2]int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, err
		}
		ls = append(ls, l)
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}

// events is the order in which things happened across the admin server
// and the sandboxd stream: "mint", "start", "exit", "revoke".
type events struct {
	mu  sync.Mutex
	seq []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seq = append(e.seq, s)
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seq...)
}

// adminServer is a fake gateway admin API that records its calls.
type adminServer struct {
	*httptest.Server
	ev *events

	mu           sync.Mutex
	mints        []map[string]any
	revokes      []string
	tokens       map[string]string // jti -> token
	mintStatus   int               // default 201
	mintHook     func() int        // if set, each mint's status (0: default), called under mu
	revokeStatus int               // default 204
	revokeHang   bool              // revoke waits for the client to give up
	badAuth      int
}

const adminToken = "admin-secret-0123456789"

func newAdminServer(t *testing.T, ev *events) *adminServer {
	a := &adminServer{ev: ev, tokens: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/gateway/tokens", func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(w, r) {
			return
		}
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, "bad json", http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.mints = append(a.mints, body)
		status := a.mintStatus
		if a.mintHook != nil {
			status = a.mintHook()
		}
		a.mu.Unlock()
		ev.add("mint")
		if status != 0 && status != http.StatusCreated {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprint(w, `{"error":"mint_refused","message":"no minting today"}`)
			return
		}
		jti, tok := "jti_"+randHex(8), "gwt."+randHex(24)
		a.mu.Lock()
		a.tokens[jti] = tok
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		json.NewEncoder(w).Encode(map[string]any{
			"token": tok, "jti": jti, "expires_at": time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339),
			"providers": body["providers"],
		})
	})
	mux.HandleFunc("POST /v1/gateway/tokens/{jti}/revoke", func(w http.ResponseWriter, r *http.Request) {
		if !a.authorized(w, r) {
			return
		}
		jti := r.PathValue("jti")
		a.mu.Lock()
		a.revokes = append(a.revokes, jti)
		status, hang := a.revokeStatus, a.revokeHang
		_, known := a.tokens[jti]
		a.mu.Unlock()
		ev.add("revoke")
		switch {
		case hang:
			<-r.Context().Done()
		case status != 0:
			w.WriteHeader(status)
		case !known:
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	a.Server = httptest.NewServer(mux)
	t.Cleanup(a.Close)
	return a
}

func (a *adminServer) authorized(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get("Authorization") != "Bearer "+adminToken {
		a.mu.Lock()
		a.badAuth++
		a.mu.Unlock()
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return false
	}
	return true
}

func (a *adminServer) state() (mints []map[string]any, revokes []string, tokens map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	tokens = make(map[string]string, len(a.tokens))
	for k, v := range a.tokens {
		tokens[k] = v
	}
	return append(mints, a.mints...), append(revokes, a.revokes...), tokens
}

// onlyToken returns the one minted jti and token.
func (a *adminServer) onlyToken(t *testing.T) (jti, token string) {
	t.Helper()
	_, _, tokens := a.state()
	if len(tokens) != 1 {
		t.Fatalf("minted %d tokens, want 1", len(tokens))
	}
	for jti, tok := range tokens {
		return jti, tok
	}
	return "", ""
}

func (a *adminServer) client(t *testing.T) *runlease.AdminClient {
	t.Helper()
	c, err := runlease.NewAdminClient(runlease.AdminOptions{URL: a.URL, Token: adminToken, RevokeBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// recordingClient wraps the real ProcessService client, recording each
// StartRequest and adding "start" and "exit" to the event order.
type recordingClient struct {
	processv1.ProcessServiceClient
	ev *events

	mu     sync.Mutex
	starts []*processv1.StartRequest
}

func (r *recordingClient) Start(ctx context.Context, in *processv1.StartRequest, opts ...grpc.CallOption) (processv1.ProcessService_StartClient, error) {
	r.mu.Lock()
	r.starts = append(r.starts, in)
	r.mu.Unlock()
	r.ev.add("start")
	s, err := r.ProcessServiceClient.Start(ctx, in, opts...)
	if err != nil {
		return nil, err
	}
	return &recordingStream{ProcessService_StartClient: s, ev: r.ev}, nil
}

func (r *recordingClient) startRequests() []*processv1.StartRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*processv1.StartRequest(nil), r.starts...)
}

type recordingStream struct {
	processv1.ProcessService_StartClient
	ev *events
}

func (s *recordingStream) Recv() (*processv1.StartResponse, error) {
	m, err := s.ProcessService_StartClient.Recv()
	if err == nil && m.GetExit() != nil {
		s.ev.add("exit")
	}
	return m, err
}

// watchWriter collects output and closes a channel when it first contains
// a given string.
type watchWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	want  string
	found chan struct{}
	once  sync.Once
}

func newWatchWriter(want string) *watchWriter {
	return &watchWriter{want: want, found: make(chan struct{})}
}

func (w *watchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.want != "" && strings.Contains(w.buf.String(), w.want) {
		w.once.Do(func() { close(w.found) })
	}
	return len(p), nil
}

func (w *watchWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor waits for w to see its string.
func (w *watchWriter) waitFor(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-w.found:
	case <-time.After(d):
		t.Errorf("output never contained %q; got %q", w.want, w.String())
	}
}

func mustConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
