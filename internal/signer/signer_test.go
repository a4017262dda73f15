package signer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/verify"
)

// TestSeedFlow is the seed's scenario: register, Bash allowed, WebFetch to
// the metadata address denied with the built-in rule ids, export and
// verify open, idle close, verify closed, a call after close refused and
// recorded.
func TestSeedFlow(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)

	d, st := e.decide(agentTok, run, "c1", "Bash", `{"command":"ls -la"}`)
	if st != 200 || d.Effect != "allow" || !slices.Equal(d.RuleIDs, []string{"AGENTS-001"}) {
		t.Fatalf("decide Bash = %d %+v, want 200 allow [AGENTS-001]", st, d)
	}
	d, st = e.decide(agentTok, run, "c2", "WebFetch", `{"url":"http://169.254.169.254/latest/meta-data/"}`)
	want := []string{"CUSTODY-NET-METADATA", "CUSTODY-NET-INTERNAL", "AGENTS-002"}
	if st != 200 || d.Effect != "deny" || !slices.Equal(d.RuleIDs, want) {
		t.Fatalf("decide WebFetch = %d %+v, want deny %v", st, d, want)
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/complete", map[string]any{"call_id": "c1", "outcome": "ok"}, nil); st != 200 {
		t.Fatalf("complete = %d", st)
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/model-events", map[string]any{"event": "response", "model": "m", "input_tokens": 10}, nil); st != 200 {
		t.Fatalf("model-events = %d", st)
	}

	res, b := e.verify(run)
	if got := res.String(); got != "VERIFIED TO HEAD 4 (open)" {
		t.Fatalf("Verify = %q, want VERIFIED TO HEAD 4 (open)", got)
	}
	rec, _ := verify.ParseRecord(b.Records[0].Record)
	id := rec.Body["identity"].(map[string]any)
	if id["attested"] != true || id["service_account"] != "system:serviceaccount:agents:support-agent" ||
		id["pod_uid"] != "pod-uid-1" || id["sandbox_uid"] != "sb-uid-1" || id["claim_uid"] != "claim-uid-1" || id["session"] != "pod-1" {
		t.Errorf("run.registered identity = %v", id)
	}
	rec, _ = verify.ParseRecord(b.Records[1].Record)
	if _, ok := rec.Body["args"]; ok || rec.Body["args_commitment"] != d.ArgsCommitment && rec.Body["call_id"] == "c2" {
		t.Errorf("call.decided body = %v", rec.Body)
	}
	if len(b.Header.Policies) != 1 {
		t.Errorf("bundle policies = %d, want 1", len(b.Header.Policies))
	}

	// Idle close: nothing yet, then after idle_s.
	e.clock.Add(59 * time.Minute)
	if n, err := e.s.CloseIdle(context.Background()); err != nil || n != 0 {
		t.Fatalf("CloseIdle before idle = %d, %v", n, err)
	}
	e.clock.Add(2 * time.Minute)
	if n, err := e.s.CloseIdle(context.Background()); err != nil || n != 1 {
		t.Fatalf("CloseIdle = %d, %v, want 1", n, err)
	}
	res, b = e.verify(run)
	if res.String() != "VERIFIED" {
		t.Fatalf("Verify after idle close = %q", res)
	}
	last, _ := verify.ParseRecord(b.Records[len(b.Records)-1].Record)
	if last.Type != verify.TypeRunClosing || last.Body["reason"] != "idle_timeout" {
		t.Errorf("last record = %s %v", last.Type, last.Body)
	}

	// A call after close: 409 run_closed, recorded in _log.
	var eb map[string]any
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/decide", map[string]any{"call_id": "c3", "tool": "Bash", "args": map[string]any{}}, &eb); st != 409 || eb["error"] != "run_closed" {
		t.Fatalf("decide after close = %d %v, want 409 run_closed", st, eb)
	}
	logs := e.logRecords()
	if len(logs) != 1 || logs[0].Type != signer.TypeCallRefused || logs[0].Body["run"] != run || logs[0].Body["operation"] != "decide" {
		t.Fatalf("_log = %+v, want one call.refused for %s", logs, run)
	}
	var info signer.RunInfo
	if st := e.call(e.api, agentTok, "GET", "/v1/signer/runs/"+run+"/status", nil, &info); st != 200 || !info.Closed || info.ClosedReason != "idle_timeout" || info.Records != 6 {
		t.Errorf("status = %d %+v", st, info)
	}
}

func TestIdleCloserGoroutine(t *testing.T) {
	e := newEnv(t, func(o *signer.Options) {
		o.Now = nil // real clock
		o.IdleTimeout = 150 * time.Millisecond
		o.IdleCheckInterval = 20 * time.Millisecond
	})
	run := e.register(agentTok)
	deadline := time.Now().Add(5 * time.Second)
	for {
		var info signer.RunInfo
		e.call(e.api, agentTok, "GET", "/v1/signer/runs/"+run+"/status", nil, &info)
		if info.Closed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("run not closed by the idle closer")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The idle closer commits the close, then signs the checkpoint that
	// covers it: a bundle exported in between verifies to the previous
	// head, still open. Wait for the covering checkpoint (bounded).
	for {
		res, _ := e.verify(run)
		if res.String() == "VERIFIED" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Verify = %q, want VERIFIED once the idle closer signed its checkpoint", res)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestOwnership(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	for _, tok := range []string{"agents/other-agent/pod-9", "other-ns/support-agent/pod-1"} {
		var eb map[string]any
		if st := e.call(e.api, tok, "POST", "/v1/signer/runs/"+run+"/decide", map[string]any{"call_id": "x", "tool": "Bash"}, &eb); st != 403 || eb["error"] != "forbidden" {
			t.Errorf("decide by %s = %d %v, want 403 forbidden", tok, st, eb)
		}
		if st := e.call(e.api, tok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 403 {
			t.Errorf("close by %s = %d, want 403", tok, st)
		}
	}
	// Another pod of the same claim may continue the run.
	if _, st := e.decide("agents/support-agent/pod-2", run, "c1", "Bash", `{}`); st != 200 {
		t.Errorf("decide by a new pod of the same agent = %d, want 200", st)
	}
	if st := e.call(e.api, "", "POST", "/v1/signer/runs", nil, nil); st != 401 {
		t.Errorf("register without key = %d, want 401", st)
	}
	if st := e.call(e.api, agentTok, "GET", "/v1/signer/runs/nope/status", nil, nil); st != 404 {
		t.Errorf("status of unknown run = %d, want 404", st)
	}
	if _, st := e.decide(agentTok, run, "c1", "Bash", `{}`); st != 409 {
		t.Errorf("duplicate call id = %d, want 409", st)
	}
	if res, _ := e.verify(run); res.String() != "VERIFIED TO HEAD 1 (open)" {
		t.Errorf("Verify = %q", res)
	}
}

func TestApprovals(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	args := `{"env":"prod","version":"1.2.3"}`
	d, _ := e.decide(agentTok, run, "c1", "Deploy", args)
	if d.Effect != "ask" {
		t.Fatalf("decide Deploy = %+v, want ask", d)
	}
	p := "/v1/signer/runs/" + run + "/approvals"
	var eb map[string]any
	// The approval must be for the decided call's exact args.
	if st := e.call(e.api, agentTok, "POST", p, map[string]any{"call_id": "c1", "tool": "Deploy", "args": map[string]any{"env": "dev"}}, &eb); st != 409 || eb["error"] != "not_ask" {
		t.Fatalf("request with other args = %d %v, want 409 not_ask", st, eb)
	}
	var ap signer.ApprovalInfo
	if st := e.call(e.api, agentTok, "POST", p, map[string]any{"call_id": "c1", "tool": "Deploy", "args": map[string]any{"version": "1.2.3", "env": "prod"}}, &ap); st != 201 || ap.State != "pending" {
		t.Fatalf("request approval = %d %+v", st, ap)
	}
	// Consume while pending is refused.
	if st := e.call(e.api, agentTok, "POST", p+"/"+ap.ID+"/consume", map[string]any{"args": map[string]any{"env": "prod", "version": "1.2.3"}}, &eb); st != 409 || eb["error"] != "approval_pending" {
		t.Fatalf("consume pending = %d %v", st, eb)
	}
	// The idle clock is paused while the approval is pending.
	e.clock.Add(50 * time.Minute)
	if n, _ := e.s.CloseIdle(context.Background()); n != 0 {
		t.Fatalf("CloseIdle with a pending approval closed %d runs", n)
	}
	// Long poll: approved while waiting.
	var wg sync.WaitGroup
	var waited signer.ApprovalInfo
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.call(e.api, agentTok, "GET", p+"/"+ap.ID+"?wait=10s", nil, &waited)
	}()
	time.Sleep(50 * time.Millisecond)
	var resolved signer.ApprovalInfo
	if st := e.call(e.admin, "", "POST", "/v1/signer/approvals/"+ap.ID+"/approve", nil, &resolved); st != 200 || resolved.State != "approved" {
		t.Fatalf("approve = %d %+v", st, resolved)
	}
	wg.Wait()
	if waited.State != "approved" {
		t.Fatalf("long poll = %+v, want approved", waited)
	}
	// Other args: refused. Right args: consumed once. Twice: refused.
	if st := e.call(e.api, agentTok, "POST", p+"/"+ap.ID+"/consume", map[string]any{"args": map[string]any{"env": "prod", "version": "6.6.6"}}, &eb); st != 409 || eb["error"] != "args_mismatch" {
		t.Fatalf("consume with other args = %d %v", st, eb)
	}
	var c signer.ApprovalInfo
	if st := e.call(e.api, agentTok, "POST", p+"/"+ap.ID+"/consume", map[string]any{"args": map[string]any{"version": "1.2.3", "env": "prod"}}, &c); st != 200 || c.State != "consumed" {
		t.Fatalf("consume = %d %+v", st, c)
	}
	if st := e.call(e.api, agentTok, "POST", p+"/"+ap.ID+"/consume", map[string]any{"args": map[string]any{"version": "1.2.3", "env": "prod"}}, &eb); st != 409 || eb["error"] != "approval_consumed" {
		t.Fatalf("consume twice = %d %v", st, eb)
	}
	// Expired: approving late and consuming late are refused.
	d, _ = e.decide(agentTok, run, "c2", "Deploy", args)
	var ap2 signer.ApprovalInfo
	e.call(e.api, agentTok, "POST", p, map[string]any{"call_id": "c2", "tool": "Deploy", "args": map[string]any{"env": "prod", "version": "1.2.3"}}, &ap2)
	var ap3 signer.ApprovalInfo
	e.call(e.admin, "", "POST", "/v1/signer/approvals/"+ap2.ID+"/approve", nil, &ap3)
	e.clock.Add(61 * time.Minute)
	if st := e.call(e.api, agentTok, "POST", p+"/"+ap2.ID+"/consume", map[string]any{"args": map[string]any{"env": "prod", "version": "1.2.3"}}, &eb); st != 410 || eb["error"] != "approval_expired" {
		t.Fatalf("consume late = %d %v", st, eb)
	}
	d, _ = e.decide(agentTok, run, "c3", "Deploy", args)
	var ap4 signer.ApprovalInfo
	e.call(e.api, agentTok, "POST", p, map[string]any{"call_id": "c3", "tool": "Deploy", "args": map[string]any{"env": "prod", "version": "1.2.3"}}, &ap4)
	e.clock.Add(61 * time.Minute)
	if st := e.call(e.admin, "", "POST", "/v1/signer/approvals/"+ap4.ID+"/approve", nil, &eb); st != 410 {
		t.Fatalf("approve late = %d %v", st, eb)
	}
	var got signer.ApprovalInfo
	if st := e.call(e.api, agentTok, "GET", p+"/"+ap4.ID+"?wait=0s", nil, &got); st != 200 || got.State != "expired" {
		t.Fatalf("status of expired approval = %d %+v", st, got)
	}

	res, b := e.verify(run)
	var refused []string
	for _, raw := range bundleRecords(b) {
		r, _ := verify.ParseRecord(raw)
		if r.Type == signer.TypeApprovalRefused {
			refused = append(refused, r.Body["reason"].(string))
		}
	}
	wantRefused := []string{"not_ask", "approval_pending", "args_mismatch", "approval_consumed", "approval_expired"}
	if !slices.Equal(refused, wantRefused) {
		t.Errorf("approval.refused reasons = %v, want %v", refused, wantRefused)
	}
	if !slices.Contains(types(t, bundleRecords(b)), verify.TypeApprovalConsumed) {
		t.Errorf("no approval.consumed record")
	}
	if res.Closed {
		t.Errorf("run closed: %v", res)
	}
	// The consumed approval's args commitment opens with the revealed salt.
	for _, br := range b.Records {
		r, _ := verify.ParseRecord(br.Record)
		if r.Type != verify.TypeApprovalConsumed {
			continue
		}
		salt, err := e.s.RevealSalt(context.Background(), r.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := verify.VerifyArgsReveal(r.Body["args_commitment"].(string), salt, []byte(args)); err != nil {
			t.Errorf("VerifyArgsReveal = %v", err)
		}
	}
}

func TestConcurrentDecides(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	const workers, per = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers*per)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				_, err := e.s.Decide(context.Background(), identity(), run, signer.DecideRequest{
					CallID: fmt.Sprintf("w%d-%d", w, i), Tool: "Bash", Args: []byte(`{"command":"true"}`)})
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res, _ := e.verify(run)
	if res.Records != 1+workers*per || res.String() != fmt.Sprintf("VERIFIED TO HEAD %d (open)", workers*per) {
		t.Fatalf("Verify = %+v", res)
	}
}

func TestDurability(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	e.decide(agentTok, run, "c1", "Bash", `{}`)
	other := e.register("agents/other/pod-7")
	e.close()
	e.open()
	if cp, _ := e.db.LatestCheckpoint(context.Background()); cp.Size != 3 {
		t.Fatalf("checkpoint after Close = %d, want 3", cp.Size)
	}
	var info signer.RunInfo
	if st := e.call(e.api, agentTok, "GET", "/v1/signer/runs/"+run+"/status", nil, &info); st != 200 || info.Records != 2 || info.Closed {
		t.Fatalf("status after reopen = %d %+v", st, info)
	}
	if _, st := e.decide(agentTok, run, "c1", "Bash", `{}`); st != 409 {
		t.Errorf("duplicate call id after reopen = %d, want 409", st)
	}
	if _, st := e.decide(agentTok, run, "c2", "Bash", `{}`); st != 200 {
		t.Fatalf("decide after reopen = %d", st)
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 200 {
		t.Fatalf("close = %d", st)
	}
	if res, _ := e.verify(run); res.String() != "VERIFIED" || res.Records != 4 || res.TreeSize != 5 {
		t.Fatalf("Verify after reopen = %+v", res)
	}
	if res, _ := e.verify(other); res.String() != "VERIFIED TO HEAD 0 (open)" {
		t.Fatalf("Verify other = %+v", res)
	}
	if cp, _ := e.db.LatestCheckpoint(context.Background()); cp.Size != 5 {
		t.Fatalf("checkpoint = %d, want 5", cp.Size)
	}
}

func TestWitnessCosigns(t *testing.T) {
	w := newFakeWitness(t, "w1.example")
	e := newEnv(t, func(o *signer.Options) {
		o.Witnesses = []signer.Witness{w}
		o.TrustedWitnesses = []verify.TrustedWitness{{Name: "w1.example", VKey: w.vkey}}
		o.WitnessQuorum = 1
	})
	run := e.register(agentTok)
	e.decide(agentTok, run, "c1", "Bash", `{}`)
	res, _ := e.verify(run)
	if len(res.Witnesses) != 1 {
		t.Fatalf("Verify = %+v, want one witness", res)
	}
	e.decide(agentTok, run, "c2", "Bash", `{}`)
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 200 {
		t.Fatal(st)
	}
	if res, _ := e.verify(run); res.String() != "VERIFIED" || res.TreeSize != 4 {
		t.Fatalf("Verify = %+v", res)
	}
	// Restart: the witness holds 4, the signer starts from 0 and catches up.
	e.close()
	e.open()
	run2 := e.register(agentTok)
	if res, _ := e.verify(run2); len(res.Witnesses) != 1 || res.TreeSize != 5 {
		t.Fatalf("Verify after restart = %+v", res)
	}
}

func TestRollbackDetected(t *testing.T) {
	e := newEnv(t, nil)
	run := e.register(agentTok)
	e.close()
	w := newFakeWitness(t, "w1.example")
	w.forced = 1000
	e.opts.Witnesses = []signer.Witness{w}
	e.open()
	if !e.s.RollbackDetected() {
		t.Fatal("RollbackDetected = false after a witness reported size 1000")
	}
	var eb map[string]any
	if _, st := e.decide(agentTok, run, "c1", "Bash", `{}`); st != 503 {
		t.Fatalf("decide during rollback = %d, want 503", st)
	}
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs", nil, &eb); st != 503 || eb["error"] != "log_rollback" {
		t.Fatalf("register during rollback = %d %v, want 503 log_rollback", st, eb)
	}
	logs := e.logRecords()
	if len(logs) != 1 || logs[0].Type != verify.TypeRollbackDetected || logs[0].Body["witness_size"] != int64(1000) {
		t.Fatalf("_log = %+v", logs)
	}
	// The refusal survives a restart (without the witness).
	e.close()
	e.opts.Witnesses = nil
	e.open()
	if _, err := e.s.Register(context.Background(), identity()); !errors.Is(err, signer.ErrLogRollback) {
		t.Fatalf("Register after restart = %v, want ErrLogRollback", err)
	}
	if st := e.call(e.admin, "", "POST", "/v1/signer/log/rollback/acknowledge", nil, nil); st != 204 {
		t.Fatalf("acknowledge = %d", st)
	}
	if _, st := e.decide(agentTok, run, "c1", "Bash", `{}`); st != 200 {
		t.Fatalf("decide after acknowledge = %d", st)
	}
	// The acknowledgement survives a restart too.
	e.close()
	e.open()
	if _, st := e.decide(agentTok, run, "c2", "Bash", `{}`); st != 200 {
		t.Fatalf("decide after acknowledge and restart = %d, want 200", st)
	}
}

// TestApprovalTTL: Options.ApprovalTTL sets when an approval expires, and
// a TTL out of [MinApprovalTTL, MaxApprovalTTL] is refused by New.
func TestApprovalTTL(t *testing.T) {
	e := newEnv(t, func(o *signer.Options) { o.ApprovalTTL = 2 * time.Minute })
	run := e.register(agentTok)
	if d, _ := e.decide(agentTok, run, "c1", "Deploy", `{}`); d.Effect != "ask" {
		t.Fatalf("decide Deploy = %+v, want ask", d)
	}
	var ap signer.ApprovalInfo
	if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/approvals", map[string]any{"call_id": "c1", "tool": "Deploy", "args": map[string]any{}}, &ap); st != 201 {
		t.Fatalf("request approval = %d", st)
	}
	if want := e.clock.Now().Add(2 * time.Minute); !ap.ExpiresAt.Equal(want) {
		t.Errorf("approval expires_at = %v, want %v (ApprovalTTL 2m)", ap.ExpiresAt, want)
	}
	e.clock.Add(2*time.Minute + time.Millisecond)
	var eb map[string]any
	if st := e.call(e.admin, "", "POST", "/v1/signer/approvals/"+ap.ID+"/approve", nil, &eb); st != 410 || eb["error"] != "approval_expired" {
		t.Errorf("approve after the TTL = %d %v, want 410 approval_expired", st, eb)
	}
	for _, ttl := range []time.Duration{-time.Second, time.Millisecond, signer.MaxApprovalTTL + time.Second} {
		opts := e.opts
		opts.ApprovalTTL = ttl
		if s, err := signer.New(context.Background(), opts); err == nil {
			s.Close()
			t.Errorf("New(ApprovalTTL %v) succeeded", ttl)
		}
	}
}
