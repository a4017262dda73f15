// Package gittest serves bare git repositories over git smart HTTP for
// tests and demos, the way a forge does: git's own http-backend (CGI, run
// through net/http/cgi) behind a handler that demands HTTP Basic auth with
// one username and one secret password, and answers anything else with
// 401 and a Basic challenge. Repositories live under [Server.Root] as
// OWNER/NAME.git and are served at /OWNER/NAME.git/... (also without the
// ".git"); push (git-receive-pack) is enabled.
//
// It needs the git binary (and its git-http-backend) on the machine;
// [New] skips the test when it is missing, [Start] (for a demo, outside
// tests) returns an error. [Env] and [Run] run the git client isolated
// from the user's and the system's configuration.
package gittest

import (
	"bytes"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// maxBody bounds a chunked request body the server buffers.
const maxBody = 256 << 20

// Request is one request the server received.
type Request struct {
	Method, Path, RawQuery string
	// Authorized: it carried the server's username and password.
	Authorized bool
}

// Server is a git smart HTTP server on loopback.
type Server struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	// Root holds the bare repositories, OWNER/NAME.git.
	Root string
	// User and Password are the only credentials it accepts.
	User, Password string

	srv *httptest.Server
	mu  sync.Mutex
	log []Request
}

// New starts a server (see [Start]) in a temporary root, stopped when t
// ends. It skips t if git or git-http-backend is not installed.
func New(t testing.TB, user, password string) *Server {
	t.Helper()
	if _, err := HTTPBackend(); err != nil {
		t.Skip(err)
	}
	s, err := Start(t.TempDir(), user, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start serves the bare repositories under root on a loopback port,
// accepting only user and password in HTTP Basic auth, until Close.
func Start(root, user, password string) (*Server, error) {
	backend, err := HTTPBackend()
	if err != nil {
		return nil, err
	}
	s := &Server{Root: root, User: user, Password: password}
	cg := &cgi.Handler{
		Path: backend,
		Dir:  s.Root,
		Env: []string{
			"GIT_PROJECT_ROOT=" + s.Root,
			"GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=1",
			"HOME=" + s.Root,
			"GIT_CONFIG_COUNT=2",
			"GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
			"GIT_CONFIG_KEY_1=safe.directory", "GIT_CONFIG_VALUE_1=*",
		},
		InheritEnv: []string{"PATH"},
		Logger:     log.New(io.Discard, "", 0),
		Stderr:     io.Discard,
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok := s.authorized(r)
		s.mu.Lock()
		s.log = append(s.log, Request{Method: r.Method, Path: r.URL.Path, RawQuery: r.URL.RawQuery, Authorized: ok})
		s.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Basic realm="gittest"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		// Served with and without ".git", as forges do.
		if p := r.URL.Path; !strings.Contains(p, ".git/") {
			segs := strings.SplitN(strings.TrimPrefix(p, "/"), "/", 3)
			if len(segs) == 3 {
				r.URL.Path = "/" + segs[0] + "/" + segs[1] + ".git/" + segs[2]
			}
		}
		// net/http/cgi refuses a chunked body (CGI needs CONTENT_LENGTH),
		// which git sends for a pack over http.postBuffer (1 MiB): buffer it.
		if r.ContentLength < 0 && r.Body != nil {
			b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
			if err != nil || len(b) > maxBody {
				http.Error(w, "request body unreadable or over 256 MiB", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
		}
		cg.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

func (s *Server) authorized(r *http.Request) bool {
	scheme, cred, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(cred)
	if err != nil {
		return false
	}
	want := s.User + ":" + s.Password
	return subtle.ConstantTimeCompare(b, []byte(want)) == 1
}

// Requests returns every request the server received, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.log...)
}

// HTTPBackend is the path of git-http-backend (in git --exec-path), or
// an error if git or it is not installed.
func HTTPBackend() (string, error) {
	git, err := exec.LookPath("git")
	if err != nil {
		return "", errors.New("gittest: git is not installed")
	}
	out, err := exec.Command(git, "--exec-path").Output()
	if err != nil {
		return "", fmt.Errorf("gittest: git --exec-path: %w", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	if _, err := os.Stat(p); err != nil {
		return "", errors.New("gittest: git-http-backend is not installed")
	}
	return p, nil
}

// CreateBare is [Server.Create], failing t on an error.
func (s *Server) CreateBare(t testing.TB, repo, readme string) string {
	t.Helper()
	dir, err := s.Create(repo, readme)
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Create creates the bare repository repo ("OWNER/NAME") with one commit
// on branch main holding the file README with content readme, and
// returns its directory.
func (s *Server) Create(repo, readme string) (string, error) {
	dir := filepath.Join(s.Root, filepath.FromSlash(repo)+".git")
	work, err := os.MkdirTemp("", "gittest-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	env := EnvIn(work)
	src := filepath.Join(work, "src")
	for _, step := range []struct {
		dir  string
		args []string
	}{
		{"", []string{"init", "--quiet", "--bare", "--initial-branch=main", dir}},
		{"", []string{"init", "--quiet", "--initial-branch=main", src}},
		{src, nil},
		{src, []string{"add", "README"}},
		{src, []string{"commit", "--quiet", "-m", "initial"}},
		{src, []string{"push", "--quiet", dir, "main"}},
	} {
		if step.args == nil {
			if err := os.WriteFile(filepath.Join(src, "README"), []byte(readme), 0o644); err != nil {
				return "", err
			}
			continue
		}
		if out, err := Run(step.dir, env, step.args...); err != nil {
			return "", fmt.Errorf("gittest: git %s: %w\n%s", strings.Join(step.args, " "), err, out)
		}
	}
	return dir, nil
}

// Head is the commit id main points at in the bare repository dir.
func Head(t testing.TB, dir string) string {
	t.Helper()
	return strings.TrimSpace(Must(t, dir, Env(t), "rev-parse", "main"))
}

// Env is an environment for the git client isolated from the user's and
// the system's configuration: HOME and XDG_CONFIG_HOME in temporary
// directories, no system config, no terminal prompt, a fixed author, and
// the PATH. Callers append their own variables.
func Env(t testing.TB) []string {
	t.Helper()
	return EnvIn(t.TempDir())
}

// EnvIn is [Env] with HOME in home.
func EnvIn(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		"GIT_AUTHOR_NAME=gittest", "GIT_AUTHOR_EMAIL=gittest@example.invalid",
		"GIT_COMMITTER_NAME=gittest", "GIT_COMMITTER_EMAIL=gittest@example.invalid",
		"LC_ALL=C",
	}
}

// Run runs git with args in dir (the current directory if empty) and env
// exactly, and returns its combined output and error.
func Run(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// Must is [Run], failing t if git fails.
func Must(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	out, err := Run(dir, env, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// String describes s for messages.
func (s *Server) String() string { return fmt.Sprintf("gittest server at %s", s.URL) }
