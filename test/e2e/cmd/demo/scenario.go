package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentcustody/custody/test/e2e/fixture"
	"github.com/agentcustody/custody/test/e2e/incluster"
	"github.com/agentcustody/custody/test/e2e/netcheck"
)

// scenario runs the seed's checks and counts the outcomes.
type scenario struct {
	env                     *fixture.Env
	url                     string
	passed, failed, skipped int
	// deploy is custody in the cluster on a real node; nil on the
	// stand-in, where skipWhy says why checks 5 and G2 cannot run.
	deploy  *incluster.Deployment
	skipWhy string
	// net is check 5's probe report, reused by G2 and M5; nil if it did
	// not run.
	net *netcheck.Report
	// mcpCalls reads the upstream MCP server's own call log.
	mcpCalls func(ctx context.Context) ([]string, error)
}

// providerSeen reports what the provider stand-in received: SHA-256 (hex)
// of each x-api-key and whether Authorization was sent.
type providerSeen func(context.Context) (keySHA256 []string, auth []bool, err error)

// all runs the three sections and prints the summary; logTail is shown
// on a FAIL.
// providerURL is the provider stand-in as a process in the sandbox would
// dial it directly (an internal address).
func (s *scenario) all(ctx context.Context, c *fixture.Custody, bin, dir string, seen providerSeen, providerDesc, providerURL string, logTail func() string) int {
	s.run(ctx)
	fmt.Println()
	fmt.Println("== model gateway: per-execution tokens through sandboxd, revoked at exit")
	g := &gatewayScenario{scenario: s, env: s.env, custody: c, custodyBin: bin, seen: seen, providerDesc: providerDesc, providerURL: providerURL, dir: dir}
	g.run(ctx)
	fmt.Println()
	fmt.Println("== brokered git: the real git client, a token scoped to repositories, the credential held by custody")
	(&gitScenario{scenario: s, bin: bin, dir: dir}).run(ctx)
	fmt.Println()
	fmt.Println("== MCP through custody: every tools/call a signer decision before it reaches the upstream")
	ms := &mcpScenario{scenario: s, custody: c, custodyBin: bin, dir: dir, calls: s.mcpCalls}
	ms.run(ctx)
	fmt.Println()
	fmt.Printf("== signer: decisions and a signed record that survives the Sandbox (idle_s = %v here)\n", demoIdle)
	sg := &signerScenario{scenario: s, env: s.env, custody: c, custodyBin: bin, dir: dir}
	sg.run(ctx)
	s.summary()
	if s.failed > 0 {
		fmt.Printf("custody log, last lines:\n%s\n", logTail())
		return 1
	}
	return 0
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (s *scenario) pass(id, what string, r fixture.Response) {
	s.passed++
	fmt.Printf("PASS %-3s %s: %s\n", id, what, r)
}

func (s *scenario) fail(id, what string, r fixture.Response, why string) {
	s.failed++
	fmt.Printf("FAIL %-3s %s: %s (%s)\n", id, what, r, why)
}

func (s *scenario) failErr(id, what string, err error) {
	s.failed++
	fmt.Printf("FAIL %-3s %s: %v\n", id, what, err)
}

// check prints PASS if ok, FAIL otherwise, and returns ok.
func (s *scenario) check(id, what string, r fixture.Response, err error, ok bool, why string) bool {
	switch {
	case err != nil:
		s.failErr(id, what, err)
		return false
	case ok:
		s.pass(id, what, r)
		return true
	default:
		s.fail(id, what, r, why)
		return false
	}
}

type keyResp struct {
	Key, Tenant, Agent, Session string
}

func errorCode(r fixture.Response) string {
	var b struct{ Error string }
	_ = r.JSON(&b)
	return b.Error
}

// exchange mints the pod's bound token (what the kubelet projects) and
// exchanges it.
func (s *scenario) exchange(ctx context.Context, pod *corev1.Pod) (fixture.Response, keyResp, error) {
	tok, err := s.env.PodToken(ctx, pod, fixture.Audience)
	if err != nil {
		return fixture.Response{}, keyResp{}, err
	}
	r, err := fixture.Exchange(ctx, s.url, tok)
	var k keyResp
	if err == nil && r.Status == http.StatusOK {
		err = r.JSON(&k)
	}
	return redactKey(r), k, err
}

// redactKey hides the secret key in printed bodies.
func redactKey(r fixture.Response) fixture.Response {
	var m map[string]any
	if r.Status != http.StatusOK || json.Unmarshal(r.Body, &m) != nil {
		return r
	}
	if k, ok := m["key"].(string); ok && len(k) > 8 {
		m["key"] = k[:8] + "…(redacted)"
		r.Body, _ = json.Marshal(m)
	}
	return r
}

func (s *scenario) mem(tenant, agent, path string) string {
	return s.url + "/v1/memory/" + tenant + "/" + agent + path
}

func (s *scenario) run(ctx context.Context) {
	// 1. A pod still in the warm pool is refused; the same pod gets a key
	// once claim run-1 takes it.
	warm, err := s.env.WarmPoolPod(ctx)
	if err != nil {
		s.failErr("1a", "warm-pool pod", err)
		return
	}
	r, _, err := s.exchange(ctx, warm)
	s.check("1a", "warm-pool pod "+warm.Name+" asks for a key", r, err,
		r.Status == http.StatusUnauthorized && errorCode(r) == "warm_pool", "want 401 warm_pool")
	if s.deploy != nil {
		// The pod's own agent process must have been refused too before
		// the claim adopts the pod (check 1c reads its log).
		s.agentLog(ctx, warm, "exchange 401 warm_pool")
	}
	if err := s.env.CreateClaim(ctx, "run-1"); err != nil {
		s.failErr("1b", "create claim run-1", err)
		return
	}
	pod1, err := s.env.ClaimPod(ctx, "run-1")
	if err != nil {
		s.failErr("1b", "claim run-1", err)
		return
	}
	r, k1, err := s.exchange(ctx, pod1)
	s.check("1b", "claim run-1 took the same pod "+pod1.Name+"; it asks again", r, err,
		pod1.UID == warm.UID && r.Status == http.StatusOK && k1.Agent == "run-1",
		"want 200 for the same pod, agent run-1")
	if s.deploy != nil {
		s.agentProcess(ctx, pod1)
	}
	if k1.Key == "" {
		return
	}

	// 2. run-1 gets a key for agents:run-1, remembers a preference twice
	// (stored once), saves working state.
	s.check("2a", "key is for agents:run-1", r, nil, k1.Tenant == "agents" && k1.Agent == "run-1" && k1.Session == pod1.Name, "want tenant agents, agent run-1")
	pref := map[string]any{"kind": "preference", "key": "editor", "text": "prefers vim keybindings"}
	r, err = fixture.Do(ctx, "POST", s.mem("agents", "run-1", "/memories"), k1.Key, pref)
	s.check("2b", "remember a preference", r, err, r.Status == http.StatusCreated, "want 201 created")
	r, err = fixture.Do(ctx, "POST", s.mem("agents", "run-1", "/memories"), k1.Key, pref)
	s.check("2c", "remember the same preference again", r, err, r.Status == http.StatusOK && jsonField(r, "status") == "unchanged", "want 200 unchanged")
	r, err = fixture.Do(ctx, "GET", s.mem("agents", "run-1", "/memories?q=vim"), k1.Key, nil)
	s.check("2d", "recall 'vim' finds it stored once", r, err, r.Status == http.StatusOK && countMemories(r) == 1, "want exactly 1 memory")
	r, err = fixture.Do(ctx, "POST", s.mem("agents", "run-1", "/state/task/lease"), k1.Key, nil)
	epoch := jsonInt(r, "epoch")
	s.check("2e", "take the lease on working state 'task'", r, err, r.Status == http.StatusOK && epoch > 0, "want 200 with an epoch")
	saved := []byte(`{"step":3,"todo":["write tests","ship"]}`)
	r, err = fixture.Do(ctx, "PUT", s.mem("agents", "run-1", "/state/task"), k1.Key, saved,
		"Lease-Epoch", fmt.Sprint(epoch), "If-Match", "0")
	s.check("2f", "save working state", r, err, r.Status == http.StatusOK, "want 200")

	// 3. The claim is deleted and created again; the new pod gets a key
	// for agents:run-1 and resumes the saved state. A token copied out of
	// the old pod is refused once the pod is gone.
	oldTok, err := s.env.PodToken(ctx, pod1, fixture.Audience)
	if err != nil {
		s.failErr("3a", "token of run-1's pod", err)
		return
	}
	if err := s.env.DeleteClaim(ctx, "run-1"); err != nil {
		s.failErr("3a", "delete claim run-1", err)
		return
	}
	if err := s.env.WaitPodGone(ctx, pod1); err != nil {
		s.failErr("3a", "old pod deleted", err)
		return
	}
	r, err = fixture.Exchange(ctx, s.url, oldTok)
	s.check("3a", "claim run-1 deleted; a copy of its pod's token asks for a key", r, err,
		r.Status == http.StatusUnauthorized, "want 401")
	if err := s.env.CreateClaim(ctx, "run-1"); err != nil {
		s.failErr("3b", "re-create claim run-1", err)
		return
	}
	pod1b, err := s.env.ClaimPod(ctx, "run-1")
	if err != nil {
		s.failErr("3b", "claim run-1 again", err)
		return
	}
	r, k1b, err := s.exchange(ctx, pod1b)
	s.check("3b", "new pod "+pod1b.Name+" of re-created run-1 asks for a key", r, err,
		r.Status == http.StatusOK && k1b.Tenant == "agents" && k1b.Agent == "run-1" && pod1b.UID != pod1.UID,
		"want 200 for agents:run-1 from a new pod")
	if k1b.Key != "" {
		r, err = fixture.Do(ctx, "POST", s.mem("agents", "run-1", "/state/task/lease"), k1b.Key, nil)
		s.check("3c", "new pod takes over the lease (old holder gone) and resumes", r, err,
			r.Status == http.StatusOK && jsonInt(r, "epoch") > epoch && sameJSON(jsonRaw(r, "state"), saved),
			"want 200 with a higher epoch and the saved state")
	}

	// 4. run-2 cannot read or resume agents:run-1.
	if err := s.env.CreateClaim(ctx, "run-2"); err != nil {
		s.failErr("4a", "create claim run-2", err)
		return
	}
	pod2, err := s.env.ClaimPod(ctx, "run-2")
	if err != nil {
		s.failErr("4a", "claim run-2", err)
		return
	}
	r, k2, err := s.exchange(ctx, pod2)
	s.check("4a", "claim run-2 gets a key for agents:run-2", r, err, r.Status == http.StatusOK && k2.Agent == "run-2", "want 200 agent run-2")
	if k2.Key != "" {
		r, err = fixture.Do(ctx, "GET", s.mem("agents", "run-1", "/memories"), k2.Key, nil)
		s.check("4b", "run-2 reads agents:run-1 memories", r, err, r.Status == http.StatusForbidden && errorCode(r) == "namespace_mismatch", "want 403 namespace_mismatch")
		r, err = fixture.Do(ctx, "POST", s.mem("agents", "run-1", "/state/task/lease"), k2.Key, nil)
		s.check("4c", "run-2 resumes agents:run-1 working state", r, err, r.Status == http.StatusForbidden && errorCode(r) == "namespace_mismatch", "want 403 namespace_mismatch")
	}

	// 5. The store is not reachable from the sandbox.
	if s.deploy == nil {
		s.skipped++
		fmt.Printf("SKIP 5   the store is not reachable from the sandbox: %s (pods do not run on the stand-in; deploy/base/sandbox/sandboxtemplate.yaml allows only cluster DNS, custody:8865/8866 and public egress)\n", s.skipWhy)
		return
	}
	s.storeCheck(ctx, pod2)
}
