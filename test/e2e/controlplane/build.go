package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Tool is one control-plane binary built from tools/go.mod.
type Tool struct {
	// Name is the binary's file name.
	Name string
	// Package is the Go package path of its main package.
	Package string
	// Hint tells the user how long a first build takes.
	Hint string
}

// Tools are the binaries the harness builds, in build order.
var Tools = []Tool{
	{Name: "etcd", Package: "go.etcd.io/etcd/server/v3", Hint: "about 1 min"},
	{Name: "kube-apiserver", Package: "k8s.io/kubernetes/cmd/kube-apiserver", Hint: "about 9 min on 2 cores"},
	{Name: "kube-controller-manager", Package: "k8s.io/kubernetes/cmd/kube-controller-manager", Hint: "about 5 min on 2 cores"},
	{Name: "agent-sandbox-controller", Package: "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller", Hint: "about 2 min"},
	{Name: "sandboxd", Package: "sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd", Hint: "under 1 min"},
}

// Binaries maps a tool name to the path of its built binary.
type Binaries map[string]string

// ToolsDir finds the tools module (tools/go.mod) by walking up from the
// working directory.
func ToolsDir() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "tools", "go.mod")); err == nil {
			return filepath.Join(dir, "tools"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("controlplane: tools/go.mod not found above the working directory")
		}
		dir = parent
	}
}

// CacheDir is where built binaries are kept: $CUSTODY_CACHE_DIR, or
// <user cache dir>/custody/controlplane.
func CacheDir() (string, error) {
	if d := os.Getenv("CUSTODY_CACHE_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "custody", "controlplane"), nil
}

// Build builds every tool that is not already in the cache, writing one
// progress line per tool (and one every 30 s while a build runs) to
// progress. The cache directory is keyed by the SHA-256 of tools/go.mod,
// tools/go.sum and the Go version, so a version bump builds afresh. A nil
// progress writer discards progress.
func Build(ctx context.Context, progress io.Writer) (Binaries, error) {
	toolsDir, err := ToolsDir()
	if err != nil {
		return nil, err
	}
	dir, err := toolsCacheDir(ctx, toolsDir)
	if err != nil {
		return nil, err
	}
	steps := make([]buildStep, len(Tools))
	for i, t := range Tools {
		steps[i] = buildStep{name: t.Name, source: t.Package, hint: t.Hint, out: filepath.Join(dir, t.Name),
			build: func(ctx context.Context, tmp string, progress io.Writer) error {
				return goBuild(ctx, toolsDir, t.Name, nil, progress, "-o", tmp, t.Package)
			}}
	}
	return runSteps(ctx, steps, progress)
}

// toolsCacheDir returns (and creates) the cache directory of binaries built
// from the tools module: <CacheDir>/<go version>-<key of tools/go.mod and
// tools/go.sum>.
func toolsCacheDir(ctx context.Context, toolsDir string) (string, error) {
	cache, err := CacheDir()
	if err != nil {
		return "", err
	}
	key, err := buildKey(ctx, "", filepath.Join(toolsDir, "go.mod"), filepath.Join(toolsDir, "go.sum"))
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, key)
	return dir, os.MkdirAll(dir, 0o755)
}

// buildStep is one binary to build into the cache.
type buildStep struct {
	name, source, hint string
	// out is the binary's path in the cache; a file there counts as built.
	out string
	// build writes the binary to tmp (renamed to out when it succeeds).
	build func(ctx context.Context, tmp string, progress io.Writer) error
	// check, if set, must accept the built binary before it enters the
	// cache, and a cached one before it is returned.
	check func(ctx context.Context, bin string) error
}

// runSteps builds each step whose binary is not cached, in order, with one
// "[i/n] name: ..." progress line per step, and returns name -> path.
func runSteps(ctx context.Context, steps []buildStep, progress io.Writer) (Binaries, error) {
	if progress == nil {
		progress = io.Discard
	}
	bins := Binaries{}
	for i, s := range steps {
		bins[s.name] = s.out
		if _, err := os.Stat(s.out); err == nil {
			if s.check != nil {
				if err := s.check(ctx, s.out); err != nil {
					return nil, fmt.Errorf("controlplane: cached %s (%s): %w", s.name, s.out, err)
				}
			}
			fmt.Fprintf(progress, "[%d/%d] %s: cached\n", i+1, len(steps), s.name)
			continue
		}
		fmt.Fprintf(progress, "[%d/%d] %s: building %s (%s the first time)\n", i+1, len(steps), s.name, s.source, s.hint)
		start := time.Now()
		// Per process: two builds racing (make test and make demo, say)
		// must not rename or remove each other's half-built binary.
		tmp := fmt.Sprintf("%s.tmp%d", s.out, os.Getpid())
		err := os.MkdirAll(filepath.Dir(s.out), 0o755)
		if err == nil {
			err = s.build(ctx, tmp, progress)
		}
		if err == nil && s.check != nil {
			if err = s.check(ctx, tmp); err != nil {
				err = fmt.Errorf("controlplane: built %s: %w", s.name, err)
			}
		}
		if err == nil {
			err = os.Rename(tmp, s.out)
		}
		if err != nil {
			os.Remove(tmp)
			return nil, err
		}
		fmt.Fprintf(progress, "[%d/%d] %s: built in %s\n", i+1, len(steps), s.name, time.Since(start).Round(time.Second))
	}
	return bins, nil
}

// goBuild runs `go <args>` (a go build) in dir with GOWORK=off and env
// added, writing "still building" to progress every 30 s.
func goBuild(ctx context.Context, dir, name string, env []string, progress io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", append([]string{"build"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("controlplane: build %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("controlplane: build %s: %w\n%s", name, err, stderr.String())
			}
			return nil
		case <-tick.C:
			fmt.Fprintf(progress, "      %s: still building (%s)\n", name, time.Since(start).Round(time.Second))
		}
	}
}

// buildKey is "<go version>-<first 16 hex digits of SHA-256>" over the
// contents of files, in order, then pin, then the Go version.
func buildKey(ctx context.Context, pin string, files ...string) (string, error) {
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("controlplane: %w", err)
		}
		h.Write(b)
	}
	h.Write([]byte(pin))
	v, err := exec.CommandContext(ctx, "go", "env", "GOVERSION").Output()
	if err != nil {
		return "", fmt.Errorf("controlplane: go env GOVERSION: %w", err)
	}
	h.Write(bytes.TrimSpace(v))
	return strings.TrimSpace(string(v)) + "-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// ModuleDir returns the directory of module path in the module cache, as
// the tools module resolves it (for example the agent-sandbox CRDs).
func ModuleDir(ctx context.Context, path string) (string, error) {
	toolsDir, err := ToolsDir()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", path)
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("controlplane: locate module %s: %w", path, err)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		// Not downloaded yet: download it.
		dl := exec.CommandContext(ctx, "go", "mod", "download", path)
		dl.Dir = toolsDir
		if err := dl.Run(); err != nil {
			return "", fmt.Errorf("controlplane: download %s: %w", path, err)
		}
		return ModuleDir(ctx, path)
	}
	return dir, nil
}
