// Package images builds container images for the local node without a
// registry or Docker: a static Go binary becomes a one-layer image written
// as a docker-archive tarball (`docker save` format), which
// `ctr -n k8s.io images import` loads into containerd. Pods then use the
// local reference with imagePullPolicy Never or IfNotPresent.
//
// # Format
//
// The image has one layer holding the binary at /<name> (mode 0755,
// owner root, mtime zero, so the same binary gives the same digest), a
// config for linux/GOARCH with Entrypoint [/<name>] and
// PATH=/, and RepoTags [ref]. References are local tags such as
// "custody.local/pause:v1" (Registry is the custody.local part); nothing
// is ever pulled from or pushed to a registry.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Registry is the host part of every local image reference. It does not
// resolve; containerd only matches it against imported images.
const Registry = "custody.local"

// Ref returns the local reference Registry/name:tag.
func Ref(name, tag string) string { return Registry + "/" + name + ":" + tag }

// Image describes a one-binary image.
type Image struct {
	// Binary is the path of a static executable (CGO_ENABLED=0).
	Binary string
	// Ref is the image reference, for example Ref("pause", "v1").
	Ref string
	// Args are appended to the entrypoint as Cmd. Optional.
	Args []string
	// Extra are more static executables, each at /<base name> in the same
	// layer (for a pod whose containers share one image). Optional.
	Extra []string
}

// Write builds img and writes it as a docker-archive tarball to out
// (created or replaced). It returns the image's config digest (the image
// ID containerd reports).
func Write(img Image, out string) (v1.Hash, error) {
	tag, err := name.NewTag(img.Ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("images: reference %q: %w", img.Ref, err)
	}
	base := filepath.Base(img.Binary)
	layerTar, err := filesTar(append([]string{img.Binary}, img.Extra...))
	if err != nil {
		return v1.Hash{}, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return v1.Hash{}, fmt.Errorf("images: layer: %w", err)
	}
	im, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("images: append layer: %w", err)
	}
	cf, err := im.ConfigFile()
	if err != nil {
		return v1.Hash{}, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = []string{"/" + base}
	cf.Config.Cmd = append([]string(nil), img.Args...)
	cf.Config.Env = []string{"PATH=/"}
	if im, err = mutate.ConfigFile(im, cf); err != nil {
		return v1.Hash{}, fmt.Errorf("images: config: %w", err)
	}
	tmp := out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, im); err != nil {
		os.Remove(tmp)
		return v1.Hash{}, fmt.Errorf("images: write %s: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return v1.Hash{}, err
	}
	return im.ConfigName()
}

// filesTar is a layer with each file at /<base name>, mode 0755, owner
// root, mtime zero. Two files with one base name are refused.
func filesTar(paths []string) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	seen := map[string]bool{}
	for _, p := range paths {
		name := filepath.Base(p)
		if seen[name] {
			return nil, fmt.Errorf("images: two files named %s", name)
		}
		seen[name] = true
		content, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("images: %w", err)
		}
		hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(content)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(content); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// GoBuild builds the main package pkg (an import path or ./dir, resolved
// in dir) as a static binary at out: CGO_ENABLED=0, -trimpath, stripped.
func GoBuild(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("images: go build %s: %w\n%s", pkg, err, b)
	}
	return nil
}
