package gateway

import (
	"io"
	"net/http"
	"testing"
)

// What an agent can reach through the gateway that tooluse once missed
// (attack round 10), checked end to end: the Recorder's call holds the
// use. A Responses stream resumed after all of a use's events
// (starting_after) carries it only in response.completed; a Gemini
// stream whose upstream closes after its last "data:" line, with no
// blank line, is passed on with that line (the Gemini SDKs read it).
func TestAttack10RecorderSeesHiddenUses(t *testing.T) {
	for _, tc := range []struct {
		name, provider, method, path, ct, upstream, tool string
	}{
		{
			name: "responses stream resumed after the use", provider: "openai", method: "GET",
			path: "/openai/v1/responses/resp_1?stream=true&starting_after=9", ct: "text/event-stream",
			upstream: "event: response.completed\n" + `data: {"type":"response.completed","sequence_number":10,"response":{"id":"resp_1","object":"response","status":"completed","model":"gpt-5",` +
				`"output":[{"id":"fc_1","type":"function_call","status":"completed","arguments":"{\"repo\":\"x\"}","call_id":"call_1","name":"delete_repo"}],"usage":{"input_tokens":5,"output_tokens":7}}}` + "\n\n",
			tool: "delete_repo",
		},
		{
			name: "gemini stream without its last blank line", provider: "gemini", method: "POST",
			path: "/gemini/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", ct: "text/event-stream",
			upstream: `data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"rm","args":{"path":"/"}}}],"role":"model"},"finishReason":"STOP","index":0}],"modelVersion":"gemini-2.5-pro"}`,
			tool:     "rm",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &callLog{}
			e := newEnv(t, func(o *Options) { o.Recorder = log })
			e.up[tc.provider].setHandler(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.ct)
				io.WriteString(w, tc.upstream)
			})
			m := e.mint(t, Grant{Providers: []string{tc.provider}, RunID: "run-10", Tenant: "agents", Agent: "a1"})
			body := ""
			if tc.method == "POST" {
				body = `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`
			}
			code, _, got := e.do(t, tc.method, tc.path, bearer(m.Token), body)
			if code != 200 || got != tc.upstream {
				t.Fatalf("%s %s = %d %q, want 200 and the upstream's body", tc.method, tc.path, code, got)
			}
			calls := log.all()
			if len(calls) != 1 {
				t.Fatalf("recorded %d calls, want 1", len(calls))
			}
			res := calls[0].Response
			if len(res.Uses) != 1 || res.Uses[0].Name != tc.tool || res.Uses[0].Malformed {
				t.Fatalf("recorded response = %+v, want the use of %s", res, tc.tool)
			}
		})
	}
}
