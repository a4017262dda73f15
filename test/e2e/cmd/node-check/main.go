// Command node-check exercises test/e2e/node end to end on this machine
// and prints what it did, with times. It needs Linux and root:
//
//	go run ./test/e2e/cmd/node-check            # preflight only (changes nothing)
//	go run ./test/e2e/cmd/node-check -install   # apt-get install the missing packages
//	go run ./test/e2e/cmd/node-check -up        # bring up, ctr run, tear down
//	go run ./test/e2e/cmd/node-check -teardown  # only the idempotent teardown
//
// -up builds the pause image (test/e2e/cmd/pause) and a probe image
// (test/e2e/cmd/probe) as one-layer tarballs, then node.Up: the teardown
// first, the baseline, the guard proved in throwaway network namespaces
// (node.VerifyGuard: a canary without it, then the same probes with it;
// nothing leaves the machine), the guard table, the cni0 bridge,
// containerd (own config, child process) and the pause import. It imports
// the probe, runs it once with `ctr run` (it prints its usage line and
// exits 3: the runtime ran our binary), runs pause detached and stops it
// with SIGTERM, then tears down (twice: the second must be a no-op) and
// prints the host state before, during and after.
// All traffic stays on this machine.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentcustody/custody/test/e2e/images"
	"github.com/agentcustody/custody/test/e2e/node"
)

func main() {
	install := flag.Bool("install", false, "apt-get install the missing Debian packages")
	up := flag.Bool("up", false, "bring the host side up, run a container with ctr, tear down")
	keep := flag.Bool("keep", false, "with -up: leave the node up (tear down later with -teardown)")
	teardown := flag.Bool("teardown", false, "run only the teardown")
	stateDir := flag.String("state-dir", node.DefaultStateDir, "state, pid files and work dir")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *install, *up, *keep, *teardown, *stateDir); err != nil {
		fmt.Fprintln(os.Stderr, "node-check:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, install, up, keep, teardown bool, stateDir string) error {
	if teardown {
		start := time.Now()
		err := node.Teardown(ctx, stateDir, os.Stdout)
		fmt.Printf("teardown: %s\n", time.Since(start).Round(time.Millisecond))
		return err
	}
	pf := node.Check(ctx, node.System{})
	printPreflight(pf)
	if install && len(pf.Missing) > 0 {
		if !pf.Installable {
			return fmt.Errorf("cannot install: %s", pf.Reason())
		}
		start := time.Now()
		if err := node.Install(ctx, os.Stdout, pf.Missing); err != nil {
			return err
		}
		fmt.Printf("install: %d packages in %s\n", len(pf.Missing), time.Since(start).Round(time.Second))
		pf = node.Check(ctx, node.System{})
		printPreflight(pf)
	}
	if !up {
		if !pf.OK() {
			return fmt.Errorf("a real node cannot run here: %s", pf.Reason())
		}
		return nil
	}
	return upRunDown(ctx, stateDir, keep)
}

func printPreflight(pf node.Preflight) {
	if pf.OK() {
		fmt.Println("preflight: a real node can run here")
	}
	for _, b := range pf.Blockers {
		fmt.Println("preflight: BLOCKED:", b)
	}
	for _, n := range pf.Notes {
		fmt.Println("preflight: note:", n)
	}
}

func upRunDown(ctx context.Context, stateDir string, keep bool) error {
	tmp, err := os.MkdirTemp("", "node-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Println("== host before")
	hostState()

	start := time.Now()
	pause, probe := images.Ref("pause", "check"), images.Ref("probe", "check")
	tars := map[string]string{}
	for _, im := range []struct{ ref, pkg string }{{pause, "./test/e2e/cmd/pause"}, {probe, "./test/e2e/cmd/probe"}} {
		bin := filepath.Join(tmp, filepath.Base(im.pkg))
		if err := images.GoBuild(ctx, ".", im.pkg, bin); err != nil {
			return err
		}
		tars[im.ref] = bin + ".tar"
		id, err := images.Write(images.Image{Binary: bin, Ref: im.ref}, tars[im.ref])
		if err != nil {
			return err
		}
		fi, _ := os.Stat(tars[im.ref])
		fmt.Printf("image %s: %s, %d bytes, config %s\n", im.ref, tars[im.ref], fi.Size(), id)
	}
	fmt.Printf("images built in %s\n", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	start = time.Now()
	h, err := node.Up(ctx, node.Options{StateDir: stateDir, PauseImage: pause, PauseTarball: tars[pause], Progress: os.Stdout})
	if err != nil {
		return err
	}
	fmt.Printf("bring-up (teardown first, baseline, guard check, guard, bridge, containerd, pause import): %s; guard check saw %+v\n", time.Since(start).Round(time.Millisecond), h.GuardProof)
	runErr := exercise(ctx, h, tars[probe], probe, pause)
	fmt.Println("== host while up")
	hostState()
	if keep && runErr == nil {
		fmt.Printf("left up; tear down with: go run ./test/e2e/cmd/node-check -teardown -state-dir %s\n", stateDir)
		return nil
	}
	start = time.Now()
	downErr := h.Down(context.WithoutCancel(ctx))
	fmt.Printf("teardown: %s\n", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	againErr := node.Teardown(context.WithoutCancel(ctx), stateDir, os.Stdout)
	fmt.Printf("teardown again (must be a no-op): %s, err=%v\n", time.Since(start).Round(time.Millisecond), againErr)
	fmt.Println("== host after")
	hostState()
	if runErr != nil {
		return runErr
	}
	if downErr != nil {
		return downErr
	}
	return againErr
}

func exercise(ctx context.Context, h *node.Host, probeTar, probe, pause string) error {
	if err := h.Import(ctx, probeTar); err != nil {
		return err
	}
	out, err := h.Ctr(ctx, "images", "list", "-q")
	fmt.Printf("$ ctr -n k8s.io images list -q\n%s", out)
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "ctr", "-a", h.Containerd.Socket, "-n", "k8s.io", "run", "--rm", "--fifo-dir", filepath.Join(h.WorkDir, "fifo"), probe, "node-check-probe")
	b, err := cmd.CombinedOutput()
	code := cmd.ProcessState.ExitCode()
	fmt.Printf("$ ctr run --rm %s node-check-probe   (%s, exit %d)\n%s", probe, time.Since(start).Round(time.Millisecond), code, b)
	if code != 3 || !strings.Contains(string(b), "ANTHROPIC_API_KEY") {
		return fmt.Errorf("ctr run %s: want the probe's usage line and exit 3, got exit %d: %v", probe, code, err)
	}
	start = time.Now()
	if _, err := h.Ctr(ctx, "run", "-d", "--fifo-dir", filepath.Join(h.WorkDir, "fifo"), pause, "node-check-pause"); err != nil {
		return err
	}
	out, _ = h.Ctr(ctx, "tasks", "list")
	fmt.Printf("$ ctr run -d %s node-check-pause; ctr tasks list\n%s", pause, out)
	if !strings.Contains(string(out), "RUNNING") {
		return fmt.Errorf("pause task not RUNNING")
	}
	if _, err := h.Ctr(ctx, "tasks", "kill", "-s", "SIGTERM", "node-check-pause"); err != nil {
		return err
	}
	for i := 0; ; i++ {
		out, _ = h.Ctr(ctx, "tasks", "list")
		if strings.Contains(string(out), "STOPPED") || i == 50 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Printf("$ ctr tasks kill -s SIGTERM node-check-pause; ctr tasks list   (%s)\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(string(out), "STOPPED") {
		return fmt.Errorf("pause did not stop on SIGTERM")
	}
	// Left for the teardown to delete (it must handle containers).
	return nil
}

func hostState() {
	for _, c := range [][]string{
		{"nft", "list", "tables"},
		{"ip", "-br", "link"},
		{"ip", "-br", "addr", "show", "dev", "cni0"},
		{"sysctl", "kernel.panic", "kernel.panic_on_oops", "vm.overcommit_memory", "net.ipv4.ip_forward"},
		{"sh", "-c", "ls -d /var/lib/kubelet /var/lib/cni /var/log/pods /run/containerd /opt/containerd /var/lib/custody-node /run/netns/* /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/*/kubepods 2>&1; pgrep -a containerd || true"},
	} {
		out, _ := exec.Command(c[0], c[1:]...).CombinedOutput()
		fmt.Printf("$ %s\n%s", strings.Join(c, " "), out)
	}
}
