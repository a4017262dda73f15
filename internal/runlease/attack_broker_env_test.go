package runlease_test

import (
	"testing"

	"github.com/agentcustody/custody/internal/runlease"
)

// TestAttackBrokerVarCollision: two brokered providers whose names differ
// only in "-" and "_" ("a-b", "a_b") would be handed in the same
// CUSTODY_A_B_TOKEN and CUSTODY_A_B_URL, one token silently replacing the
// other (and git's helper for one handing the other's token): refused.
func TestAttackBrokerVarCollision(t *testing.T) {
	err := runlease.CheckBrokers([]runlease.Broker{{Provider: "acme-api"}, {Provider: "acme_api"}}, nil)
	if err == nil {
		t.Fatal("CheckBrokers(acme-api, acme_api) = nil, want an error: both are CUSTODY_ACME_API_TOKEN")
	}
}
