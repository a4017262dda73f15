package postgres

import (
	"testing"

	"github.com/agentcustody/custody/internal/store/storetest"
	"github.com/agentcustody/custody/internal/witness"
)

func TestWitness(t *testing.T) {
	storetest.Witness(t, func(tb testing.TB) witness.Store { return openTestDB(tb) })
}

// TestWitnessReplicas races three pools on one schema.
func TestWitnessReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.WitnessReplicas(t, dbs[0], dbs[1], dbs[2])
}
