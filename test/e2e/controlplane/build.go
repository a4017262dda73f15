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
	if progress == nil {
		progress = io.Discard
	}
	toolsDir, err := ToolsDir()
	if err != nil {
		return nil, err
	}
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	key, err := buildKey(ctx, toolsDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cache, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	bins := Binaries{}
	for i, t := range Tools {
		out := filepath.Join(dir, t.Name)
		bins[t.Name] = out
		if _, err := os.Stat(out); err == nil {
			fmt.Fprintf(progress, "[%d/%d] %s: cached\n", i+1, len(Tools), t.Name)
			continue
		}
		fmt.Fprintf(progress, "[%d/%d] %s: building %s (%s the first time)\n", i+1, len(Tools), t.Name, t.Package, t.Hint)
		start := time.Now()
		if err := buildOne(ctx, toolsDir, t, out, progress); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "[%d/%d] %s: built in %s\n", i+1, len(Tools), t.Name, time.Since(start).Round(time.Second))
	}
	return bins, nil
}

func buildOne(ctx context.Context, toolsDir string, t Tool, out string, progress io.Writer) error {
	tmp := out + ".tmp"
	cmd := exec.CommandContext(ctx, "go", "build", "-o", tmp, t.Package)
	cmd.Dir = toolsDir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("controlplane: build %s: %w", t.Name, err)
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
				os.Remove(tmp)
				return fmt.Errorf("controlplane: build %s: %w\n%s", t.Name, err, stderr.String())
			}
			return os.Rename(tmp, out)
		case <-tick.C:
			fmt.Fprintf(progress, "      %s: still building (%s)\n", t.Name, time.Since(start).Round(time.Second))
		}
	}
}

func buildKey(ctx context.Context, toolsDir string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(toolsDir, f))
		if err != nil {
			return "", fmt.Errorf("controlplane: %w", err)
		}
		h.Write(b)
	}
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
