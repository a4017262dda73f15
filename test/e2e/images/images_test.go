package images

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "agent")
	content := []byte("\x7fELF not really, but bytes are bytes")
	if err := os.WriteFile(bin, content, 0o600); err != nil {
		t.Fatal(err)
	}
	ref := Ref("agent", "v1")
	out := filepath.Join(dir, "agent.tar")
	id, err := Write(Image{Binary: bin, Ref: ref, Args: []string{"-x"}}, out)
	if err != nil {
		t.Fatal(err)
	}

	tag, _ := name.NewTag(ref)
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("the tarball does not hold %s: %v", ref, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH ||
		!slices.Equal(cf.Config.Entrypoint, []string{"/agent"}) || !slices.Equal(cf.Config.Cmd, []string{"-x"}) {
		t.Errorf("config = %s/%s entrypoint %q cmd %q; want linux/%s [/agent] [-x]", cf.OS, cf.Architecture, cf.Config.Entrypoint, cf.Config.Cmd, runtime.GOARCH)
	}
	if got, _ := img.ConfigName(); got != id {
		t.Errorf("Write() = %s, the tarball's config is %s", id, got)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers = %d, %v; want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(tr)
	if hdr.Name != "agent" || hdr.Mode != 0o755 || !bytes.Equal(got, content) {
		t.Errorf("layer entry = %q mode %o %q; want agent 0755 with the binary", hdr.Name, hdr.Mode, got)
	}
	if _, err := tr.Next(); err != io.EOF {
		t.Errorf("layer has more than the binary: %v", err)
	}

	// The same binary gives the same image (no timestamps).
	id2, err := Write(Image{Binary: bin, Ref: ref, Args: []string{"-x"}}, filepath.Join(dir, "again.tar"))
	if err != nil || id2 != id {
		t.Errorf("Write() again = %s, %v; want %s", id2, err, id)
	}
}

func TestWriteRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	if _, err := Write(Image{Binary: filepath.Join(dir, "missing"), Ref: Ref("x", "v1")}, filepath.Join(dir, "x.tar")); err == nil {
		t.Error("Write(missing binary) = nil error")
	}
	bin := filepath.Join(dir, "b")
	os.WriteFile(bin, []byte("x"), 0o600)
	if _, err := Write(Image{Binary: bin, Ref: "Not A Ref"}, filepath.Join(dir, "y.tar")); err == nil {
		t.Error("Write(bad reference) = nil error")
	}
}
