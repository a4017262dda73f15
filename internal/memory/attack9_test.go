package memory_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

// TestAttack9MCPStatePutKeepsTheValue: a state written with the state_put
// tool is stored as the client sent it, as over HTTP. The MCP SDK checks
// the arguments by decoding them into map[string]any and encoding them
// again, which turned every number into a float64 (12345678901234567890
// became 12345678901234567000), sorted members and dropped duplicates.
func TestAttack9MCPStatePutKeepsTheValue(t *testing.T) {
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
	const value = `{"n":12345678901234567890,"z":[1.0,2e3,-0],"a":"x"}`
	if msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": g.Epoch, "if_match": 0, "state": json.RawMessage(value)}, nil); msg != "" {
		t.Fatalf("state_put: %s", msg)
	}
	st, err := e.db.GetWorkingState(ctx, memory.Namespace{Tenant: "agents", Agent: "run-1"}, "plan")
	if err != nil {
		t.Fatal(err)
	}
	if string(st.Value) != value {
		t.Errorf("stored state %s, want %s as sent", st.Value, value)
	}
}

// TestAttack9UnpairedSurrogateRefused: a text, key or tag with an
// unpaired surrogate escape (\ud800) was stored with U+FFFD in its place
// (encoding/json replaces it silently), over HTTP and MCP alike: a text
// other than the one sent, and two different keys that supersede each
// other. It must be refused with a clear error and nothing stored.
func TestAttack9UnpairedSurrogateRefused(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	for _, body := range []string{
		`{"kind":"fact","text":"a\ud800b"}`,
		`{"kind":"fact","key":"\udfff","text":"x"}`,
		`{"kind":"fact","text":"y","tags":["\ud83d"]}`,
		`{"kind":"fact","text":"\ude00\ud83d"}`,
	} {
		r := e.do("POST", base+"/memories", key, body)
		if r.status != http.StatusBadRequest || r.str("error") != "bad_request" {
			t.Errorf("POST %s = %d %s, want 400 bad_request", body, r.status, r.raw)
		}
	}
	cs, err := e.connect(context.Background(), key)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	msg := call(t, cs, "remember", map[string]any{"kind": "fact", "text": json.RawMessage(`"c\ud800d"`)}, nil)
	if msg == "" || errorCode(t, msg) != "bad_request" {
		t.Errorf("remember(c\\ud800d) = %q, want bad_request", msg)
	}
	if ms := e.memories("agents", "run-1"); len(ms) != 0 {
		t.Errorf("stored %+v, want nothing", ms)
	}
	// A surrogate pair is one character, kept.
	if r := e.do("POST", base+"/memories", key, `{"kind":"fact","text":"\ud83d\ude00"}`); r.status != http.StatusCreated {
		t.Errorf("POST pair = %d %s, want 201", r.status, r.raw)
	}
}

// TestAttack9MCPStateReadsTheValue: a state read with state_get,
// state_lease or state_put is the stored value, as over HTTP. The MCP SDK
// checks a tool's result against its output schema by decoding it into
// map[string]any and encoding it again, which turned 12345678901234567890
// into 12345678901234567000: an agent resuming over MCP read another
// state than the one written. (The text content is checked: the Go
// client decodes structured content into float64s itself.)
func TestAttack9MCPStateReadsTheValue(t *testing.T) {
	e := newEnv(t, memory.Options{})
	ctx := context.Background()
	key := e.key("agents", "run-1", "pod-a")
	const value = `{"n":12345678901234567890,"z":[1.0,2e3],"a":"x"}`
	if r := e.do("POST", base+"/state/plan/lease", key, ""); r.status != 200 {
		t.Fatalf("lease = %d %s", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/plan", key, value, "Lease-Epoch: 1", "If-Match: 0"); r.status != 200 {
		t.Fatalf("put = %d %s", r.status, r.raw)
	}
	cs, err := e.connect(ctx, key)
	if err != nil {
		t.Fatalf("Connect() = %v", err)
	}
	defer cs.Close()
	for _, tc := range []struct {
		tool string
		args map[string]any
	}{
		{"state_get", map[string]any{"name": "plan"}},
		{"state_lease", map[string]any{"name": "plan"}},
		{"state_put", map[string]any{"name": "plan", "epoch": 1, "if_match": "*", "state": json.RawMessage(value)}},
	} {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tc.tool, err, res)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		var out struct {
			State json.RawMessage `json:"state"`
		}
		if err := json.Unmarshal([]byte(text), &out); err != nil || string(out.State) != value {
			t.Errorf("%s result %s, want state %s", tc.tool, text, value)
		}
	}
}

// TestAttack9RecreatedPodIsFenced: held. A pod re-created under the same
// name (a new pod UID) takes the lease over from the old incarnation,
// whose still-valid key can then neither write (with its epoch or the new
// one), nor renew, nor release, over HTTP or MCP.
func TestAttack9RecreatedPodIsFenced(t *testing.T) {
	dead := map[string]bool{}
	var mu sync.Mutex
	e := newEnv(t, memory.Options{HolderAlive: func(_ context.Context, h apikey.Identity) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return !dead[h.PodUID], nil
	}})
	mint := func(uid string) string {
		m, err := e.keys.Mint(context.Background(), apikey.Identity{Tenant: "agents", Agent: "run-1", Session: "pod-a",
			Method: "kubernetes", PodUID: uid}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return m.Key
	}
	old, fresh := mint("uid-1"), mint("uid-2")
	if r := e.do("POST", base+"/state/plan/lease", old, ""); r.status != 200 || r.num("epoch") != 1 {
		t.Fatalf("lease(old) = %d %s", r.status, r.raw)
	}
	if r := e.do("PUT", base+"/state/plan", old, `{"v":1}`, "Lease-Epoch: 1", "If-Match: 0"); r.status != 200 {
		t.Fatalf("put(old) = %d %s", r.status, r.raw)
	}
	// The new incarnation is refused while the old one lives.
	if r := e.do("POST", base+"/state/plan/lease", fresh, ""); r.status != 409 || r.str("error") != "lease_held" {
		t.Fatalf("lease(fresh, old alive) = %d %s, want 409 lease_held", r.status, r.raw)
	}
	mu.Lock()
	dead["uid-1"] = true
	mu.Unlock()
	if r := e.do("POST", base+"/state/plan/lease", fresh, ""); r.status != 200 || r.num("epoch") != 2 {
		t.Fatalf("lease(fresh) = %d %s, want epoch 2", r.status, r.raw)
	}
	for _, epoch := range []string{"1", "2"} {
		if r := e.do("PUT", base+"/state/plan", old, `{"v":"stale"}`, "Lease-Epoch: "+epoch, "If-Match: *"); r.status != 409 || r.str("error") != "lease_lost" {
			t.Errorf("put(old, epoch %s) = %d %s, want 409 lease_lost", epoch, r.status, r.raw)
		}
		if r := e.do("DELETE", base+"/state/plan/lease", old, "", "Lease-Epoch: "+epoch); r.status != 409 {
			t.Errorf("release(old, epoch %s) = %d %s, want 409", epoch, r.status, r.raw)
		}
	}
	if r := e.do("POST", base+"/state/plan/lease", old, ""); r.status != 403 || r.str("error") != "holder_gone" {
		t.Errorf("lease(old) = %d %s, want 403 holder_gone (round 10: a gone pod is granted no lease)", r.status, r.raw)
	}
	cs, err := e.connect(context.Background(), old)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if msg := call(t, cs, "state_put", map[string]any{"name": "plan", "epoch": 2, "if_match": "*", "state": "stale"}, nil); msg == "" || errorCode(t, msg) != "lease_lost" {
		t.Errorf("state_put(old, epoch 2) = %q, want lease_lost", msg)
	}
	if r := e.do("PUT", base+"/state/plan", fresh, `{"v":2}`, "Lease-Epoch: 2", "If-Match: 1"); r.status != 200 {
		t.Errorf("put(fresh) = %d %s", r.status, r.raw)
	}
}

// TestAttack9MCPArgumentShapesRefused: held (with the memory tools Raw).
// Arguments the schema does not allow, another namespace spelled in
// another case, and duplicate members are refused, and nothing is stored.
func TestAttack9MCPArgumentShapesRefused(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	cs, err := e.connect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for name, args := range map[string]map[string]any{
		"no kind":         {"text": "x"},
		"kind a number":   {"kind": 5, "text": "x"},
		"unknown member":  {"kind": "fact", "text": "x", "extra": true},
		"Tenant":          {"kind": "fact", "text": "x", "Tenant": "other"},
		"AGENT":           {"kind": "fact", "text": "x", "AGENT": "run-2"},
		"tags not a list": {"kind": "fact", "text": "x", "tags": "a"},
		"17 tags":         {"kind": "fact", "text": "x", "tags": []string{"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17"}},
	} {
		if msg := call(t, cs, "remember", args, nil); msg == "" {
			t.Errorf("remember(%s) succeeded, want a refusal", name)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "remember",
		Arguments: json.RawMessage(`{"kind":"fact","text":"x","text":"y"}`)})
	if err != nil || !res.IsError {
		t.Errorf("remember(duplicate text) = %v %+v, want a refusal", err, res)
	}
	if ms := e.memories("agents", "run-1"); len(ms) != 0 {
		t.Errorf("stored %+v, want nothing", ms)
	}
	if r := e.do("POST", base+"/memories", key, `{"kind":"fact","text":"x","text":"y"}`); r.status != 400 {
		t.Errorf("POST duplicate text = %d %s, want 400", r.status, r.raw)
	}
}

// TestAttack9RecallTermsBoundedAsSearched: recall refused a query of more
// than 32 terms by counting its fields between white space, but the
// stores search the fields between white space or control characters
// (terms.Query), so "a\x01a\x01..." was one field here and up to 512
// OR'd terms there: one such recall over 100 memories of 16 KiB held a
// CPU for over two minutes in SQLite. It must be refused as the 33
// space-separated terms are, over HTTP and MCP.
func TestAttack9RecallTermsBoundedAsSearched(t *testing.T) {
	e := newEnv(t, memory.Options{})
	key := e.key("agents", "run-1", "pod-a")
	var q string
	for i := range 40 {
		q += fmt.Sprintf("a%d\x01", i)
	}
	q += "b"
	r := e.do("GET", base+"/memories?q="+url.QueryEscape(q), key, "")
	if r.status != http.StatusBadRequest || r.str("error") != "bad_request" {
		t.Errorf("GET memories?q=(41 terms between controls) = %d %s, want 400 bad_request", r.status, r.raw)
	}
	cs, err := e.connect(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if msg := call(t, cs, "recall", map[string]any{"query": q}, nil); msg == "" || errorCode(t, msg) != "bad_request" {
		t.Errorf("recall(41 terms between controls) = %q, want bad_request", msg)
	}
	// 32 terms, however separated, are searched.
	q = ""
	for i := range 31 {
		q += fmt.Sprintf("a%d", i) + []string{"\x01", " "}[i%2]
	}
	q += "b"
	if r := e.do("GET", base+"/memories?q="+url.QueryEscape(q), key, ""); r.status != http.StatusOK {
		t.Errorf("GET memories?q=(32 terms) = %d %s, want 200", r.status, r.raw)
	}
}

// TestAttack9RecallCostBounded: within the query limits a recall could
// still hold a CPU for seconds: over 100 memories of "a a a ..." (16
// KiB), the 24 phrases "a a-a ... a-a-...-a" took 6.2 s in SQLite (2,000
// such memories, the recall cap, twenty times that), and 32 times "a"
// 2.3 s (a repeated term is now searched once: terms.Query). A search
// running over RecallTimeout is stopped and refused (400), so a
// namespace's own memories cannot be made to tie up the server.
func TestAttack9RecallCostBounded(t *testing.T) {
	e := newEnv(t, memory.Options{RecallTimeout: time.Second})
	key := e.key("agents", "run-1", "pod-a")
	text := strings.Repeat("a ", 8000)
	for i := range 100 {
		body, _ := json.Marshal(map[string]any{"kind": "note", "text": fmt.Sprintf("%s%d", text, i)})
		if r := e.do("POST", base+"/memories", key, string(body)); r.status != http.StatusCreated {
			t.Fatalf("remember %d = %d %s", i, r.status, r.raw)
		}
	}
	if r := e.do("POST", base+"/memories", key, `{"kind":"note","text":"b"}`); r.status != http.StatusCreated {
		t.Fatalf("remember b = %d %s", r.status, r.raw)
	}
	var phrases []string
	for n := 1; n <= 24; n++ {
		phrases = append(phrases, strings.TrimSuffix(strings.Repeat("a-", n), "-"))
	}
	start := time.Now()
	r := e.do("GET", base+"/memories?q="+url.QueryEscape(strings.Join(phrases, " ")), key, "")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the recall took %v; the search was not stopped", d)
	}
	if r.status != http.StatusBadRequest || r.str("error") != "bad_request" {
		t.Errorf("phrases of a = %d %s, want 400 bad_request", r.status, r.raw)
	}
	if r := e.do("GET", base+"/memories?q=b", key, ""); r.status != http.StatusOK {
		t.Errorf("b = %d %s after the refusal, want 200", r.status, r.raw)
	}
}
