package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// These tests build nothing: the real builds take minutes (make
// node-binaries builds and smoke-checks them).

func TestRunSteps(t *testing.T) {
	dir := t.TempDir()
	cached := filepath.Join(dir, "cached")
	if err := os.WriteFile(cached, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	var built, checked []string
	write := func(ctx context.Context, tmp string, progress io.Writer) error {
		built = append(built, filepath.Base(tmp))
		return os.WriteFile(tmp, []byte("new"), 0o755)
	}
	accept := func(ctx context.Context, bin string) error {
		checked = append(checked, filepath.Base(bin))
		return nil
	}
	steps := []buildStep{
		{name: "a", source: "pkg/a", hint: "a moment", out: cached, build: write, check: accept},
		{name: "b", source: "pkg/b", hint: "a while", out: filepath.Join(dir, "new", "fresh"), build: write, check: accept},
	}
	var progress bytes.Buffer
	bins, err := runSteps(context.Background(), steps, &progress)
	if err != nil {
		t.Fatalf("runSteps = %v", err)
	}
	if want := (Binaries{"a": cached, "b": filepath.Join(dir, "new", "fresh")}); !maps.Equal(bins, want) {
		t.Errorf("runSteps = %v, want %v", bins, want)
	}
	tmp := fmt.Sprintf("fresh.tmp%d", os.Getpid())
	if want := []string{tmp}; !slices.Equal(built, want) {
		t.Errorf("built %v, want %v (the cached one is not rebuilt)", built, want)
	}
	if want := []string{"cached", tmp}; !slices.Equal(checked, want) {
		t.Errorf("checked %v, want %v (the cached one and the new one before it enters the cache)", checked, want)
	}
	for _, line := range []string{"[1/2] a: cached\n", "[2/2] b: building pkg/b (a while the first time)\n", "[2/2] b: built in "} {
		if !strings.Contains(progress.String(), line) {
			t.Errorf("progress = %q, want a line %q", progress.String(), line)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "new", "fresh")); err != nil || string(b) != "new" {
		t.Errorf("fresh binary = %q, %v; want it renamed into the cache", b, err)
	}
}

func TestRunStepsRefusesWhatFailsItsCheck(t *testing.T) {
	dir := t.TempDir()
	refuse := func(ctx context.Context, bin string) error { return errSmokeCheck }
	write := func(ctx context.Context, tmp string, progress io.Writer) error {
		return os.WriteFile(tmp, []byte("bad"), 0o755)
	}
	fresh := filepath.Join(dir, "fresh")
	_, err := runSteps(context.Background(), []buildStep{{name: "b", out: fresh, build: write, check: refuse}}, nil)
	if !errors.Is(err, errSmokeCheck) {
		t.Fatalf("runSteps(new binary failing its check) = %v, want errSmokeCheck", err)
	}
	for _, p := range []string{fresh, fmt.Sprintf("%s.tmp%d", fresh, os.Getpid())} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind (stat: %v); a binary failing its check must not enter the cache", filepath.Base(p), err)
		}
	}

	cached := filepath.Join(dir, "cached")
	if err := os.WriteFile(cached, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = runSteps(context.Background(), []buildStep{{name: "a", out: cached, build: write, check: refuse}}, nil)
	if !errors.Is(err, errSmokeCheck) {
		t.Fatalf("runSteps(cached binary failing its check) = %v, want errSmokeCheck", err)
	}
}

// The control plane's cache key is what it was before the node builds
// shared its code: SHA-256 of go.mod, go.sum and the Go version.
func TestBuildKeyKeepsTheControlPlaneKey(t *testing.T) {
	dir := t.TempDir()
	mod, sum := filepath.Join(dir, "go.mod"), filepath.Join(dir, "go.sum")
	os.WriteFile(mod, []byte("module x\n"), 0o644)
	os.WriteFile(sum, []byte("x v1 h1:abc\n"), 0o644)
	v, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimSpace(string(v))
	h := sha256.Sum256([]byte("module x\nx v1 h1:abc\n" + version))
	want := version + "-" + hex.EncodeToString(h[:])[:16]
	if got, err := buildKey(context.Background(), "", mod, sum); err != nil || got != want {
		t.Errorf("buildKey(go.mod, go.sum) = %q, %v; want %q", got, err, want)
	}
	if got, _ := buildKey(context.Background(), "pin", mod, sum); got == want {
		t.Errorf("buildKey with a pin = %q, the same as without", got)
	}
}

// tools/coredns/main.go imports exactly the plugins CoreDNSPlugins names,
// and no forward.
func TestCoreDNSModuleImportsTheListedPlugins(t *testing.T) {
	toolsDir, err := ToolsDir()
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(toolsDir, "coredns", "main.go"), nil, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		if name, ok := strings.CutPrefix(p, "github.com/coredns/coredns/plugin/"); ok {
			got = append(got, name)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, CoreDNSPlugins) {
		t.Errorf("tools/coredns/main.go imports plugins %v, want %v", got, CoreDNSPlugins)
	}
}

// knpHelpOutput is part of what the patched kube-network-policies prints
// (to stderr) for -h.
const knpHelpOutput = `Usage: kube-network-policies [options]

  -hostname-override string
    	If non-empty, will be used as the name of the Node that kube-network-policies is running on.
  -kubeconfig string
    	Path to a kubeconfig file; if empty, the in-cluster config is used
  -nfqueue-compat
    	If set, send packets to the nfqueue with the xtables NFQUEUE target through nft_compat instead of the nft queue expression (for kernels without CONFIG_NFT_QUEUE)
  -nfqueue-id int
    	Number of the nfqueue used (default 100)
`

func TestCheckStaticRefusesADynamicBinary(t *testing.T) {
	if err := checkStatic("/bin/sh"); !errors.Is(err, errSmokeCheck) {
		t.Errorf("checkStatic(/bin/sh) = %v, want errSmokeCheck (it has a program interpreter)", err)
	}
	if err := checkStatic(filepath.Join(t.TempDir(), "none")); !errors.Is(err, errSmokeCheck) {
		t.Errorf("checkStatic(missing file) = %v, want errSmokeCheck", err)
	}
}

// corednsPluginsOutput is what the built coredns prints for -plugins.
const corednsPluginsOutput = "cache\nerrors\nhealth\nkubernetes\nlog\nmetadata\nprometheus\nready\ntransfer\n\n"

func TestSmokeChecks(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ctx := context.Background()
	tests := []struct {
		name  string
		check func(context.Context, string) error
		body  string
		ok    bool
	}{
		{"kubelet", checkKubernetesVersion, "echo Kubernetes v0.0.0-master\n", true},
		{"kubelet-fails", checkKubernetesVersion, "echo Kubernetes v1; exit 1\n", false},
		{"kubelet-other", checkKubernetesVersion, "echo hello\n", false},
		{"coredns", checkCoreDNSPlugins, "cat <<'X'\n" + corednsPluginsOutput + "X\n", true},
		{"coredns-forward", checkCoreDNSPlugins, "cat <<'X'\nforward\n" + corednsPluginsOutput + "X\n", false},
		{"coredns-missing", checkCoreDNSPlugins, "cat <<'X'\n" + strings.Replace(corednsPluginsOutput, "cache\n", "", 1) + "X\n", false},
		{"knp", checkKNPHelp, "cat >&2 <<'X'\n" + knpHelpOutput + "X\nexit 0\n", true},
		{"knp-unpatched", checkKNPHelp, "cat >&2 <<'X'\n" + strings.ReplaceAll(knpHelpOutput, "-kubeconfig", "-other") + "X\n", false},
		{"knp-only-in-text", checkKNPHelp, "cat >&2 <<'X'\nUsage: -kubeconfig -nfqueue-compat\nX\n", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.check(ctx, script(tc.name, tc.body))
			if tc.ok && err != nil {
				t.Errorf("check = %v, want nil", err)
			}
			if !tc.ok && !errors.Is(err, errSmokeCheck) {
				t.Errorf("check = %v, want errSmokeCheck", err)
			}
		})
	}
}
