package onnode

import (
	"net/http"
	"strings"
	"testing"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
)

// TestExecTwoRunsInSandboxPod: `custody exec` reaches sandboxd inside a
// claimed sandbox pod (port-forward, as an operator would) and runs the
// agent twice. Each run's process, inside the pod, calls the gateway by
// custody's Service name with its own token; the provider stand-in pod
// receives the real key, never a gateway token; a token copied inside the
// sandbox is refused once its run has exited.
func TestExecTwoRunsInSandboxPod(t *testing.T) {
	ctx := need(t)
	if err := env.CreateClaim(ctx, "exec2"); err != nil {
		t.Fatal(err)
	}
	pod, err := env.ClaimPod(ctx, "exec2")
	if err != nil {
		t.Fatal(err)
	}
	addrs, stop, err := dep.PortForward(ctx, pod, incluster.SandboxdGRPCPort, incluster.SandboxdRESTPort)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	gw := incluster.SandboxGatewayURL
	before, _, err := dep.ProviderSeen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var toks []string
	for i, run := range []string{"exec2-a", "exec2-b"} {
		r, err := fixture.ExecWith(ctx, dep.Bin, addrs[0], gw, dep.Custody, fixture.ExecRun{RunID: run, Agent: run, SandboxCAFile: incluster.SandboxCAFile}, "/probe", "-copy-token-to", "/workspace/"+run)
		if err != nil {
			t.Fatal(err)
		}
		if r.ExitCode != 0 || !strings.HasPrefix(r.Stdout, "401 ") || !strings.Contains(r.Stdout, "authentication_error") || fixture.FromGateway(strings.SplitN(r.Stdout, " ", 2)[1]) {
			t.Fatalf("run %d: exit %d stdout %q stderr %q; want the provider's 401 through the gateway", i+1, r.ExitCode, r.Stdout, r.Stderr)
		}
		got, err := fixture.Do(ctx, http.MethodGet, "http://"+addrs[1]+"/v1/files/"+run, "", nil)
		if err != nil || got.Status != http.StatusOK || len(got.Body) == 0 {
			t.Fatalf("read the copied token of %s: %v %v", run, got, err)
		}
		toks = append(toks, string(got.Body))
	}
	if toks[0] == toks[1] {
		t.Error("both runs got the same gateway token")
	}
	sums, auths, err := dep.ProviderSeen(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sums) != len(before)+2 {
		t.Fatalf("the provider saw %d new requests, want 2", len(sums)-len(before))
	}
	for i := len(before); i < len(sums); i++ {
		if sums[i] != sha256Hex(providerKey) || auths[i] {
			t.Errorf("request %d reached the provider without the real key (or with an Authorization header)", i)
		}
	}
	r, err := fixture.Do(ctx, http.MethodPost, dep.Custody.GatewayURL+"/anthropic/v1/messages", "",
		[]byte(`{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[]}`), "x-api-key", toks[0], "anthropic-version", "2023-06-01")
	if err != nil || r.Status != http.StatusUnauthorized || strings.TrimSpace(string(r.Body)) != "gateway token revoked" {
		t.Errorf("run 1's copied token after it exited = %v %v, want 401 gateway token revoked", r, err)
	}
}
