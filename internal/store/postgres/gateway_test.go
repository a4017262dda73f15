package postgres

import (
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestGateway(t *testing.T) {
	storetest.Gateway(t, func(tb testing.TB) gateway.Store { return openTestDB(tb) })
}

// TestGatewayReplicas races three pools on one schema: Seq must follow
// commit order across replicas, which a sequence alone does not give.
func TestGatewayReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.GatewayReplicas(t, dbs[0], dbs[1], dbs[2])
}
