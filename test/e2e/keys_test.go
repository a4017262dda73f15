package e2e

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentcustody/custody/client"
	"github.com/agentcustody/custody/test/e2e/fixture"
)

func memoriesURL(base, tenant, agent string) string {
	return base + "/v1/memory/" + tenant + "/" + agent + "/memories"
}

func get(t *testing.T, ctx context.Context, url, key string) fixture.Response {
	t.Helper()
	r, err := fixture.Do(ctx, http.MethodGet, url, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestKeyExpires(t *testing.T) {
	ctx := testCtx(t)
	short, err := startCustody(ctx, "short-ttl", "--kubernetes-key-ttl=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer short.Stop()
	pod := claimPod(t, ctx, "expiry")
	k := keyOf(t, exchange(t, ctx, short.URL, podToken(t, ctx, pod)))
	if r := get(t, ctx, memoriesURL(short.URL, k.Tenant, k.Agent), k.Key); r.Status != http.StatusOK {
		t.Fatalf("fresh key: %s, want 200", r)
	}
	time.Sleep(time.Until(k.ExpiresAt) + 100*time.Millisecond)
	r := get(t, ctx, memoriesURL(short.URL, k.Tenant, k.Agent), k.Key)
	wantRefused(t, r, http.StatusUnauthorized, "unauthenticated")
}

func TestKeyRevoked(t *testing.T) {
	ctx := testCtx(t)
	pod := claimPod(t, ctx, "revoked")
	tok := podToken(t, ctx, pod)

	t.Run("self", func(t *testing.T) {
		k := keyOf(t, exchange(t, ctx, custody.URL, tok))
		// Warm the verification cache first: revocation must evict it.
		if r := get(t, ctx, memoriesURL(custody.URL, k.Tenant, k.Agent), k.Key); r.Status != http.StatusOK {
			t.Fatalf("fresh key: %s", r)
		}
		r, err := fixture.Do(ctx, http.MethodPost, custody.URL+"/v1/auth/revoke", k.Key, nil)
		if err != nil || r.Status != http.StatusNoContent {
			t.Fatalf("self revoke = %v %v, want 204", r, err)
		}
		wantRefused(t, get(t, ctx, memoriesURL(custody.URL, k.Tenant, k.Agent), k.Key), 401, "unauthenticated")
	})
	t.Run("admin by key id", func(t *testing.T) {
		k := keyOf(t, exchange(t, ctx, custody.URL, tok))
		get(t, ctx, memoriesURL(custody.URL, k.Tenant, k.Agent), k.Key)
		r, err := fixture.Do(ctx, http.MethodPost, custody.AdminURL+"/v1/admin/keys/"+k.KeyID+"/revoke", "wrong-admin-token", nil)
		if err != nil || r.Status != http.StatusUnauthorized {
			t.Fatalf("admin revoke with a wrong token = %v %v, want 401", r, err)
		}
		r, err = fixture.Do(ctx, http.MethodPost, custody.AdminURL+"/v1/admin/keys/"+k.KeyID+"/revoke", custody.AdminToken, nil)
		if err != nil || r.Status != http.StatusNoContent {
			t.Fatalf("admin revoke = %v %v, want 204", r, err)
		}
		wantRefused(t, get(t, ctx, memoriesURL(custody.URL, k.Tenant, k.Agent), k.Key), 401, "unauthenticated")
	})
	t.Run("admin all keys of an agent", func(t *testing.T) {
		k1 := keyOf(t, exchange(t, ctx, custody.URL, tok))
		k2 := keyOf(t, exchange(t, ctx, custody.URL, tok))
		r, err := fixture.Do(ctx, http.MethodPost, custody.AdminURL+"/v1/admin/agents/"+k1.Tenant+"/"+k1.Agent+"/revoke", custody.AdminToken, nil)
		if err != nil || r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"revoked"`) {
			t.Fatalf("admin revoke agent = %v %v, want 200 with a count", r, err)
		}
		for _, k := range []string{k1.Key, k2.Key} {
			wantRefused(t, get(t, ctx, memoriesURL(custody.URL, k1.Tenant, k1.Agent), k), 401, "unauthenticated")
		}
	})
	t.Run("admin paths are not on the API listener", func(t *testing.T) {
		r, err := fixture.Do(ctx, http.MethodPost, custody.URL+"/v1/admin/agents/agents/revoked/revoke", custody.AdminToken, nil)
		if err != nil || r.Status != http.StatusNotFound {
			t.Fatalf("admin path on API listener = %v %v, want 404", r, err)
		}
	})
}

func TestMissingRBAC(t *testing.T) {
	ctx := testCtx(t)
	// A service account with the TokenReview ClusterRole but no
	// owner-lookup Role in the tenant namespace.
	kube := env.CP.Kube
	if _, err := kube.CoreV1().ServiceAccounts(fixture.CustodyNS).Create(ctx, saObject("custody-norole"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, tokenReviewBinding("custody-norole"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(workDir, "norole")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := env.SAKubeconfig(ctx, fixture.CustodyNS, "custody-norole", kc, time.Hour); err != nil {
		t.Fatal(err)
	}
	srv, err := fixture.StartCustody(ctx, custodyBin, dir, "--kubeconfig="+kc, "--kubernetes-namespaces="+fixture.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	pod := claimPod(t, ctx, "norbac")
	r := exchange(t, ctx, srv.URL, podToken(t, ctx, pod))
	wantRefused(t, r, http.StatusInternalServerError, "rbac_missing")
	if strings.Contains(string(r.Body), "forbidden") || strings.Contains(string(r.Body), "system:serviceaccount") {
		t.Errorf("refusal leaks the API server's error: %s", r.Body)
	}
	if !strings.Contains(string(r.Body), "get pods in namespace "+fixture.Namespace) || strings.Contains(string(r.Body), "sandboxclaims") {
		t.Errorf("rbac_missing = %s, want it to name only the missing permission (get pods)", r.Body)
	}
	for _, url := range []string{srv.URL + "/readyz", srv.MetricsURL + "/readyz"} {
		rr := get(t, ctx, url, "")
		if rr.Status != http.StatusServiceUnavailable {
			t.Errorf("GET %s = %s, want 503", url, rr)
		}
	}
	if rr := get(t, ctx, srv.MetricsURL+"/readyz", ""); !strings.Contains(string(rr.Body), "get pods") {
		t.Errorf("detailed /readyz = %s, want it to name the missing permission", rr)
	}
	if rr := get(t, ctx, custody.URL+"/readyz", ""); rr.Status != http.StatusOK {
		t.Errorf("custody with deploy/base/rbac.yaml: /readyz = %s, want 200", rr)
	}
}

func TestClientPackage(t *testing.T) {
	ctx := testCtx(t)
	short, err := startCustody(ctx, "client", "--kubernetes-key-ttl=3s")
	if err != nil {
		t.Fatal(err)
	}
	defer short.Stop()
	pod := claimPod(t, ctx, "client")
	tokFile := filepath.Join(workDir, "client", "token")
	if err := os.WriteFile(tokFile, []byte(podToken(t, ctx, pod)), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := client.FromEnv(func(k string) (string, bool) {
		return map[string]string{"CUSTODY_URL": short.URL, "CUSTODY_TOKEN_FILE": tokFile, "CUSTODY_CA_FILE": short.CAFile}[k], true
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.RefreshBefore = time.Second
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rem, err := c.Remember(ctx, "fact", "", "the build uses make")
	if err != nil || rem.Status != "created" {
		t.Fatalf("Remember = %+v, %v; want created", rem, err)
	}
	first, err := c.CurrentKey(ctx)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(first.ExpiresAt))
	got, err := c.Recall(ctx, "make", client.RecallOptions{})
	if err != nil || len(got) != 1 || got[0].Text != "the build uses make" {
		t.Fatalf("Recall after the key expired = %+v, %v; want the memory (re-exchanged)", got, err)
	}
	second, _ := c.CurrentKey(ctx)
	if second.KeyID == first.KeyID {
		t.Error("client did not re-exchange an expired key")
	}
	if second.Agent != "client" || second.Session != pod.Name {
		t.Errorf("identity = %s/%s, want client/%s", second.Agent, second.Session, pod.Name)
	}
	l, err := c.AcquireLease(ctx, "plan", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutState(ctx, "plan", l.Epoch, l.Version, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	var ce *client.Error
	if _, err := c.PutState(ctx, "plan", l.Epoch, l.Version, []byte(`{"n":2}`)); !errors.As(err, &ce) || ce.Status != http.StatusPreconditionFailed {
		t.Fatalf("PutState with a stale version = %v, want 412", err)
	}
}
