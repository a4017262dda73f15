package gittest

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestServer: a clone with the server's credentials gets the repository,
// one without is refused, and a push lands in the bare repository.
func TestServer(t *testing.T) {
	s := New(t, "x-access-token", "s3cret-credential")
	bare := s.CreateBare(t, "octo/hello", "hello\n")
	env := Env(t)
	work := t.TempDir()
	if out, err := Run(work, env, "clone", strings.Replace(s.URL, "http://", "http://nobody:wrong@", 1)+"/octo/hello.git", "bad"); err == nil {
		t.Fatalf("clone with a wrong password succeeded:\n%s", out)
	}
	url := strings.Replace(s.URL, "http://", "http://x-access-token:s3cret-credential@", 1) + "/octo/hello"
	Must(t, work, env, "clone", "--quiet", url, "good")
	Must(t, work+"/good", env, "commit", "--quiet", "--allow-empty", "-m", "second")
	Must(t, work+"/good", env, "push", "--quiet", "origin", "main")
	if got, want := Head(t, bare), strings.TrimSpace(Must(t, work+"/good", env, "rev-parse", "HEAD")); got != want {
		t.Errorf("bare main = %s after push, want %s", got, want)
	}
	var authorized int
	for _, r := range s.Requests() {
		if r.Authorized {
			authorized++
		}
	}
	if authorized == 0 {
		t.Errorf("no authorized request in %+v", s.Requests())
	}
}
