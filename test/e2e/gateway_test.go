package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/agentcustody/custody/test/e2e/controlplane"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

// TestExecPerRunTokens is the gateway scenario: two runs in one sandbox
// (a real sandboxd) through `custody exec`; each run's token reaches the
// provider with the gateway's key, a copy replayed after its run exited is
// refused while most of its TTL remains, and no token lands in the
// cluster's objects.
func TestExecPerRunTokens(t *testing.T) {
	ctx := testCtx(t)
	bins, err := controlplane.Build(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	probe, err := fixture.BuildCommand(ctx, workDir, "./test/e2e/cmd/probe")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := fixture.StartSandboxd(ctx, bins["sandboxd"], filepath.Join(workDir, "sandbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	before, _ := provider.Seen()

	leak1 := filepath.Join(sb.Root, "leak-1")
	r1, err := fixture.Exec(ctx, custodyBin, sb, custody, "exec-run-1", probe, "-copy-token-to", leak1)
	if err != nil || r1.ExitCode != 0 {
		t.Fatalf("custody exec run 1 = %+v, %v", r1, err)
	}
	body := afterStatus(r1.Stdout)
	if !strings.HasPrefix(r1.Stdout, "401 ") || !strings.Contains(body, "authentication_error") || fixture.FromGateway(body) {
		t.Fatalf("run 1 saw %q, want the provider's 401 (not a gateway refusal)", r1.Stdout)
	}
	keys, auths := provider.Seen()
	keys, auths = keys[len(before):], auths[len(before):]
	if len(keys) != 1 || keys[0] != providerKey || auths[0] != "" {
		t.Fatalf("provider saw x-api-key %q, Authorization %q; want exactly the gateway's key", keys, auths)
	}

	tok1, err := os.ReadFile(leak1)
	if err != nil || len(tok1) == 0 {
		t.Fatalf("copy of run 1's token: %v", err)
	}
	if strings.Contains(r1.Stdout+r1.Stderr, string(tok1)) {
		t.Error("custody exec printed the token")
	}
	exp, err := fixture.TokenExpiry(string(tok1))
	if err != nil || time.Until(exp) < 25*time.Minute {
		t.Fatalf("token expires in %v (%v), want about 30m", time.Until(exp), err)
	}
	replay := func(tok string) fixture.Response {
		r, err := fixture.Do(ctx, http.MethodPost, custody.GatewayURL+"/anthropic/v1/messages", "",
			[]byte(`{"model":"m","max_tokens":1,"messages":[]}`), "x-api-key", tok, "anthropic-version", "2023-06-01")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := replay(string(tok1)); r.Status != http.StatusUnauthorized || strings.TrimSpace(string(r.Body)) != "gateway token revoked" {
		t.Fatalf("replayed run 1 token = %s, want 401 gateway token revoked", r)
	}

	leak2 := filepath.Join(sb.Root, "leak-2")
	r2, err := fixture.Exec(ctx, custodyBin, sb, custody, "exec-run-2", probe, "-copy-token-to", leak2)
	if err != nil || r2.ExitCode != 0 || fixture.FromGateway(afterStatus(r2.Stdout)) {
		t.Fatalf("custody exec run 2 = %+v, %v", r2, err)
	}
	tok2, _ := os.ReadFile(leak2)
	if string(tok2) == string(tok1) {
		t.Fatal("run 2 got run 1's token")
	}
	if r := replay(string(tok2)); r.Status != http.StatusUnauthorized {
		t.Errorf("replayed run 2 token = %s, want refused", r)
	}

	// No token in Sandbox, SandboxClaim or Pod objects.
	for _, gvr := range []struct{ group, version, resource string }{
		{"agents.x-k8s.io", "v1beta1", "sandboxes"}, {"extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims"}, {"", "v1", "pods"},
	} {
		raw, err := env.CP.Kube.Discovery().RESTClient().Get().AbsPath(apiPath(gvr.group, gvr.version), "namespaces", fixture.Namespace, gvr.resource).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range [][]byte{tok1, tok2} {
			if strings.Contains(string(raw), string(tok)) {
				t.Errorf("a gateway token is in the cluster's %s", gvr.resource)
			}
		}
	}
}

func apiPath(group, version string) string {
	if group == "" {
		return "/api/" + version
	}
	return "/apis/" + group + "/" + version
}

func afterStatus(line string) string {
	_, b, _ := strings.Cut(line, " ")
	return b
}

// TestGatewayAdminPlane: the data port answers 404 on admin paths; the
// admin listener accepts the static token and a projected token of an
// allowed service account (TokenReview), and refuses others.
func TestGatewayAdminPlane(t *testing.T) {
	ctx := testCtx(t)
	mint := []byte(`{"providers":["anthropic"],"ttl_seconds":600,"run_id":"admin-test"}`)
	if r, err := fixture.Do(ctx, "POST", custody.GatewayURL+"/v1/gateway/tokens", custody.AdminToken, mint); err != nil || r.Status != http.StatusNotFound {
		t.Fatalf("mint on the data port = %v %v, want 404", r, err)
	}
	if r, err := fixture.Do(ctx, "POST", custody.URL+"/v1/gateway/tokens", custody.AdminToken, mint); err != nil || r.Status != http.StatusNotFound {
		t.Fatalf("mint on the API port = %v %v, want 404", r, err)
	}

	kube := env.CP.Kube
	for _, name := range []string{"gateway-operator", "not-an-operator"} {
		if _, err := kube.CoreV1().ServiceAccounts(fixture.CustodyNS).Create(ctx, saObject(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := startCustody(ctx, "admin-sa", "--admin-service-accounts="+fixture.CustodyNS+":gateway-operator")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	saToken := func(name, aud string) string {
		tr, err := kube.CoreV1().ServiceAccounts(fixture.CustodyNS).CreateToken(ctx, name, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{aud}, ExpirationSeconds: ptr.To(int64(600))},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	for _, tc := range []struct {
		name, bearer string
		want         int
	}{
		{"static admin token", srv.AdminToken, http.StatusCreated},
		{"allowed service account", saToken("gateway-operator", "custody-admin"), http.StatusCreated},
		{"allowed service account, wrong audience", saToken("gateway-operator", "custody"), http.StatusUnauthorized},
		{"other service account", saToken("not-an-operator", "custody-admin"), http.StatusUnauthorized},
		{"no credential", "", http.StatusUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := fixture.Do(context.Background(), "POST", srv.AdminURL+"/v1/gateway/tokens", tc.bearer, mint)
			if err != nil || r.Status != tc.want {
				t.Fatalf("mint = %v %v, want %d", r, err, tc.want)
			}
		})
	}
}
