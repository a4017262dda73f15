package policy

import (
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
