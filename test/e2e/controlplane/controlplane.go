// Package controlplane runs a real, local Kubernetes control plane on
// loopback for custody's end-to-end tests, `make cluster` and `make demo`:
// etcd, kube-apiserver (service-account issuer and signing keys, so
// TokenRequest and TokenReview work; RBAC authorization),
// kube-controller-manager (garbage collection, namespaces, service
// accounts), the agent-sandbox CRDs and controller (with extensions), all
// built from the versions pinned in tools/go.mod.
//
// By default there is no kubelet, so pods never run. The one stand-in is
// then [KubeletStandIn], which only marks pods Running and Ready (a
// warm-pool Sandbox is adopted by a claim only when its pod is Ready).
// Nothing else is faked. With [Options.RealNodes] the stand-in is not
// started and kube-controller-manager also runs what a real node needs
// (node lifecycle, endpoint slices, the kube-root-ca.crt publisher); the
// caller brings up the node and gives pods the API with
// [ControlPlane.ServePodAPI].
package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Issuer is the service-account token issuer of the local API server, and
// its default API audience.
const Issuer = "https://kubernetes.default.svc.cluster.local"

// Options configure [Start].
type Options struct {
	// Dir holds certificates, etcd data, kubeconfigs and component logs.
	// Default: a new temporary directory, removed by Stop.
	Dir string
	// Progress receives one line per step. Default io.Discard.
	Progress io.Writer
	// RealNodes: a real kubelet will register a node and run pods, so no
	// kubelet stand-in is started and kube-controller-manager also runs
	// node-lifecycle (without it the not-ready taint the NodeTaint
	// admission plugin sets is never lifted), endpointslice,
	// endpointslice-mirroring and root-ca-certificate-publisher (pods'
	// default token volume needs kube-root-ca.crt), and the deployment and
	// replicaset controllers (custody's own Deployment). Default false.
	RealNodes bool
}

// ControlPlane is a running local control plane.
type ControlPlane struct {
	// Dir is the working directory; <component>.log files are in it.
	Dir string
	// Kubeconfig is the path of an admin kubeconfig (system:masters).
	Kubeconfig string
	// Config is the admin REST config.
	Config *rest.Config
	// Kube and Dynamic are admin clients.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
	// Server is the API server URL.
	Server string
	// Binaries are the built tools (sandboxd among them).
	Binaries Binaries

	pki       *pki
	removeDir bool
	procs     []*proc
	stopOnce  sync.Once
	cancel    context.CancelFunc
	kubelet   *KubeletStandIn
	podAPI    *podAPI
}

// Start builds (or takes from the cache) the binaries and starts the
// control plane. Stop it with Stop.
func Start(ctx context.Context, opts Options) (_ *ControlPlane, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	bins, err := Build(ctx, opts.Progress)
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Dir: opts.Dir, Binaries: bins}
	if cp.Dir == "" {
		if cp.Dir, err = os.MkdirTemp("", "custody-controlplane-"); err != nil {
			return nil, err
		}
		cp.removeDir = true
	}
	if err := os.MkdirAll(cp.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cp.Stop()
		}
	}()
	if cp.pki, err = newPKI(cp.Dir); err != nil {
		return nil, fmt.Errorf("controlplane: pki: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cp.cancel = cancel
	step := func(s string) { fmt.Fprintf(opts.Progress, "control plane: %s\n", s) }

	ports, err := freePorts(6)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	step("starting etcd on " + etcdURL)
	if err := cp.startProc("etcd", bins["etcd"],
		"--name=default", "--data-dir="+filepath.Join(cp.Dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=default="+peerURL, "--listen-metrics-urls=http://127.0.0.1:"+strconv.Itoa(ports[2]),
		"--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return nil, err
	}

	cp.Server = "https://127.0.0.1:" + strconv.Itoa(ports[3])
	step("starting kube-apiserver on " + cp.Server)
	if err := cp.startProc("kube-apiserver", bins["kube-apiserver"],
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[3]),
		"--tls-cert-file="+cp.pki.serverCert, "--tls-private-key-file="+cp.pki.serverKey,
		"--client-ca-file="+cp.pki.caCert,
		"--service-account-issuer="+Issuer,
		"--service-account-key-file="+cp.pki.saPub, "--service-account-signing-key-file="+cp.pki.saKey,
		"--authorization-mode=RBAC", "--anonymous-auth=false",
		"--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
		"--cert-dir="+filepath.Join(cp.Dir, "apiserver-certs"),
		"--allow-privileged=true", "--profiling=false", "--v=0",
	); err != nil {
		return nil, err
	}
	if cp.Kubeconfig, err = cp.writeAdminKubeconfig(); err != nil {
		return nil, err
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig); err != nil {
		return nil, err
	}
	cp.Config.QPS, cp.Config.Burst = 200, 400
	if cp.Kube, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	if cp.Dynamic, err = dynamic.NewForConfig(cp.Config); err != nil {
		return nil, err
	}
	if err := cp.waitReady(ctx, 90*time.Second); err != nil {
		return nil, err
	}

	controllers, what := "garbage-collector-controller,namespace-controller,serviceaccount-controller", "garbage collector, namespaces, service accounts"
	kcmArgs := []string{}
	if opts.RealNodes {
		controllers += ",node-lifecycle-controller,endpointslice-controller,endpointslice-mirroring-controller,root-ca-certificate-publisher-controller,deployment-controller,replicaset-controller"
		what += ", node lifecycle, endpoint slices, root CA publisher, deployments, replica sets"
		kcmArgs = append(kcmArgs, "--root-ca-file="+cp.pki.caCert)
	}
	step("starting kube-controller-manager (" + what + ")")
	if err := cp.startProc("kube-controller-manager", bins["kube-controller-manager"], append([]string{
		"--kubeconfig=" + cp.Kubeconfig, "--authentication-kubeconfig=" + cp.Kubeconfig, "--authorization-kubeconfig=" + cp.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(ports[4]),
		"--use-service-account-credentials=false", "--v=0",
	}, kcmArgs...)...); err != nil {
		return nil, err
	}

	step("installing agent-sandbox CRDs")
	if err := cp.installCRDs(ctx); err != nil {
		return nil, err
	}
	step("starting agent-sandbox controller (--extensions)")
	if err := cp.startProcEnv("agent-sandbox-controller", bins["agent-sandbox-controller"], []string{"KUBECONFIG=" + cp.Kubeconfig},
		"--kubeconfig="+cp.Kubeconfig,
		"--extensions", "--enable-webhook=false", "--manage-webhook-certs=false", "--leader-elect=false",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[5]), "--health-probe-bind-address=0",
	); err != nil {
		return nil, err
	}
	if !opts.RealNodes {
		step("starting kubelet stand-in (marks pods Running and Ready; pods never run)")
		cp.kubelet = NewKubeletStandIn(cp.Kube)
		go cp.kubelet.Run(runCtx)
	}
	step("ready; admin kubeconfig: " + cp.Kubeconfig)
	return cp, nil
}

// Stop stops every component (SIGTERM, then SIGKILL after 10 s) and
// removes the working directory if Start created it.
func (cp *ControlPlane) Stop() {
	cp.stopOnce.Do(func() {
		if cp.cancel != nil {
			cp.cancel()
		}
		if cp.podAPI != nil {
			cp.podAPI.stop()
		}
		for i := len(cp.procs) - 1; i >= 0; i-- {
			cp.procs[i].stop()
		}
		if cp.removeDir {
			os.RemoveAll(cp.Dir)
		}
	})
}

// Logs returns the last n bytes of a component's log, for test failures.
func (cp *ControlPlane) Logs(component string, n int) string {
	b, _ := os.ReadFile(filepath.Join(cp.Dir, component+".log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

func (cp *ControlPlane) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		body, err := cp.Kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
			return nil
		}
		for _, p := range cp.procs {
			if p.exited() {
				return fmt.Errorf("controlplane: %s exited: %s", p.name, cp.Logs(p.name, 2000))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("controlplane: kube-apiserver not ready after %s: %v\n%s", timeout, err, cp.Logs("kube-apiserver", 2000))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (cp *ControlPlane) writeAdminKubeconfig() (string, error) {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.pki.adminCertPEM, ClientKeyData: cp.pki.adminKeyPEM}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "admin"}
	cfg.CurrentContext = "local"
	path := filepath.Join(cp.Dir, "admin.kubeconfig")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// TokenKubeconfig writes a kubeconfig at path that authenticates with a
// bearer token (for a service account) against this API server.
func (cp *ControlPlane) TokenKubeconfig(path, token string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: cp.Server, CertificateAuthorityData: cp.pki.caPEM}
	cfg.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "sa"}
	cfg.CurrentContext = "local"
	return clientcmd.WriteToFile(*cfg, path)
}

type proc struct {
	name string
	bin  string
	args []string
	env  []string
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) stop() {
	if p.exited() {
		return
	}
	if p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	}
	p.log.Close()
}

func (cp *ControlPlane) startProc(name, bin string, args ...string) error {
	return cp.startProcEnv(name, bin, nil, args...)
}

func (cp *ControlPlane) startProcEnv(name, bin string, env []string, args ...string) error {
	p, err := cp.spawn(name, bin, env, args)
	if err != nil {
		return err
	}
	cp.procs = append(cp.procs, p)
	return nil
}

func (cp *ControlPlane) spawn(name, bin string, env, args []string) (*proc, error) {
	logf, err := os.OpenFile(filepath.Join(cp.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("controlplane: start %s: %w", name, err)
	}
	p := &proc{name: name, bin: bin, args: args, env: env, cmd: cmd, done: make(chan struct{}), log: logf}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// StopComponent stops one component (for example
// "kube-controller-manager", to act as a cluster without garbage
// collection) until StartComponent.
func (cp *ControlPlane) StopComponent(name string) error {
	for _, p := range cp.procs {
		if p.name == name {
			p.stop()
			return nil
		}
	}
	return fmt.Errorf("controlplane: no component %q", name)
}

// StartComponent starts a component stopped by StopComponent again with
// the same arguments.
func (cp *ControlPlane) StartComponent(name string) error {
	for i, p := range cp.procs {
		if p.name == name {
			if !p.exited() {
				return fmt.Errorf("controlplane: %s is running", name)
			}
			np, err := cp.spawn(p.name, p.bin, p.env, p.args)
			if err != nil {
				return err
			}
			cp.procs[i] = np
			return nil
		}
	}
	return fmt.Errorf("controlplane: no component %q", name)
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("controlplane: free port"), err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
