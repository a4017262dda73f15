package cli

import (
	"net/url"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/runlease"
)

// TestAttackExecGatewayURLQueryOrFragment: custody exec checks
// --gateway-url for a scheme and a host only, then runlease.EnvVars
// appends each provider's path to it as a string (gw + "/anthropic"),
// and the SDKs append theirs. A '?' or '#' in --gateway-url (accepted)
// turns every provider path into query or fragment: ANTHROPIC_BASE_URL
// https://gw:8866/?x=1/anthropic sends the process's model calls to the
// gateway's root, never to /anthropic/...; user information in it is
// handed to the process in every *_BASE_URL. Either refuse these shapes
// (as --egress-proxy does) or join the paths as URLs.
func TestAttackExecGatewayURLQueryOrFragment(t *testing.T) {
	for _, gw := range []string{"https://gw.example:8866/?x=1", "https://gw.example:8866/#x", "https://op:s3cret@gw.example:8866"} {
		c := execConfig{admin: adminConn{url: "https://admin.example:8867"}, sandboxd: "127.0.0.1:9090", providers: []string{"anthropic"}, githubProvider: "github",
			gatewayURL: gw, ttl: time.Minute, killGrace: time.Second, revokeTimeout: time.Second, logLevel: "warn"}
		if err := c.validate(); err != nil {
			t.Logf("%s: %v", gw, err)
			continue // refused
		}
		env, err := runlease.EnvVars(c.providers, c.gatewayURL, "tok")
		must(t, err)
		base := env["ANTHROPIC_BASE_URL"]
		u, err := url.Parse(base + "/v1/messages")
		must(t, err)
		if u.Path != "/anthropic/v1/messages" || u.User != nil {
			t.Errorf("--gateway-url %q accepted: ANTHROPIC_BASE_URL=%q, so the SDK calls path %q (user %v), not /anthropic/v1/messages",
				gw, base, u.Path, u.User)
		}
	}
}
