package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Options configure [Up].
type Options struct {
	// StateDir holds state.json, the pid files and the work dir
	// (<StateDir>/work). Default DefaultStateDir. Two nodes on one
	// machine would collide anyway (cni0, the kubelet's fixed paths), so
	// there is one per machine.
	StateDir string
	// PauseImage is the CRI sandbox image reference, for example
	// "custody.local/pause:v1". Required.
	PauseImage string
	// PauseTarball is the image tarball of PauseImage (see
	// test/e2e/images), imported before Up returns. Required.
	PauseTarball string
	// Progress receives one line per step. Default io.Discard.
	Progress io.Writer
}

// Host is the prepared host side of a node: the guard table, the bridge,
// the CNI config and a running containerd.
type Host struct {
	// StateDir is Options.StateDir; WorkDir is <StateDir>/work, which
	// holds containerd's dirs and the <name>.log of every process.
	StateDir, WorkDir string
	// Containerd are containerd's paths; Containerd.Socket is the CRI
	// endpoint for the kubelet (unix://<Socket>).
	Containerd ContainerdPaths
	// Guarded are the interfaces the guard table drops traffic to.
	Guarded []string
	// PauseImage is Options.PauseImage.
	PauseImage string
	// GuardProof is what VerifyGuard saw before the guard went in.
	GuardProof GuardProof

	progress io.Writer
}

// Up runs [Teardown] (so a crashed run never poisons this one), records
// the baseline, proves the guard ruleset in throwaway namespaces
// ([VerifyGuard]; fail closed), then installs the guard table, creates the bridge, writes
// the CNI and containerd configs, starts containerd as a child process
// (recorded in a pid file), waits for its socket and imports the pause
// image. On error it tears down what it did.
func Up(ctx context.Context, opts Options) (_ *Host, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.PauseImage == "" || opts.PauseTarball == "" {
		return nil, errors.New("node: Options.PauseImage and PauseTarball are required")
	}
	if pf := Check(ctx, System{}); !pf.OK() {
		return nil, fmt.Errorf("node: cannot run a real node: %s", pf.Reason())
	}
	step := func(s string, a ...any) { fmt.Fprintf(opts.Progress, "node: "+s+"\n", a...) }
	if err := Teardown(ctx, opts.StateDir, opts.Progress); err != nil {
		return nil, fmt.Errorf("node: teardown before up: %w", err)
	}
	h := &Host{StateDir: opts.StateDir, WorkDir: filepath.Join(opts.StateDir, "work"), PauseImage: opts.PauseImage, progress: opts.Progress}
	h.Containerd = containerdPaths(h.WorkDir)

	st, err := baseline(ctx, h.WorkDir)
	if err != nil {
		return nil, err
	}
	if err := st.save(h.StateDir); err != nil {
		return nil, err
	}
	step("baseline recorded in %s (%d sysctls, %d nft tables, %d links)", statePath(h.StateDir), len(st.Sysctls), len(st.Tables), len(st.Links))
	defer func() {
		if err != nil {
			if terr := Teardown(context.WithoutCancel(ctx), h.StateDir, opts.Progress); terr != nil {
				err = errors.Join(err, terr)
			}
		}
	}()
	if err := os.MkdirAll(h.WorkDir, 0o700); err != nil {
		return nil, err
	}
	h.Guarded = defaultRouteIfaces()
	if len(h.Guarded) == 0 {
		// No default route: guard every interface but loopback.
		for _, l := range st.Links {
			if l != "lo" {
				h.Guarded = append(h.Guarded, l)
			}
		}
	}
	proof, err := VerifyGuard(ctx, opts.Progress)
	if err != nil {
		return nil, err
	}
	h.GuardProof = proof
	step("guard table inet %s: drop forwarded out of %s, and host output to %s, %s through it", GuardTable, strings.Join(h.Guarded, ","), ClusterCIDR, ServiceCIDR)
	step("bridge %s %s/24; CNI config in %s", Bridge, BridgeIP, h.Containerd.CNIConf)
	if err := setUpNetwork(ctx, h.Guarded, h.Containerd.CNIConf); err != nil {
		return nil, err
	}
	cfg, err := ContainerdConfig(h.Containerd, h.PauseImage)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(h.WorkDir, "containerd.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	step("starting containerd (%s)", h.Containerd.Socket)
	start := time.Now()
	cmd, err := h.Spawn("containerd", syscall.SIGTERM, nil, "containerd", "--config", cfgPath)
	if err != nil {
		return nil, err
	}
	if err := h.waitContainerd(ctx, cmd, 30*time.Second); err != nil {
		return nil, err
	}
	step("containerd answering after %s; importing %s", time.Since(start).Round(time.Millisecond), h.PauseImage)
	if err := h.Import(ctx, opts.PauseTarball); err != nil {
		return nil, err
	}
	return h, nil
}

// Down is [Teardown] of this host's state dir.
func (h *Host) Down(ctx context.Context) error {
	return Teardown(ctx, h.StateDir, h.progress)
}

// Logs returns the last n bytes of a node process's log, for failures.
func (h *Host) Logs(name string, n int) string {
	b, _ := os.ReadFile(filepath.Join(h.WorkDir, name+".log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// baseline records the host state before the node changes it.
func baseline(ctx context.Context, workDir string) (*state, error) {
	tables, err := nftTables(ctx)
	if err != nil {
		return nil, fmt.Errorf("node: baseline: %w", err)
	}
	st := &state{
		BootID: bootID(), WorkDir: workDir, Sysctls: readSysctls(), Tables: tables,
		IPSets: ipsets(ctx), Links: links(), Netns: netnsNames(), Cgroups: cgroupDirs(),
	}
	for _, p := range FixedPaths {
		if _, err := os.Lstat(p); err == nil {
			st.Paths = append(st.Paths, p)
		}
	}
	return st, nil
}
