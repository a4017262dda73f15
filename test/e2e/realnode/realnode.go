package realnode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/images"
	"github.com/agentcustody/custody/test/e2e/node"
)

// Options configure [Start].
type Options struct {
	// ModuleDir is the root of this Go module, where the pause and netprobe
	// images are built from. Default ".".
	ModuleDir string
	// StateDir is node.Options.StateDir. Default node.DefaultStateDir.
	StateDir string
	// ControlPlaneDir is controlplane.Options.Dir (certificates, etcd
	// data, component logs, admin.kubeconfig). Default: a new temporary
	// directory.
	ControlPlaneDir string
	// Progress receives one line per step. Default io.Discard.
	Progress io.Writer
}

// Images are the local references [Start] builds and imports.
var (
	PauseImage    = images.Ref("pause", "v1")
	NetprobeImage = images.Ref("netprobe", "v1")
	CoreDNSImage  = images.Ref("coredns", "v1")
)

// Cluster is a running control plane plus one real, Ready node.
type Cluster struct {
	Host *node.Host
	CP   *controlplane.ControlPlane
	// Times of the bring-up: clean state to Node Ready (the node's
	// teardown-first included, image builds excluded), and Ready to DNS
	// answering through the kube-dns Service.
	NodeReady, DNSReady time.Duration
	progress            io.Writer
}

// Start brings the node up as the package doc says. On error everything
// it started is stopped and the host torn down.
func Start(ctx context.Context, opts Options) (_ *Cluster, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.ModuleDir == "" {
		opts.ModuleDir = "."
	}
	if opts.StateDir == "" {
		opts.StateDir = node.DefaultStateDir
	}
	step := func(s string, a ...any) { fmt.Fprintf(opts.Progress, "realnode: "+s+"\n", a...) }
	tmp, err := os.MkdirTemp("", "custody-realnode-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	tars := map[string]string{}
	for ref, pkg := range map[string]string{PauseImage: "./test/e2e/cmd/pause", NetprobeImage: "./test/e2e/cmd/netprobe"} {
		bin := filepath.Join(tmp, filepath.Base(pkg))
		if err := images.GoBuild(ctx, opts.ModuleDir, pkg, bin); err != nil {
			return nil, err
		}
		tars[ref] = bin + ".tar"
		if _, err := images.Write(images.Image{Binary: bin, Ref: ref}, tars[ref]); err != nil {
			return nil, err
		}
	}
	bins, err := controlplane.BuildNode(ctx, opts.Progress)
	if err != nil {
		return nil, err
	}
	tars[CoreDNSImage] = filepath.Join(tmp, "coredns.tar")
	if _, err := images.Write(images.Image{Binary: bins[controlplane.CoreDNS], Ref: CoreDNSImage}, tars[CoreDNSImage]); err != nil {
		return nil, err
	}
	step("images built: %s %s %s", PauseImage, NetprobeImage, CoreDNSImage)

	start := time.Now()
	h, err := node.Up(ctx, node.Options{StateDir: opts.StateDir, PauseImage: PauseImage, PauseTarball: tars[PauseImage], Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	c := &Cluster{Host: h, progress: opts.Progress}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Stop(context.WithoutCancel(ctx)))
		}
	}()
	for _, ref := range []string{NetprobeImage, CoreDNSImage} {
		if err := h.Import(ctx, tars[ref]); err != nil {
			return nil, err
		}
	}
	c.CP, err = controlplane.Start(ctx, controlplane.Options{Dir: opts.ControlPlaneDir, RealNodes: true, Progress: opts.Progress})
	if err != nil {
		return nil, err
	}
	if err := c.CP.ServePodAPI(ctx, node.BridgeIP+":"+PodAPIPort); err != nil {
		return nil, err
	}
	if err := c.spawnNode(bins); err != nil {
		return nil, err
	}
	if err := c.waitNodeReady(ctx, 90*time.Second); err != nil {
		return nil, err
	}
	c.NodeReady = time.Since(start)
	step("node %s Ready %s after the clean start", NodeName, c.NodeReady.Round(time.Millisecond))
	if err := c.forwardAPIFromPod(ctx); err != nil {
		return nil, err
	}
	start = time.Now()
	if err := c.startDNS(ctx); err != nil {
		return nil, err
	}
	c.DNSReady = time.Since(start)
	step("DNS answers through %s after %s", DNSServiceIP, c.DNSReady.Round(time.Millisecond))
	if _, err := h.Spawn("kube-network-policies", syscall.SIGINT, nil, bins[controlplane.NetworkPolicyAgent],
		"--kubeconfig="+c.CP.Kubeconfig, "--hostname-override="+NodeName, "--nfqueue-compat", "--disable-nri",
		"--netfilter-bug-1766-fix=false", "--metrics-bind-address=127.0.0.1:9080"); err != nil {
		return nil, err
	}
	step("policy agent kube-network-policies started (stops on SIGINT)")
	return c, nil
}

// spawnNode writes the configs and starts the kubelet, the scheduler and
// kube-proxy.
func (c *Cluster) spawnNode(bins map[string]string) error {
	h, kc := c.Host, c.CP.Kubeconfig
	kcfg, err := KubeletConfig(h.Containerd.Socket)
	if err != nil {
		return err
	}
	pcfg, err := KubeProxyConfig(kc, node.PodCIDR)
	if err != nil {
		return err
	}
	kpath, ppath := filepath.Join(h.WorkDir, "kubelet.yaml"), filepath.Join(h.WorkDir, "kube-proxy.yaml")
	if err := os.WriteFile(kpath, []byte(kcfg), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(ppath, []byte(pcfg), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(c.progress, "realnode: starting kubelet, kube-scheduler, kube-proxy (logs in %s)\n", h.WorkDir)
	if _, err := h.Spawn("kubelet", 0, nil, bins[controlplane.Kubelet], "--config="+kpath, "--kubeconfig="+kc,
		"--root-dir=/var/lib/kubelet", "--cert-dir="+filepath.Join(h.WorkDir, "kubelet-pki"),
		"--node-ip="+node.BridgeIP, "--hostname-override="+NodeName); err != nil {
		return err
	}
	if _, err := h.Spawn("kube-scheduler", 0, nil, bins[controlplane.KubeScheduler], "--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=10259"); err != nil {
		return err
	}
	_, err = h.Spawn("kube-proxy", 0, nil, bins[controlplane.KubeProxy], "--config="+ppath)
	return err
}

func (c *Cluster) waitNodeReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		n, err := c.CP.Kube.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realnode: node %s not Ready in %s (last error %v); kubelet log:\n%s", NodeName, timeout, err, c.Host.Logs("kubelet", 3000))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the controllers (so nothing re-creates a pod), then deletes
// every pod through the API with a 1 s grace period and waits up to 30 s
// for them to go: not 0, which force-deletes the object at once without
// the kubelet, so the wait would prove nothing; with a grace period the
// object goes only once the kubelet has stopped the pod (CNI DEL and
// unmounts run). Then it tears the host down and stops the control plane.
// Safe on a partly started Cluster.
func (c *Cluster) Stop(ctx context.Context) error {
	oneSecond := int64(1)
	var errs []error
	if c.CP != nil {
		// Nothing may re-create the pods being deleted (a Deployment's
		// ReplicaSet, a SandboxWarmPool): stop the controllers first.
		for _, name := range []string{"kube-controller-manager", "agent-sandbox-controller"} {
			_ = c.CP.StopComponent(name)
		}
		pods := c.CP.Kube.CoreV1().Pods(metav1.NamespaceAll)
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, p := range list.Items {
				_ = c.CP.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &oneSecond})
			}
			start, left := time.Now(), len(list.Items)
			for time.Since(start) < 30*time.Second && left > 0 {
				time.Sleep(200 * time.Millisecond)
				l, err := pods.List(ctx, metav1.ListOptions{})
				if err != nil {
					break
				}
				left = len(l.Items)
			}
			fmt.Fprintf(c.progress, "realnode: %d pods deleted through the API in %s, %d left for the teardown\n", len(list.Items), time.Since(start).Round(time.Millisecond), left)
		}
	}
	if c.Host != nil {
		errs = append(errs, c.Host.Down(ctx))
	}
	if c.CP != nil {
		c.CP.Stop()
	}
	return errors.Join(errs...)
}
