package policy

import (
	"context"
	"encoding/json"
	"os"
	"testing"
)

// TestDeployPolicy: the example policy shipped in deploy/ parses.
func TestDeployPolicy(t *testing.T) {
	b, err := os.ReadFile("../../deploy/base/policies/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Parse("agents", b); err != nil {
		t.Fatalf("Parse(deploy/base/policies/agents.yaml) = %v", err)
	}
}

// TestDeployPolicyEgress: the example egress rule lets the egress proxy
// open TLS tunnels to the package and source hosts it names, and nothing
// else: another host, plain HTTP, another port and the metadata address
// are denied (the last by the built-in rule too).
func TestDeployPolicyEgress(t *testing.T) {
	p, e := deployPolicy(t)
	for _, c := range []struct {
		args string
		want Effect
	}{
		{`{"method":"CONNECT","host":"pypi.org","port":443}`, Allow},
		{`{"method":"CONNECT","host":"github.com","port":443}`, Allow},
		{`{"method":"CONNECT","host":"evil.example","port":443}`, Deny},
		{`{"method":"CONNECT","host":"pypi.org","port":22}`, Deny},
		{`{"method":"GET","host":"pypi.org","port":80,"url":"http://pypi.org/simple/"}`, Deny},
		{`{"method":"CONNECT","host":"169.254.169.254","port":443}`, Deny},
	} {
		d, err := e.Decide(context.Background(), p, Call{Tool: "Egress", Args: json.RawMessage(c.args), Tenant: "agents"})
		if err != nil || d.Effect != c.want {
			t.Errorf("Egress %s = %s %v (%v), want %s", c.args, d.Effect, d.RuleIDs, err, c.want)
		}
	}
}

// TestDeployPolicyMCP: the example MCP rules allow searching the "docs"
// server, deny a search for passwords (any case), and leave its other
// tools to the default deny.
func TestDeployPolicyMCP(t *testing.T) {
	p, e := deployPolicy(t)
	for _, c := range []struct {
		tool, args string
		want       Effect
	}{
		{"mcp__docs__search", `{"query":"custody design"}`, Allow},
		{"mcp__docs__search", `{"query":"admin PassWord"}`, Deny},
		{"mcp__docs__delete_page", `{"page":"home"}`, Deny},
	} {
		d, err := e.Decide(context.Background(), p, Call{Tool: c.tool, Args: json.RawMessage(c.args), Tenant: "agents"})
		if err != nil || d.Effect != c.want {
			t.Errorf("%s %s = %s %v (%v), want %s", c.tool, c.args, d.Effect, d.RuleIDs, err, c.want)
		}
	}
}

// deployPolicy parses the example policy shipped in deploy/ and makes an
// engine with the built-in rules.
func deployPolicy(t *testing.T) (*Policy, *Engine) {
	t.Helper()
	b, err := os.ReadFile("../../deploy/base/policies/agents.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse("agents", b)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	return p, e
}
