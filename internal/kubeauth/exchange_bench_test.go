package kubeauth

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// exchangeBench is a local control plane (test/e2e/controlplane: real
// etcd, kube-apiserver, controllers and agent-sandbox) with one claimed
// sandbox, shared by every run of BenchmarkExchange in this process.
type exchangeBench struct {
	cp    *controlplane.ControlPlane
	dir   string
	token string       // bound to the claim's pod, audience custody
	rc    *rest.Config // custody's own service account (deploy/base/rbac.yaml)
	id    apikey.Identity
}

var (
	benchOnce sync.Once
	bench     *exchangeBench
	benchErr  error
)

// stopExchangeBench stops the control plane, if BenchmarkExchange started
// one.
func stopExchangeBench() {
	if bench != nil {
		bench.cp.Stop()
	}
}

func startExchangeBench(b *testing.B) *exchangeBench {
	benchOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cp, err := controlplane.Start(ctx, controlplane.Options{Progress: benchLog{b}})
		if err != nil {
			benchErr = err
			return
		}
		bench = &exchangeBench{cp: cp, dir: cp.Dir}
		env := &fixture.Env{CP: cp}
		if benchErr = env.Setup(ctx); benchErr != nil {
			return
		}
		if benchErr = env.CreateClaim(ctx, "bench"); benchErr != nil {
			return
		}
		pod, err := env.ClaimPod(ctx, "bench")
		if err != nil {
			benchErr = err
			return
		}
		if bench.token, benchErr = env.PodToken(ctx, pod, fixture.Audience); benchErr != nil {
			return
		}
		path := filepath.Join(cp.Dir, "custody.kubeconfig")
		if benchErr = env.CustodyKubeconfig(ctx, path, time.Hour); benchErr != nil {
			return
		}
		bench.rc, benchErr = clientcmd.BuildConfigFromFlags("", path)
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return bench
}

type benchLog struct{ b *testing.B }

func (w benchLog) Write(p []byte) (int, error) {
	w.b.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// floorClient is what an exchange cannot do without: a bare client-go
// clientset and dynamic client (NewForConfig each, no client-side rate
// limit) issuing the exchange's calls one after another: TokenReview,
// GET pod, GET service account, GET Sandbox, GET SandboxClaim.
type floorClient struct {
	kube kubernetes.Interface
	dyn  dynamic.Interface
}

func newFloorClient(b *testing.B, rc *rest.Config) floorClient {
	rc = rest.CopyConfig(rc)
	rc.QPS = -1
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		b.Fatal(err)
	}
	return floorClient{kube: kc, dyn: dc}
}

// reads issues the floor's calls for token and id, sequentially; the
// service-account GET only when withSA (without it, it is the critical
// path of a concurrent exchange: TokenReview, pod, Sandbox, claim).
func (f floorClient) reads(ctx context.Context, token string, id apikey.Identity, withSA bool) error {
	ns := id.Tenant
	if _, err := f.kube.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{fixture.Audience}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := f.kube.CoreV1().Pods(ns).Get(ctx, id.Session, metav1.GetOptions{}); err != nil {
		return err
	}
	if withSA {
		_, sa, _ := parseServiceAccount(id.ServiceAccount)
		if _, err := f.kube.CoreV1().ServiceAccounts(ns).Get(ctx, sa, metav1.GetOptions{}); err != nil {
			return err
		}
	}
	if _, err := f.dyn.Resource(SandboxGVR).Namespace(ns).Get(ctx, id.SandboxName, metav1.GetOptions{}); err != nil {
		return err
	}
	_, err := f.dyn.Resource(SandboxClaimGVR).Namespace(ns).Get(ctx, id.Agent, metav1.GetOptions{})
	return err
}

// BenchmarkExchange measures Authenticate (TokenReview, then the live
// reads of attest) on a real kube-apiserver against its floor, the same
// calls issued sequentially by a bare client-go client (floorClient), in
// the same run. Each iteration times one exchange, one floor and one
// chain floor (the floor without the service-account GET: the least a
// concurrent exchange can take), in rotating order. The exchange's clients are built as `custody serve`
// builds them (Clients; QPS 200, burst 400, serve's defaults), as
// custody's own service account.
//
// Metrics: p50_x_floor and p99_x_floor (exchange percentile over the
// floor's), p50_x_chain_floor, exchange_p50_ms, exchange_p99_ms,
// floor_p50_ms, floor_p99_ms, chain_floor_p50_ms. ns/op is one of each. Needs the
// control-plane binaries (built on first use, cached); skipped with
// -short. Run with e.g. -benchtime=1000x.
func BenchmarkExchange(b *testing.B) {
	if testing.Short() {
		b.Skip("starts a local control plane")
	}
	env := startExchangeBench(b)
	rc := rest.CopyConfig(env.rc)
	rc.QPS, rc.Burst = 200, 400
	kc, dc, err := Clients(rc)
	if err != nil {
		b.Fatal(err)
	}
	ex, err := New(Options{Kube: kc, Dynamic: dc, Issuers: []string{controlplane.Issuer}, Namespaces: []string{fixture.Namespace}})
	if err != nil {
		b.Fatal(err)
	}
	floor := newFloorClient(b, env.rc)
	ctx := context.Background()
	id, err := ex.Authenticate(ctx, env.token)
	if err != nil {
		b.Fatalf("Authenticate() = %v", err)
	}
	runExchange := func() time.Duration {
		start := time.Now()
		if _, err := ex.Authenticate(ctx, env.token); err != nil {
			b.Fatalf("Authenticate() = %v", err)
		}
		return time.Since(start)
	}
	runFloor := func(withSA bool) time.Duration {
		start := time.Now()
		if err := floor.reads(ctx, env.token, id, withSA); err != nil {
			b.Fatalf("floor reads = %v", err)
		}
		return time.Since(start)
	}
	var exch, flr, chainFlr []time.Duration
	run := []func(){
		func() { exch = append(exch, runExchange()) },
		func() { flr = append(flr, runFloor(true)) },
		func() { chainFlr = append(chainFlr, runFloor(false)) },
	}
	for i := 0; i < 20; i++ { // warm connections and the API server's caches
		for _, f := range run {
			f()
		}
	}
	exch, flr, chainFlr = nil, nil, nil
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := range run {
			run[(i+j)%len(run)]()
		}
	}
	b.StopTimer()
	ep50, ep99 := percentile(exch, 50), percentile(exch, 99)
	fp50, fp99 := percentile(flr, 50), percentile(flr, 99)
	b.ReportMetric(float64(ep50)/float64(fp50), "p50_x_floor")
	b.ReportMetric(float64(ep99)/float64(fp99), "p99_x_floor")
	cp50 := percentile(chainFlr, 50)
	b.ReportMetric(float64(ep50)/float64(cp50), "p50_x_chain_floor")
	b.ReportMetric(ms(cp50), "chain_floor_p50_ms")
	b.ReportMetric(ms(ep50), "exchange_p50_ms")
	b.ReportMetric(ms(ep99), "exchange_p99_ms")
	b.ReportMetric(ms(fp50), "floor_p50_ms")
	b.ReportMetric(ms(fp99), "floor_p99_ms")
}

// percentile is the p-th percentile (nearest rank) of ds; ds is sorted
// in place.
func percentile(ds []time.Duration, p int) time.Duration {
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	return ds[max(i-1, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
