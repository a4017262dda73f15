package main

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStopsOnSignal builds pause and checks it keeps running until SIGTERM
// or SIGINT and then exits 0 (the kubelet stops sandboxes with SIGTERM).
func TestStopsOnSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pause")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		cmd := exec.Command(bin)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// SIGCHLD (a reaped child) must not stop it.
		time.Sleep(500 * time.Millisecond) // let it install its handlers
		_ = cmd.Process.Signal(syscall.SIGCHLD)
		select {
		case err := <-done:
			t.Fatalf("pause exited before %s: %v", sig, err)
		case <-time.After(300 * time.Millisecond):
		}
		_ = cmd.Process.Signal(sig)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("pause after %s: %v, want exit 0", sig, err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("pause still running 10 s after %s", sig)
		}
	}
}
