package incluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/images"
	"github.com/agentcustody/custody/test/e2e/node"
	"github.com/agentcustody/custody/test/e2e/realnode"
)

// Local image references (see the package doc).
var (
	CustodyImage  = images.Ref("custody", "dev")
	AgentImage    = images.Ref("agent", "v1")
	ProviderImage = images.Ref("provider-standin", "v1")
)

// Namespaces and ports of the peers.
const (
	StoreNS       = "custody-store"
	ProviderNS    = "provider-standin"
	OtherNS       = "other"
	storeFwdPort  = 15432
	ProviderPort  = 8080 // the provider stand-in's pod port
	AdminPort     = 8867
	MetricsPort   = 8868
	APIPort       = 8865
	GatewayPort   = 8866
	EgressPort    = 8869 // deploy/components/mediated
	MCPPort       = 8080 // the upstream MCP server pod's
	custodySelect = "app.kubernetes.io/name=custody"
)

// As the sandbox's processes (sandboxd's container) reach custody: the
// gateway by Service name over TLS, and custody's CA (ConfigMap
// custody-ca, mounted there by the overlay) for --sandbox-ca-file.
var (
	SandboxGatewayURL = fmt.Sprintf("https://custody.custody-system.svc.cluster.local:%d", GatewayPort)
	SandboxEgressURL  = fmt.Sprintf("http://custody.custody-system.svc.cluster.local:%d", EgressPort)
)

// SandboxCAFile is custody's CA in sandboxd's container.
const SandboxCAFile = "/var/run/secrets/custody-ca/ca.crt"

// Options configure [Deploy].
type Options struct {
	// Dir holds the overlay, the keys and the built binaries. Required.
	Dir string
	// ProviderKey is the "real" provider key the gateway is given (Secret
	// custody-provider-keys, file anthropic). Required.
	ProviderKey string
	// SignerIdle is --signer-idle. Default 1h (custody's own default).
	SignerIdle time.Duration
	// PostgresURL is the machine's PostgreSQL as the harness reaches it.
	// Default $CUSTODY_TEST_POSTGRES_URL, then
	// postgres://postgres@127.0.0.1:5432/test?sslmode=disable.
	PostgresURL string
	// Progress gets one line per step. Default io.Discard.
	Progress io.Writer
}

// Deployment is custody running in the cluster, with its peers.
type Deployment struct {
	// Custody is custody's pod as the harness reaches it (pod IP; no
	// process of its own, so never call its Stop). AdminToken is the admin
	// bearer token (Secret custody-admin), also in Dir/admin-token; Log
	// names Dir/custody.log, written by [Deployment.SaveLog].
	Custody *fixture.Custody
	// Pod is custody's pod.
	Pod *corev1.Pod
	// Bin is cmd/custody built for the host (the CLI: exec, verify).
	Bin string
	// ProviderIP is the stand-in pod's IP; ProviderURL what custody calls
	// (the Service's DNS name).
	ProviderIP, ProviderURL string
	// OtherIP is the server pod in namespace "other".
	OtherIP string
	// MCPIP is the upstream MCP server's pod (test/e2e/mcpdocs, in
	// namespace "other"), which custody reaches by Service DNS as
	// upstream "docs"; MCPCallsURL its own call log (GET, from the host).
	MCPIP, MCPCallsURL string
	mcpURL             string
	mcpCredential      string
	caFile             string // the harness CA custody-tls chains to, on this host
	// StoreAddr is the store as pods reach it:
	// postgres.custody-store.svc.cluster.local:5432.
	StoreAddr string
	// Database is the database custody uses on the machine's PostgreSQL.
	Database string

	cluster  *realnode.Cluster
	fwd      net.Listener
	fwdFrom  atomic.Pointer[net.IP] // the store forwarder pod's IP: the only source the bridge forwarder serves
	pgURL    string
	progress io.Writer
	// progressMu orders step's writes (images reports from a ticker too).
	progressMu sync.Mutex
}

// Deploy builds and imports the images, creates the store, the peers and
// the Secrets, applies the kustomize build, and waits until custody's pod
// is Ready. On error what it made is removed.
func Deploy(ctx context.Context, c *realnode.Cluster, opts Options) (_ *Deployment, err error) {
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if opts.SignerIdle == 0 {
		opts.SignerIdle = time.Hour
	}
	if opts.PostgresURL == "" {
		opts.PostgresURL = os.Getenv("CUSTODY_TEST_POSTGRES_URL")
	}
	if opts.PostgresURL == "" {
		opts.PostgresURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	d := &Deployment{cluster: c, pgURL: opts.PostgresURL, progress: opts.Progress}
	defer func() {
		if err != nil {
			err = errors.Join(err, d.Stop(context.WithoutCancel(ctx)))
		}
	}()
	root, err := fixture.RepoRoot()
	if err != nil {
		return nil, err
	}
	if err := d.images(ctx, root, opts.Dir); err != nil {
		return nil, err
	}
	env := &fixture.Env{CP: c.CP}
	if err := d.peers(ctx, env); err != nil {
		return nil, err
	}
	if err := d.store(ctx); err != nil {
		return nil, err
	}
	adminToken, err := d.secrets(ctx, opts)
	if err != nil {
		return nil, err
	}
	objs, err := build(root, opts.Dir, overlay{ProviderURL: d.ProviderURL, SignerIdle: opts.SignerIdle})
	// custody's --mcp-upstreams and the credential it injects come from
	// Secret custody-mcp (see secrets).
	if err != nil {
		return nil, err
	}
	d.step("applying the kustomize build of deploy/postgres with components/mediated (%d objects, images rewritten to %s and %s)", len(objs), CustodyImage, AgentImage)
	if err := env.ApplyObjects(ctx, objs); err != nil {
		return nil, fmt.Errorf("incluster: apply: %w", err)
	}
	start := time.Now()
	pod, err := d.waitCustody(ctx, 120*time.Second)
	if err != nil {
		return nil, err
	}
	d.Pod = pod
	ip := pod.Status.PodIP
	// TLS on every listener but the egress proxy; the harness's clients
	// verify fixture.ServerName at the pod's address.
	d.Custody = &fixture.Custody{
		URL:        fmt.Sprintf("https://%s:%d", ip, APIPort),
		CAFile:     d.caFile,
		GatewayURL: fmt.Sprintf("https://%s:%d", ip, GatewayPort),
		EgressURL:  fmt.Sprintf("http://%s:%d", ip, EgressPort),
		AdminURL:   fmt.Sprintf("https://%s:%d", ip, AdminPort),
		MetricsURL: fmt.Sprintf("https://%s:%d", ip, MetricsPort),
		AdminToken: adminToken,
		Log:        filepath.Join(opts.Dir, "custody.log"),
	}
	// fixture.Exec and the signer's CLI calls read the token next to Log.
	if err := os.WriteFile(filepath.Join(opts.Dir, "admin-token"), []byte(adminToken), 0o600); err != nil {
		return nil, err
	}
	d.step("custody pod %s Ready on %s after %s (in-cluster config, ServiceAccount custody-system/custody)", pod.Name, ip, time.Since(start).Round(time.Millisecond))
	return d, nil
}

func (d *Deployment) step(f string, a ...any) {
	d.progressMu.Lock()
	defer d.progressMu.Unlock()
	fmt.Fprintf(d.progress, "incluster: "+f+"\n", a...)
}

// images builds the three images and the host CLI and imports them.
func (d *Deployment) images(ctx context.Context, root, dir string) error {
	d.step("building images %s %s %s (static Go binaries, no Docker; the first static build of a machine takes ~10 min on 2 cores)", CustodyImage, AgentImage, ProviderImage)
	start := time.Now()
	done := make(chan struct{})
	defer close(done)
	go func() {
		tk := time.NewTicker(30 * time.Second)
		defer tk.Stop()
		for {
			select {
			case <-done:
				return
			case <-tk.C:
				d.step("  still building images (%s)", time.Since(start).Round(time.Second))
			}
		}
	}()
	for ref, pkg := range map[string]string{CustodyImage: "./cmd/custody", AgentImage: "./test/e2e/cmd/probe", ProviderImage: "./test/e2e/cmd/provider-standin"} {
		bin := filepath.Join(dir, "img-"+filepath.Base(pkg), filepath.Base(pkg))
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			return err
		}
		if err := images.GoBuild(ctx, root, pkg, bin); err != nil {
			return err
		}
		img := images.Image{Binary: bin, Ref: ref}
		if ref == AgentImage {
			// sandboxd (the sandbox's process API, seed 002) beside the
			// agent, built static from the pinned tools module.
			tools, err := controlplane.ToolsDir()
			if err != nil {
				return err
			}
			sbd := filepath.Join(filepath.Dir(bin), "sandboxd")
			if err := images.GoBuild(ctx, tools, "sigs.k8s.io/agent-sandbox/packages/sandboxd/cmd/sandboxd", sbd); err != nil {
				return err
			}
			img.Extra = []string{sbd}
		}
		tar := bin + ".tar"
		if _, err := images.Write(img, tar); err != nil {
			return err
		}
		if err := d.cluster.Host.Import(ctx, tar); err != nil {
			return err
		}
		if ref == CustodyImage {
			d.Bin = bin // static, so it also runs on the host
		}
		d.step("  %s built and imported (%s)", ref, time.Since(start).Round(time.Second))
	}
	return nil
}

// waitCustody waits for a Ready custody pod and returns it.
func (d *Deployment) waitCustody(ctx context.Context, timeout time.Duration) (*corev1.Pod, error) {
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "custody"}).String()
	var pod *corev1.Pod
	err := fixture.Poll(ctx, timeout, func() (bool, error) {
		l, err := d.cluster.CP.Kube.CoreV1().Pods(fixture.CustodyNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			if realnode.Ready(&l.Items[i]) && l.Items[i].DeletionTimestamp == nil {
				pod = &l.Items[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("incluster: custody pod not Ready: %w; its log:\n%s", err, d.Logs(ctx, 4000))
	}
	return pod, nil
}

// Logs returns the last n bytes of custody's container log (through the
// API server and the kubelet), or the error reading it.
func (d *Deployment) Logs(ctx context.Context, n int64) string {
	sel := labels.SelectorFromSet(labels.Set{"app.kubernetes.io/name": "custody"}).String()
	l, err := d.cluster.CP.Kube.CoreV1().Pods(fixture.CustodyNS).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil || len(l.Items) == 0 {
		return fmt.Sprintf("(no custody pod: %v)", err)
	}
	// LimitBytes would give the first n bytes: ask for enough last lines
	// (custody's JSON lines are a few hundred bytes) and keep the tail.
	lines := n/100 + 1
	b, err := d.cluster.CP.Kube.CoreV1().Pods(fixture.CustodyNS).GetLogs(l.Items[0].Name, &corev1.PodLogOptions{TailLines: &lines}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("(log of %s: %v)", l.Items[0].Name, err)
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

// SaveLog writes custody's container log to Custody.Log.
func (d *Deployment) SaveLog(ctx context.Context) {
	if d.Custody != nil {
		_ = os.WriteFile(d.Custody.Log, []byte(d.Logs(ctx, 1<<20)), 0o600)
	}
}

// ProviderSeen asks the stand-in pod what it received: the SHA-256 (hex)
// of each request's x-api-key and whether it carried Authorization.
func (d *Deployment) ProviderSeen(ctx context.Context) (keySHA256 []string, auth []bool, err error) {
	r, err := fixture.Do(ctx, "GET", fmt.Sprintf("http://%s:%d/_seen", d.ProviderIP, ProviderPort), "", nil)
	if err != nil {
		return nil, nil, err
	}
	var v struct {
		Keys  []string `json:"api_keys_sha256"`
		Auths []bool   `json:"authorization"`
	}
	if err := r.JSON(&v); err != nil {
		return nil, nil, fmt.Errorf("incluster: provider stand-in /_seen: %w", err)
	}
	return v.Keys, v.Auths, nil
}

// store creates the database and the forwarder pods reach it through.
func (d *Deployment) store(ctx context.Context) error {
	var raw [6]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return err
	}
	d.Database = "custody_e2e_" + hex.EncodeToString(raw[:])
	conn, err := pgx.Connect(ctx, d.pgURL)
	if err != nil {
		return fmt.Errorf("incluster: PostgreSQL at %s: %w", redactURL(d.pgURL), err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{d.Database}.Sanitize()); err != nil {
		d.Database = ""
		return fmt.Errorf("incluster: create database: %w", err)
	}
	target := conn.Config().Host + ":" + fmt.Sprint(conn.Config().Port)
	ln, err := net.Listen("tcp", fmt.Sprintf("%s:%d", node.BridgeIP, storeFwdPort))
	if err != nil {
		return fmt.Errorf("incluster: store forwarder: %w", err)
	}
	d.fwd = ln
	// The bridge address is reachable from every pod, sandboxes included,
	// and NetworkPolicy does not police traffic to the node's own address;
	// the forwarded connection reaches PostgreSQL from 127.0.0.1, where
	// trust auth may apply. So only the store's forwarder pod is served.
	controlplane.ForwardTCPFrom(ln, target, d.fromStorePod)
	d.StoreAddr = "postgres." + StoreNS + ".svc.cluster.local:5432"
	d.step("store: database %s on the machine's PostgreSQL, for pods as %s (-> %s -> %s)", d.Database, d.StoreAddr, ln.Addr(), target)
	pod, err := d.storeService(ctx)
	if err != nil {
		return err
	}
	ip := net.ParseIP(pod.Status.PodIP)
	if ip == nil {
		return fmt.Errorf("incluster: store forwarder pod has no IP (%q)", pod.Status.PodIP)
	}
	d.fwdFrom.Store(&ip)
	return nil
}

// fromStorePod: ip is the store forwarder pod's.
func (d *Deployment) fromStorePod(ip net.IP) bool {
	p := d.fwdFrom.Load()
	return p != nil && p.Equal(ip)
}

// Stop drops the database and closes the forwarder. The cluster (and
// with it every object) is stopped by its owner.
func (d *Deployment) Stop(ctx context.Context) error {
	if d.fwd != nil {
		_ = d.fwd.Close()
		d.fwd = nil
	}
	if d.Database == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, d.pgURL)
	if err != nil {
		return fmt.Errorf("incluster: drop database %s: %w", d.Database, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.Database}.Sanitize()+" WITH (FORCE)")
	if err != nil {
		return fmt.Errorf("incluster: drop database %s: %w", d.Database, err)
	}
	d.Database = ""
	return nil
}

// CLI runs the host build of custody with args and returns its combined
// output and exit code (-1 if it did not run).
func (d *Deployment) CLI(ctx context.Context, args ...string) (string, int) {
	out, err := exec.CommandContext(ctx, d.Bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	case err != nil:
		return err.Error(), -1
	}
	return string(out), 0
}
