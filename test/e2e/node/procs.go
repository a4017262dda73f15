package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidFile records a process the node started, so a later Teardown (in a
// new process, after a crash) can stop exactly it.
type pidFile struct {
	Name string `json:"name"`
	PID  int    `json:"pid"`
	// Start is field 22 of /proc/<pid>/stat (start time in clock ticks
	// since boot): a pid reused by another process has another Start.
	Start string `json:"start"`
	// Signal stops it cleanly (SIGINT for the policy agent, which removes
	// its nft table only then; SIGTERM otherwise).
	Signal syscall.Signal `json:"signal"`
}

func pidDir(dir string) string { return filepath.Join(dir, "pids") }

func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return ""
	}
	return f[19] // field 22 overall
}

func procPPID(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return -1
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// Spawn starts a node process (kubelet, kube-proxy, the scheduler, the
// policy agent, a forwarder) with the environment plus env, its output in
// <WorkDir>/<name>.log, in its own process group, and records its pid
// file before returning. stop is the signal that stops it cleanly: 0
// means SIGTERM; the policy agent needs SIGINT (kube-network-policies
// removes its table only then). The process outlives a crash of the
// caller on purpose: Host.Down or the next Teardown stops it.
func (h *Host) Spawn(name string, stop syscall.Signal, env []string, bin string, args ...string) (*exec.Cmd, error) {
	if stop == 0 {
		stop = syscall.SIGTERM
	}
	logf, err := os.OpenFile(filepath.Join(h.WorkDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("node: start %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	pf := pidFile{Name: name, PID: cmd.Process.Pid, Start: procStart(cmd.Process.Pid), Signal: stop}
	b, _ := json.Marshal(pf)
	if err := os.MkdirAll(pidDir(h.StateDir), 0o700); err == nil {
		err = os.WriteFile(filepath.Join(pidDir(h.StateDir), name+".json"), b, 0o600)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("node: pid file for %s: %w", name, err)
	}
	return cmd, nil
}

// stopPidFiles stops every recorded process in reverse start order: its
// clean signal, then SIGKILL after grace. A pid whose start time differs
// from the record is someone else's and is left alone.
func stopPidFiles(dir string, grace time.Duration, logf func(string, ...any)) error {
	entries, err := os.ReadDir(pidDir(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var pfs []pidFile
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(pidDir(dir), e.Name()))
		if err != nil {
			continue
		}
		var pf pidFile
		if json.Unmarshal(b, &pf) == nil && pf.PID > 1 {
			pfs = append(pfs, pf)
		}
	}
	// Stop the policy agent (SIGINT) first, while the API is still up.
	for pass := 0; pass < 2; pass++ {
		for _, pf := range pfs {
			if (pf.Signal == syscall.SIGINT) != (pass == 0) {
				continue
			}
			if pf.Start == "" || procStart(pf.PID) != pf.Start {
				continue
			}
			logf("stopping %s (pid %d, %s)", pf.Name, pf.PID, pf.Signal)
			_ = syscall.Kill(pf.PID, pf.Signal)
			if !waitGone(pf.PID, pf.Start, grace) {
				logf("%s did not stop in %s: SIGKILL", pf.Name, grace)
				_ = syscall.Kill(-pf.PID, syscall.SIGKILL)
				_ = syscall.Kill(pf.PID, syscall.SIGKILL)
				waitGone(pf.PID, pf.Start, 5*time.Second)
			}
		}
	}
	return os.RemoveAll(pidDir(dir))
}

func waitGone(pid int, start string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		s := procStart(pid)
		if s != start {
			return true
		}
		// A zombie child of ours keeps its stat until reaped; the
		// spawning goroutine reaps it.
		if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); strings.Contains(string(b), "State:\tZ") {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killShims SIGKILLs every containerd-shim-runc-v2 whose command line names
// socket (this node's containerd), together with all its descendants (the
// containers it supervises), children first.
func killShims(socket string, logf func(string, ...any)) int {
	procs, _ := filepath.Glob("/proc/[0-9]*")
	children := map[int][]int{}
	var shims []int
	for _, p := range procs {
		pid, err := strconv.Atoi(filepath.Base(p))
		if err != nil {
			continue
		}
		children[procPPID(pid)] = append(children[procPPID(pid)], pid)
		cmdline, _ := os.ReadFile(p + "/cmdline")
		args := strings.Split(string(cmdline), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "containerd-shim-runc-v2" {
			continue
		}
		for i := 0; i+1 < len(args); i++ {
			if args[i] == "-address" && args[i+1] == socket {
				shims = append(shims, pid)
			}
		}
	}
	var kill func(int)
	kill = func(pid int) {
		for _, c := range children[pid] {
			kill(c)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, s := range shims {
		logf("killing leftover shim %d and its containers", s)
		kill(s)
	}
	return len(shims)
}
