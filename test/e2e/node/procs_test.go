package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain doubles as a helper process: with NODE_TEST_SIGNAL_FILE set it
// waits for SIGINT or SIGTERM and writes "<signal> <unix nanos>" there.
func TestMain(m *testing.M) {
	if out := os.Getenv("NODE_TEST_SIGNAL_FILE"); out != "" {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM)
		os.WriteFile(out+".ready", nil, 0o600)
		s := <-c
		os.WriteFile(out, []byte(fmt.Sprintf("%s %d", s, time.Now().UnixNano())), 0o600)
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// startHelper starts the helper and writes its pid file as Spawn does.
func startHelper(t *testing.T, stateDir, name string, sig syscall.Signal) (*exec.Cmd, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), name)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "NODE_TEST_SIGNAL_FILE="+out)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	for i := 0; ; i++ {
		if _, err := os.Stat(out + ".ready"); err == nil {
			break
		}
		if i > 200 {
			t.Fatal("helper did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	writePidFile(t, stateDir, pidFile{Name: name, PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid), Signal: sig})
	return cmd, out
}

func writePidFile(t *testing.T, stateDir string, pf pidFile) {
	t.Helper()
	b, _ := json.Marshal(pf)
	if err := os.MkdirAll(pidDir(stateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pidDir(stateDir), pf.Name+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStopPidFiles(t *testing.T) {
	dir := t.TempDir()
	_, agentOut := startHelper(t, dir, "a-policy-agent", syscall.SIGINT)
	_, kubeletOut := startHelper(t, dir, "kubelet", syscall.SIGTERM)
	// A live process whose start time does not match its pid file (the pid
	// was reused): it must not be signalled.
	other, otherOut := startHelper(t, dir, "reused", syscall.SIGTERM)
	writePidFile(t, dir, pidFile{Name: "reused", PID: other.Process.Pid, Start: "1", Signal: syscall.SIGTERM})

	var log bytes.Buffer
	if err := stopPidFiles(dir, 5*time.Second, func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) }); err != nil {
		t.Fatalf("stopPidFiles() = %v", err)
	}
	agent, kubelet := readSignal(t, agentOut), readSignal(t, kubeletOut)
	if agent.sig != "interrupt" || kubelet.sig != "terminated" {
		t.Errorf("signals = agent %q, kubelet %q; want interrupt, terminated", agent.sig, kubelet.sig)
	}
	if agent.at >= kubelet.at {
		t.Errorf("the policy agent (SIGINT) was stopped after the kubelet; want it first")
	}
	if _, err := os.Stat(otherOut); err == nil || procStart(other.Process.Pid) == "" {
		t.Errorf("the process behind a reused pid was signalled")
	}
	if _, err := os.Stat(pidDir(dir)); !os.IsNotExist(err) {
		t.Errorf("pid dir still there after stopPidFiles: %v", err)
	}
	if !strings.Contains(log.String(), "stopping a-policy-agent") {
		t.Errorf("log = %q, want the stop lines", log.String())
	}
}

type received struct {
	sig string
	at  int64
}

func readSignal(t *testing.T, path string) received {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("helper got no signal: %v", err)
	}
	f := strings.Fields(string(b))
	at, _ := strconv.ParseInt(f[len(f)-1], 10, 64)
	return received{sig: strings.Join(f[:len(f)-1], " "), at: at}
}

func TestTeardownWithoutStateTouchesOnlyWorkDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	if err := os.MkdirAll(filepath.Join(dir, "work", "containerd"), 0o700); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	for i := 0; i < 2; i++ { // idempotent
		if err := Teardown(context.Background(), dir, &log); err != nil {
			t.Fatalf("Teardown() #%d = %v", i+1, err)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Fatalf("Teardown() #%d left %s: %v", i+1, dir, err)
		}
	}
	if got := log.String(); strings.Count(got, "\n") != 1 || !strings.Contains(got, "removing "+filepath.Join(dir, "work")) {
		t.Errorf("Teardown() log = %q, want only the work dir removed", got)
	}
}

func TestStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if s, err := loadState(dir); s != nil || err != nil {
		t.Fatalf("loadState(empty) = %v, %v; want nil, nil", s, err)
	}
	want := &state{BootID: "b", WorkDir: "/w", Sysctls: map[string]string{"kernel.panic": "1"}, Tables: []string{"inet x"}}
	if err := want.save(dir); err != nil {
		t.Fatal(err)
	}
	got, err := loadState(dir)
	if err != nil || got.BootID != "b" || got.Sysctls["kernel.panic"] != "1" || got.Tables[0] != "inet x" {
		t.Errorf("loadState() = %+v, %v; want %+v", got, err, want)
	}
	if err := os.WriteFile(statePath(dir), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(dir); err == nil {
		t.Error("loadState(corrupt) = nil error; want a refusal (a teardown must not guess)")
	}
}

func TestSpawnThenStop(t *testing.T) {
	dir := t.TempDir()
	h := &Host{StateDir: dir, WorkDir: filepath.Join(dir, "work")}
	if err := os.MkdirAll(h.WorkDir, 0o700); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "agent")
	cmd, err := h.Spawn("policy-agent", syscall.SIGINT, []string{"NODE_TEST_SIGNAL_FILE=" + out}, os.Args[0], "-test.run=^$")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := os.Stat(out + ".ready"); err == nil {
			break
		}
		if i > 200 {
			t.Fatalf("spawned process did not start; log: %s", h.Logs("policy-agent", 500))
		}
		time.Sleep(10 * time.Millisecond)
	}
	b, err := os.ReadFile(filepath.Join(pidDir(dir), "policy-agent.json"))
	var pf pidFile
	if err != nil || json.Unmarshal(b, &pf) != nil || pf.PID != cmd.Process.Pid || pf.Start == "" || pf.Signal != syscall.SIGINT {
		t.Fatalf("pid file = %s, %v; want pid %d, its start time, SIGINT", b, err, cmd.Process.Pid)
	}
	if err := stopPidFiles(dir, 5*time.Second, t.Logf); err != nil {
		t.Fatal(err)
	}
	if got := readSignal(t, out); got.sig != "interrupt" {
		t.Errorf("spawned policy agent got %q, want interrupt", got.sig)
	}
}

// A state file from an earlier boot names pids and start times that mean
// nothing now: the teardown must not signal them, only clean the paths.
func TestTeardownEarlierBootSignalsNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	live, liveOut := startHelper(t, dir, "kubelet", syscall.SIGTERM)
	st := &state{BootID: "an-earlier-boot", WorkDir: work, Paths: FixedPaths, Cgroups: cgroupDirs(), Netns: netnsNames()}
	if err := st.save(dir); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	if err := Teardown(context.Background(), dir, &log); err != nil {
		t.Fatalf("Teardown() = %v\n%s", err, log.String())
	}
	if _, err := os.Stat(liveOut); err == nil || procStart(live.Process.Pid) == "" {
		t.Errorf("Teardown() signalled a pid recorded in an earlier boot; log:\n%s", log.String())
	}
	if !strings.Contains(log.String(), "earlier boot") {
		t.Errorf("Teardown() log = %q, want it to say the state is from an earlier boot", log.String())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Teardown() left %s (state file, pid files, work dir): %v", dir, err)
	}
}
