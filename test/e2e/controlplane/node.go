package controlplane

// The real node's binaries: what BuildNode builds and how.
//
// kubelet, kube-proxy and kube-scheduler are tools of tools/go.mod, the
// control plane's module, at the same Kubernetes version; they share its
// cache directory and most of its compiled packages.
//
// CoreDNS is the module tools/coredns (its own go.mod and go.sum, a
// main.go that imports a trimmed plugin set without `forward`), built with
// CGO_ENABLED=0 because it runs as a one-layer image.
//
// The NetworkPolicy agent is sigs.k8s.io/kube-network-policies at
// [knpVersion] (Apache-2.0) with our patch tools/knp/compat-queue.patch.
// It is built from a patched copy of the module, not through a wrapper
// module of our own: the change is inside its rule building (unexported
// code in pkg/networkpolicy that emits nft's native `queue` expression,
// which this kind of kernel rejects for want of CONFIG_NFT_QUEUE; the
// patch adds --nfqueue-compat to emit the xtables NFQUEUE target through
// nft_compat instead) and in its main (in-cluster config only; the patch
// adds --kubeconfig). A wrapper could reach neither without copying
// upstream code into this repository. So BuildNode downloads the module
// with the go command (checked against the Go checksum database and
// against [knpSum]), copies it out of the read-only module cache, applies
// the patch with `git apply` (which refuses a patch that does not apply
// exactly), and builds ./cmd with the module's own go.mod and go.sum
// (-mod=readonly). Only our patch is in this repository; the patched copy
// lives in the cache only while it builds.

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The node binaries' names, the keys of the map BuildNode returns.
const (
	Kubelet       = "kubelet"
	KubeProxy     = "kube-proxy"
	KubeScheduler = "kube-scheduler"
	CoreDNS       = "coredns"
	// NetworkPolicyAgent is the patched kube-network-policies. Run it with
	// --kubeconfig=<admin kubeconfig> --nfqueue-compat on kernels without
	// CONFIG_NFT_QUEUE; it removes its nft table only on SIGINT.
	NetworkPolicyAgent = "kube-network-policies"
)

// CoreDNSPlugins are the CoreDNS plugins tools/coredns builds in: the only
// Corefile directives it accepts (any other, forward included, is an
// "Unknown directive" error).
var CoreDNSPlugins = []string{"cache", "errors", "health", "kubernetes", "log", "ready"}

// corednsLinked are plugins the kubernetes plugin links in (its metrics,
// metadata and zone transfer hooks). They register but are no directives,
// so a Corefile cannot turn them on. BuildNode refuses a coredns binary
// whose `-plugins` list is not exactly CoreDNSPlugins and these.
var corednsLinked = []string{"metadata", "prometheus", "transfer"}

const (
	knpModule  = "sigs.k8s.io/kube-network-policies"
	knpVersion = "v0.8.0"
	// knpSum is the module's go.sum hash (h1:, from sum.golang.org).
	knpSum = "h1:dzecRNzdmg+VmHEQWTIjxnCgf412J+8CKHqbKgCiWkk="
	// knpPatch is our patch, relative to the tools directory.
	knpPatch = "knp/compat-queue.patch"
)

// BuildNode builds every node binary that is not already in the cache —
// kubelet, kube-proxy, kube-scheduler, coredns, kube-network-policies, in
// that order — and returns name -> path (keys: the constants [Kubelet],
// [KubeProxy], [KubeScheduler], [CoreDNS], [NetworkPolicyAgent]). It
// writes progress lines as [Build] does ("[i/5] kubelet: building ...",
// "still building (30s)" every 30 s, "cached") to progress; nil discards
// them.
//
// Cache directories under [CacheDir], each "<go version>-<key>":
//   - kubelet, kube-proxy, kube-scheduler: the control plane's own
//     directory (key of tools/go.mod and tools/go.sum);
//   - coredns: coredns/<key of tools/coredns/{go.mod,go.sum,main.go}>;
//   - kube-network-policies: kube-network-policies/<key of the module
//     version, its go.sum hash and tools/knp/compat-queue.patch>.
//
// Each binary is smoke-checked, once built and again whenever it is taken
// from the cache (0.2 s for all five): the Kubernetes ones print
// "Kubernetes ..." for --version; coredns is statically linked and its
// -plugins lists exactly [CoreDNSPlugins] and the three plugins the
// kubernetes plugin links in (metadata, prometheus, transfer; no
// directives); kube-network-policies' -h offers --kubeconfig and
// --nfqueue-compat. A binary that fails its check is an error and never
// enters the cache. None is started as a service.
func BuildNode(ctx context.Context, progress io.Writer) (Binaries, error) {
	toolsDir, err := ToolsDir()
	if err != nil {
		return nil, err
	}
	steps, err := nodeSteps(ctx, toolsDir)
	if err != nil {
		return nil, err
	}
	return runSteps(ctx, steps, progress)
}

func nodeSteps(ctx context.Context, toolsDir string) ([]buildStep, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	k8sDir, err := toolsCacheDir(ctx, toolsDir)
	if err != nil {
		return nil, err
	}
	var steps []buildStep
	for _, t := range []struct{ name, hint string }{
		{Kubelet, "about 7 min on 2 cores"},
		{KubeProxy, "under 1 min"},
		{KubeScheduler, "under 1 min"},
	} {
		pkg := "k8s.io/kubernetes/cmd/" + t.name
		steps = append(steps, buildStep{name: t.name, source: pkg, hint: t.hint, out: filepath.Join(k8sDir, t.name),
			build: func(ctx context.Context, tmp string, progress io.Writer) error {
				return goBuild(ctx, toolsDir, t.name, nil, progress, "-o", tmp, pkg)
			},
			check: checkKubernetesVersion,
		})
	}

	corednsDir := filepath.Join(toolsDir, "coredns")
	key, err := buildKey(ctx, "", filepath.Join(corednsDir, "go.mod"), filepath.Join(corednsDir, "go.sum"), filepath.Join(corednsDir, "main.go"))
	if err != nil {
		return nil, err
	}
	steps = append(steps, buildStep{name: CoreDNS, source: "tools/coredns (github.com/coredns/coredns, trimmed plugins)", hint: "about 2 min on 2 cores",
		out: filepath.Join(cache, CoreDNS, key, CoreDNS),
		build: func(ctx context.Context, tmp string, progress io.Writer) error {
			return goBuild(ctx, corednsDir, CoreDNS, []string{"CGO_ENABLED=0"}, progress, "-mod=readonly", "-ldflags=-s -w", "-o", tmp, ".")
		},
		check: func(ctx context.Context, bin string) error {
			if err := checkStatic(bin); err != nil {
				return err
			}
			return checkCoreDNSPlugins(ctx, bin)
		},
	})

	patch := filepath.Join(toolsDir, knpPatch)
	key, err = buildKey(ctx, knpModule+" "+knpVersion+" "+knpSum, patch)
	if err != nil {
		return nil, err
	}
	knpOut := filepath.Join(cache, NetworkPolicyAgent, key, NetworkPolicyAgent)
	steps = append(steps, buildStep{name: NetworkPolicyAgent, source: knpModule + "@" + knpVersion + " + " + knpPatch, hint: "about 3 min on 2 cores",
		out: knpOut,
		build: func(ctx context.Context, tmp string, progress io.Writer) error {
			return buildKNP(ctx, patch, filepath.Dir(knpOut), tmp, progress)
		},
		check: checkKNPHelp,
	})
	return steps, nil
}

// buildKNP downloads kube-network-policies, copies it to a new directory
// work/src-*, applies our patch and builds ./cmd to out. The copy is
// removed afterwards.
func buildKNP(ctx context.Context, patch, work, out string, progress io.Writer) error {
	dl := exec.CommandContext(ctx, "go", "mod", "download", "-json", knpModule+"@"+knpVersion)
	dl.Dir = work
	dl.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	raw, err := dl.Output()
	if err != nil {
		// The go command reports a failed download in the JSON's Error.
		return fmt.Errorf("controlplane: download %s@%s: %w\n%s", knpModule, knpVersion, err, raw)
	}
	var mod struct{ Dir, Sum, Error string }
	if err := json.Unmarshal(raw, &mod); err != nil {
		return fmt.Errorf("controlplane: download %s@%s: %w", knpModule, knpVersion, err)
	}
	if mod.Error != "" || mod.Dir == "" {
		return fmt.Errorf("controlplane: download %s@%s: %s", knpModule, knpVersion, mod.Error)
	}
	if mod.Sum != knpSum {
		return fmt.Errorf("controlplane: %s@%s has hash %s, pinned %s", knpModule, knpVersion, mod.Sum, knpSum)
	}
	src, err := os.MkdirTemp(work, "src-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	if err := copyTree(mod.Dir, src); err != nil {
		return fmt.Errorf("controlplane: copy %s: %w", knpModule, err)
	}
	ap := exec.CommandContext(ctx, "git", "apply", "-p1", "--whitespace=nowarn", patch)
	ap.Dir = src
	// Keep git from finding a repository above the copy.
	ap.Env = append(os.Environ(), "GIT_CEILING_DIRECTORIES="+work)
	if b, err := ap.CombinedOutput(); err != nil {
		return fmt.Errorf("controlplane: apply %s: %w\n%s", patch, err, b)
	}
	return goBuild(ctx, src, NetworkPolicyAgent, []string{"GOFLAGS=-mod=readonly -buildvcs=false"}, progress, "-o", out, "./cmd")
}

// copyTree copies the regular files and directories under from to to,
// writable by the owner (the module cache is read-only).
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}

// errSmokeCheck marks a binary that did not pass its smoke check.
var errSmokeCheck = errors.New("smoke check failed")

func runBinary(ctx context.Context, bin string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// checkKubernetesVersion runs bin --version, which must print
// "Kubernetes <version>".
func checkKubernetesVersion(ctx context.Context, bin string) error {
	out, err := runBinary(ctx, bin, "--version")
	if err != nil || !strings.HasPrefix(out, "Kubernetes ") {
		return fmt.Errorf("%w: %s --version: %v: %q", errSmokeCheck, filepath.Base(bin), err, out)
	}
	return nil
}

// checkStatic accepts an ELF binary with no program interpreter, that is
// one statically linked (it runs in an image with nothing else in it).
func checkStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("%w: %v", errSmokeCheck, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s is dynamically linked", errSmokeCheck, filepath.Base(bin))
		}
	}
	return nil
}

// checkCoreDNSPlugins runs coredns -plugins, which must list exactly
// CoreDNSPlugins and corednsLinked.
func checkCoreDNSPlugins(ctx context.Context, bin string) error {
	out, err := runBinary(ctx, bin, "-plugins")
	if err != nil {
		return fmt.Errorf("%w: coredns -plugins: %v: %q", errSmokeCheck, err, out)
	}
	want := slices.Sorted(slices.Values(slices.Concat(CoreDNSPlugins, corednsLinked)))
	if got := corednsPlugins(out); !slices.Equal(got, want) {
		return fmt.Errorf("%w: coredns -plugins = %v, want %v", errSmokeCheck, got, want)
	}
	return nil
}

// corednsPlugins returns the sorted plugin names in the output of
// coredns -plugins (CoreDNS 1.15: one name a line).
func corednsPlugins(out string) []string {
	var names []string
	for _, line := range strings.Split(out, "\n") {
		if name := strings.TrimSpace(line); name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// checkKNPHelp runs kube-network-policies -h, whose usage must offer our
// patch's flags.
func checkKNPHelp(ctx context.Context, bin string) error {
	out, _ := runBinary(ctx, bin, "-h")
	offered := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			offered[f[0]] = true
		}
	}
	for _, f := range []string{"-kubeconfig", "-nfqueue-compat"} {
		if !offered[f] {
			return fmt.Errorf("%w: kube-network-policies -h does not offer %s: %q", errSmokeCheck, f, out)
		}
	}
	return nil
}
