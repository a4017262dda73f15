package node

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

// ContainerdPaths are containerd's directories and socket, all under one
// work dir so that nothing lands in /var/lib/containerd or /opt.
type ContainerdPaths struct {
	Root, State, Socket, Opt, CNIConf string
}

func containerdPaths(workDir string) ContainerdPaths {
	d := filepath.Join(workDir, "containerd")
	return ContainerdPaths{
		Root: filepath.Join(d, "root"), State: filepath.Join(d, "state"),
		Socket: filepath.Join(d, "containerd.sock"), Opt: filepath.Join(d, "opt"),
		CNIConf: filepath.Join(workDir, "cni", "net.d"),
	}
}

var containerdTmpl = template.Must(template.New("containerd").Parse(`version = 2
root = "{{.Root}}"
state = "{{.State}}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "{{.Socket}}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{{.Opt}}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{.PauseImage}}"
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{{.CNIConf}}"
    max_conf_num = 1
`))

// ContainerdConfig renders containerd 1.6's config (version 2): root,
// state, socket and opt under the work dir; the CRI sandbox (pause) image
// pauseImage, which must already be imported since nothing is pulled;
// restrict_oom_score_adj = true (root here lacks CAP_SYS_RESOURCE, and
// runc then fails every pod sandbox asked for a negative score); runc
// with cgroupfs (SystemdCgroup = false, as the kubelet's cgroupDriver);
// CNI from /usr/lib/cni and p.CNIConf.
func ContainerdConfig(p ContainerdPaths, pauseImage string) (string, error) {
	for _, v := range []string{p.Root, p.State, p.Socket, p.Opt, p.CNIConf, pauseImage} {
		if v == "" || strings.ContainsAny(v, "\"\\\n") {
			return "", fmt.Errorf("node: containerd config: bad value %q", v)
		}
	}
	var b bytes.Buffer
	err := containerdTmpl.Execute(&b, struct {
		ContainerdPaths
		PauseImage string
	}{p, pauseImage})
	return b.String(), err
}

// run runs a command, returning its standard output; the error carries
// its standard error.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return runIn(ctx, "", name, args...)
}

func runIn(ctx context.Context, stdin, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}

// Ctr runs `ctr -a <socket> -n k8s.io args...` against this node's
// containerd (the namespace the kubelet's CRI uses) and returns its
// standard output.
func (h *Host) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	return run(ctx, "ctr", append([]string{"-a", h.Containerd.Socket, "-n", "k8s.io"}, args...)...)
}

// Import imports an image tarball (docker-archive, as test/e2e/images
// writes) into containerd's k8s.io namespace, where the kubelet finds it
// with imagePullPolicy Never or IfNotPresent.
func (h *Host) Import(ctx context.Context, tarball string) error {
	if _, err := h.Ctr(ctx, "images", "import", tarball); err != nil {
		return fmt.Errorf("node: import %s: %w", filepath.Base(tarball), err)
	}
	return nil
}

// waitContainerd polls `ctr version` until containerd answers on its
// socket, failing early if the process exits.
func (h *Host) waitContainerd(ctx context.Context, cmd *exec.Cmd, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := run(ctx, "ctr", "-a", h.Containerd.Socket, "version"); err == nil {
			return nil
		}
		if procStart(cmd.Process.Pid) == "" {
			return fmt.Errorf("node: containerd exited: %s", h.Logs("containerd", 2000))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node: containerd not answering on %s after %s: %s", h.Containerd.Socket, timeout, h.Logs("containerd", 2000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
