package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAttack10ExecThirdSignal: Ctrl-C three times. The first signal is
// forwarded, the second stops the process (SIGTERM, SIGKILL after
// --kill-grace); custody stopped catching signals then, so the third,
// arriving during the kill grace, ended custody by Go's default before
// it revoked the token (which stayed valid until its TTL). custody must
// outlive it and revoke.
//
// custody runs in a child process (this test binary re-run), which the
// test signals.
func TestAttack10ExecThirdSignal(t *testing.T) {
	if args := os.Getenv("CUSTODY_TEST_EXEC_CHILD"); args != "" {
		code, _, stderr := runCLI(t, context.Background(), envMap(nil), "", strings.Split(args, "\x1f")...)
		fmt.Printf("exec ended with %d\n%s", code, stderr)
		return
	}
	sd := startSandboxd(t)
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "admin-token")
	must(t, os.WriteFile(tokenFile, []byte("admin-0123\n"), 0o600))
	admin := newExecAdmin(t, "admin-0123")
	args := []string{"exec", "--sandboxd=" + sd, "--admin=" + admin.URL, "--admin-token-file=" + tokenFile,
		"--kill-grace=1s", "--", "sh", "-c", "trap '' TERM INT; sleep 30 & wait; sleep 30"}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAttack10ExecThirdSignal$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CUSTODY_TEST_EXEC_CHILD="+strings.Join(args, "\x1f"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	must(t, cmd.Start())
	time.Sleep(1500 * time.Millisecond) // the process is running
	for range 3 {
		must(t, cmd.Process.Signal(syscall.SIGINT))
		time.Sleep(200 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Errorf("custody was ended by %v (err %v)", ws.Signal(), err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatal("custody did not end after three signals")
	}
	if got := admin.revoked(); len(got) != 1 {
		t.Errorf("revokes after three signals = %v, want one; custody said:\n%s", got, out.String())
	}
}
