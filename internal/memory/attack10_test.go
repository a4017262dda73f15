package memory_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/memory"
)

// TestAttack10StateValuesAgree: HTTP PUT and the state_put tool accept
// the same state values. HTTP checked a value with encoding/json's
// json.Valid only, so it stored what state_put refuses and what other
// readers cannot read as written: invalid UTF-8 (state_get sent U+FFFD
// in its place; the Python SDK's decode fails), an unpaired surrogate
// escape, a member named twice (readers take the first or the last),
// 1e400 (the MCP SDKs read numbers as doubles: state_put refused it and a
// Go MCP client could not read state_get or state_lease), and nesting
// 9999 deep (state_lease over MCP granted the lease, then its result
// could not be sent or read).
func TestAttack10StateValuesAgree(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	key := e.key("agents", "run-1", "pod-a")
	if r := e.do("POST", base+"/state/plan/lease", key, ""); r.status != 200 {
		t.Fatalf("lease = %d %s", r.status, r.raw)
	}
	cs, err := e.connect(ctx, key)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		name, value string
		ok          bool
		// noMCP: the Go MCP client cannot send it (nor read a result
		// carrying it).
		noMCP bool
	}{
		{"duplicate member", `{"a":1,"a":2}`, false, false},
		{"nested duplicate member", `[{"b":{"a":1,"a":2}}]`, false, false},
		{"unpaired surrogate", `"\ud800"`, false, false},
		{"invalid UTF-8", "\"\xff\"", false, false},
		{"number over float64", `1e400`, false, true},
		{"negative number over float64", `[-2e308]`, false, true},
		{"nested 101", nest(101), false, false},
		{"nested 9999", nest(9999), false, true},
		{"nested 100", nest(100), true, false},
		{"precision beyond float64", `12345678901234567890.12345678901234567890`, true, false},
		{"largest float64", `1.7976931348623157e308`, true, false},
		{"underflow", `1e-400`, true, false},
		{"surrogate pair", `"\ud83d\ude00"`, true, false},
		{"NUL escape", `{"a":"\u0000"}`, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do("PUT", base+"/state/plan", key, tc.value, "Lease-Epoch: 1", "If-Match: *")
			if tc.ok && r.status != http.StatusOK || !tc.ok && (r.status != http.StatusBadRequest || r.str("error") != "bad_request") {
				t.Errorf("PUT %.40q = %d %.200s, want ok %v (400 bad_request if not)", tc.value, r.status, r.raw, tc.ok)
			}
			if tc.noMCP {
				return
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "state_put",
				Arguments: json.RawMessage(`{"name":"plan","epoch":1,"if_match":"*","state":` + tc.value + `}`)})
			if err != nil {
				t.Fatalf("state_put: %v", err)
			}
			if res.IsError == tc.ok {
				t.Errorf("state_put(%.40q) IsError = %v, want %v", tc.value, res.IsError, !tc.ok)
			}
		})
	}
}

// TestAttack10MCPIfMatchNullRequired: state_put with "if_match": null is
// refused as HTTP refuses a PUT without If-Match (precondition_required).
// json.Unmarshal of null into an int64 leaves it 0 without an error, so
// null was read as version 0: a write with no precondition stated was
// taken as "never written" and stored.
func TestAttack10MCPIfMatchNullRequired(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	cs, err := e.connect(ctx, e.key("agents", "run-1", "pod-a"))
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	var g memory.Grant
	if msg := call(t, cs, "state_lease", map[string]any{"name": "plan"}, &g); msg != "" {
		t.Fatalf("state_lease: %s", msg)
	}
	msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": g.Epoch, "if_match": nil, "state": 1}, nil)
	if msg == "" || errorCode(t, msg) != "precondition_required" {
		t.Errorf("state_put(if_match null) = %q, want precondition_required", msg)
	}
	if st, err := e.db.GetWorkingState(ctx, memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan"); err != nil || st.Version != 0 {
		t.Errorf("after state_put(if_match null): %+v, %v, want version 0", st, err)
	}
}

// TestAttack10LeaseEdges: held. Lease TTLs of 0 (the default), negative,
// over the maximum and overflowing a Duration are handled alike over HTTP
// and MCP; another session can neither release nor renew the lease; a
// release and re-acquire by the same holder gives the next epoch and
// fences the old one; and a clock that moves back after a takeover does
// not let the old holder write again (fencing is by epoch and holder,
// never by time alone).
func TestAttack10LeaseEdges(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	a := e.key("agents", "run-1", "pod-a")
	b := e.key("agents", "run-1", "pod-b")
	cs, err := e.connect(ctx, a)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	for _, ttl := range []string{"-1", "3601", "9223372036854775807", "9223372036854775808", "1.5", `"60"`} {
		if r := e.do("POST", base+"/state/ttl/lease", a, `{"ttl_seconds":`+ttl+`}`); r.status != http.StatusBadRequest {
			t.Errorf("lease(ttl_seconds %s) = %d %s, want 400", ttl, r.status, r.raw)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "state_lease", Arguments: json.RawMessage(`{"name":"ttl","ttl_seconds":` + ttl + `}`)})
		if err != nil || !res.IsError {
			t.Errorf("state_lease(ttl_seconds %s) = %v, %v; want refused", ttl, res, err)
		}
	}
	r := e.do("POST", base+"/state/plan/lease", a, `{"ttl_seconds":0}`)
	if r.status != 200 || r.num("epoch") != 1 || r.str("expires_at") != "2026-10-12T09:05:00Z" {
		t.Fatalf("lease(ttl_seconds 0) = %d %s, want epoch 1 for the default 5 minutes", r.status, r.raw)
	}
	// Another session cannot release or renew it.
	if r := e.do("DELETE", base+"/state/plan/lease", b, "", "Lease-Epoch: 1"); r.status != 409 || r.str("error") != "lease_lost" {
		t.Errorf("release(pod-b, epoch 1) = %d %s, want 409 lease_lost", r.status, r.raw)
	}
	if r := e.do("POST", base+"/state/plan/lease", b, ""); r.status != 409 || r.str("error") != "lease_held" {
		t.Errorf("lease(pod-b) = %d %s, want 409 lease_held", r.status, r.raw)
	}
	// Release and re-acquire: epoch 2; epoch 1 is fenced.
	if r := e.do("DELETE", base+"/state/plan/lease", a, "", "Lease-Epoch: 1"); r.status != 204 {
		t.Fatalf("release(pod-a) = %d %s", r.status, r.raw)
	}
	if r := e.do("POST", base+"/state/plan/lease", a, ""); r.status != 200 || r.num("epoch") != 2 {
		t.Fatalf("re-lease(pod-a) = %d %s, want epoch 2", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/plan", a, `1`, "Lease-Epoch: 1", "If-Match: *"); r.status != 409 || r.str("error") != "lease_lost" {
		t.Errorf("put(epoch 1 after re-lease) = %d %s, want 409 lease_lost", r.status, r.raw)
	}
	// pod-b takes it over after expiry; the clock then moves back an hour.
	e.clock.Advance(6 * time.Minute)
	if r := e.do("POST", base+"/state/plan/lease", b, ""); r.status != 200 || r.num("epoch") != 3 {
		t.Fatalf("lease(pod-b after expiry) = %d %s, want epoch 3", r.status, r.raw)
	}
	e.clock.Advance(-time.Hour)
	for _, epoch := range []string{"2", "3"} {
		if r := e.do("PUT", base+"/state/plan", a, `2`, "Lease-Epoch: "+epoch, "If-Match: *"); r.status != 409 || r.str("error") != "lease_lost" {
			t.Errorf("put(pod-a, epoch %s, clock moved back) = %d %s, want 409 lease_lost", epoch, r.status, r.raw)
		}
	}
	if r := e.do("POST", base+"/state/plan/lease", a, ""); r.status != 409 || r.str("error") != "lease_held" {
		t.Errorf("lease(pod-a, clock moved back) = %d %s, want 409 lease_held", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/plan", b, `3`, "Lease-Epoch: 3", "If-Match: 0"); r.status != 200 {
		t.Errorf("put(pod-b, epoch 3) = %d %s, want 200", r.status, r.raw)
	}
}

// TestAttack10GoneHolderLeasesAgain: HolderAlive was asked only about a
// lease's current holder, never about the caller. A pod that HolderAlive
// reports gone (deleted, or terminating in its grace period) keeps a
// working key until the key expires (15 minutes by default); once its
// successor released the slot (or let the lease lapse), the gone pod got
// the next epoch and overwrote what the successor wrote. It must be
// refused 403 holder_gone.
func TestAttack10GoneHolderLeasesAgain(t *testing.T) {
	e := newEnv(t, memory.Options{})
	a := e.key("agents", "run-1", "pod-a")
	b := e.key("agents", "run-1", "pod-b")
	if r := e.do("POST", base+"/state/plan/lease", a, ""); r.status != 200 {
		t.Fatalf("lease(pod-a) = %d %s", r.status, r.raw)
	}
	e.setGone("pod-a")
	if r := e.do("POST", base+"/state/plan/lease", b, ""); r.status != 200 || r.num("epoch") != 2 {
		t.Fatalf("lease(pod-b) = %d %s, want the takeover at epoch 2", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/plan", b, `"successor"`, "Lease-Epoch: 2", "If-Match: 0"); r.status != 200 {
		t.Fatalf("put(pod-b) = %d %s", r.status, r.raw)
	}
	if r := e.do("DELETE", base+"/state/plan/lease", b, "", "Lease-Epoch: 2"); r.status != 204 {
		t.Fatalf("release(pod-b) = %d %s", r.status, r.raw)
	}
	r := e.do("POST", base+"/state/plan/lease", a, "")
	if r.status == 200 {
		w := e.do("PUT", base+"/state/plan", a, `"zombie"`, "Lease-Epoch: 3", "If-Match: *")
		t.Errorf("lease(pod-a, gone) = 200 epoch %d, then put = %d: a gone pod overwrote its successor's state", r.num("epoch"), w.status)
	} else if r.status != 403 || r.str("error") != "holder_gone" {
		t.Errorf("lease(pod-a, gone) = %d %s, want 403 holder_gone", r.status, r.raw)
	}
	if st, err := e.db.GetWorkingState(context.Background(), memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan"); err != nil ||
		string(st.Value) != `"successor"` || st.Lease != nil {
		t.Errorf("state after the gone pod's lease = %+v, %v; want the successor's value, no lease", st, err)
	}
	// The successor (alive) leases again.
	if r := e.do("POST", base+"/state/plan/lease", b, ""); r.status != 200 || r.num("epoch") != 3 {
		t.Errorf("lease(pod-b) = %d %s, want epoch 3", r.status, r.raw)
	}
}
