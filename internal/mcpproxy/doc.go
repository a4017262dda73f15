// Package mcpproxy is custody's MCP proxy: operators declare upstream MCP
// servers per tenant, sandboxes reach them only through custody, and
// every tools/call is decided by the signer before anything reaches the
// upstream, and recorded.
//
// # Routes
//
// [Proxy.Handler] serves, on the API listener, one streamable-HTTP MCP
// endpoint (sessions, SSE or JSON responses) per upstream:
//
//	/mcp/servers/{name}    POST, GET, DELETE (MCP streamable HTTP)
//
// Every request must carry the sandbox's custody key in
// "Authorization: Bearer" (mcpauth, apikey Verify): none or a refused
// one is 401, logged at Debug by its SHA-256 only. An unknown name, or a
// server whose tenants do not include the key's tenant, is 404
// {"error":"not_found"} (the two are not told apart). A request without
// Mcp-Session-Id must be an initialize (else 400): it starts a session
// and resolves the session's run:
//
//   - with request header "Custody-Run: RUN", the calls are recorded in
//     RUN, which must be an open run of the key's tenant and agent (the
//     signer's ownership check); otherwise 403 {"error":"forbidden"};
//   - without it, a run is registered for the key's identity
//     (run.registered) and closed (run.closing, reason closed) when the
//     session ends: DELETE, Options.SessionTimeout (default 30m) without
//     requests, [Proxy.Close], or at once when the go-sdk refuses the
//     initialize itself (bad headers or protocol version).
//
// The initialize response carries "Custody-Run: RUN", the session's run.
// A replica without a signer answers 503 {"error":"signer_unavailable"};
// an agent with Options.MaxSessions (default 32) open sessions, 429
// {"error":"too_many_sessions"}.
// The header on later requests of the session is ignored. A session
// belongs to the key's tenant/agent/session: another identity presenting
// its Mcp-Session-Id gets 403 (go-sdk). Sandbox request bodies are
// bounded by Options.MaxRequestBody (default 4 MiB, 413).
//
// # Upstream sessions
//
// custody holds one upstream session per sandbox session (go-sdk
// client, streamable HTTP, no standalone SSE stream), connected at the
// first tools/list or tools/call, connected again after a transport
// failure, and closed with the sandbox session. Each upstream request
// carries the upstream's credential (read from its file when the
// upstream session starts) and no custody key; the credential never
// reaches the sandbox and is never logged. Redirects are not followed
// (a failure). Each upstream exchange is
// bounded by Options.CallTimeout (default 60s) and each response by
// Options.MaxResultBytes (default 4 MiB) plus 64 KiB of envelope.
// Only tools/list and tools/call are forwarded: custody's own server
// answers initialize and ping and declares only the tools capability
// (resources, prompts, sampling and upstream notifications are not
// relayed).
//
// # tools/list
//
// Forwarded (with its cursor), keeping the upstream's tool names and
// definitions unchanged, minus tools the upstream's tools filter does
// not offer (allow/deny globs, deny wins) and tools the tenant's policy
// can never allow (signer MayAllow of the signer tool name: an
// unconditional deny rule, or no allow/ask rule under a default deny).
// Failures are JSON-RPC errors with fixed text.
//
// # tools/call
//
// A call of tool T on server S is decided as signer tool
// "mcp__S__T" ([SignerTool], the name Claude Code gives MCP tools), with
// the call's arguments as args ({} when absent), in the session's run,
// under a fresh call id "mcp-<24 hex>" (signer.MCPProxyCallPrefix: the
// agent API refuses such ids, so only the proxy completes the call). Then:
//
//   - deny: an error result (isError) naming the rule ids, nothing
//     forwarded (call.decided only);
//   - ask: an approval is requested (approval.requested) and waited for
//     up to Options.ApprovalWait (default 60s); approved: consumed with
//     the same args (approval.consumed) and forwarded as for allow;
//     denied or expired: error result, call.completed outcome
//     approval_denied; not resolved in time: error result,
//     call.completed outcome approval_timeout; nothing forwarded;
//   - allow: forwarded; the result the sandbox receives is recorded as
//     call.completed {outcome, result_commitment}: a salted commitment
//     to the JSON of the MCP CallToolResult (never the result itself),
//     outcome "ok", or "error" when the upstream answered isError,
//     failed, timed out, was unreachable, answered a JSON-RPC error or a
//     malformed result, or a result over MaxResultBytes (the sandbox then
//     gets an error result instead). A forwarded call is carried to its
//     end (or CallTimeout) even when the sandbox cancels it or leaves, so
//     that what is recorded is what the upstream answered. Only a name the upstream's own
//     tools/list carries exactly is sent (listed once per session, again
//     when a name is missing); any other spelling gets error result
//     tool_not_listed, outcome "error", and never reaches the upstream.
//
// A tool the filter does not offer is refused before any decision
// (error result tool_not_offered, not recorded), and so are arguments
// with two member names in one object equal but for case (bad_request):
// the signer decides on exact names, while some upstreams bind names
// case-insensitively. A signer failure
// refuses the call (fail closed): signer_unavailable, or run_refused
// when the run is closed or not the caller's.
//
// # Error results
//
// Refusals are tool results with isError true and one text content, an
// apierror JSON body: {"error": code, "message": text, ...details}.
// Codes: denied {call_id, tool, rule_ids}, approval_denied and
// approval_timeout {call_id, tool, rule_ids, approval_id},
// tool_not_offered, signer_unavailable, run_refused, bad_request (names
// equal but for case, or the signer refused the tool name or arguments),
// upstream_unavailable, upstream_timeout, upstream_failed,
// upstream_error {rpc_code}, upstream_result_too_large {limit_bytes},
// upstream_result_withheld (the result, or a tools/list answer, carries
// the upstream's credential: an upstream echoing its request headers).
// No text carries a key, a credential or an upstream's error text.
//
// # Config
//
// The upstreams file ([Config], custody serve --mcp-upstreams FILE) is
// YAML or JSON, decoded strictly (an unknown field is an error), every
// field checked with errors naming it (upstreams[i].field):
//
//	upstreams:
//	  - name: github                    # DNS label, no "__"; /mcp/servers/github
//	    url: https://mcp.example.com/mcp
//	    tenants: [team-a, team-b]       # namespaces whose sandboxes may use it
//	    credential:                     # optional
//	      file: /var/run/secrets/mcp/github   # the secret; re-read per upstream session
//	      header: Authorization         # default Authorization
//	      prefix: "Bearer "             # default "Bearer " for Authorization, else ""
//	    tools:                          # optional; path.Match globs, deny wins
//	      allow: ["*"]
//	      deny: ["delete_*"]
package mcpproxy
