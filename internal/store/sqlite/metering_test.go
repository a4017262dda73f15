package sqlite

import (
	"testing"

	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestMetering(t *testing.T) {
	storetest.Metering(t, func(tb testing.TB) metering.Store { return openTestDB(tb) })
}

// TestMeteringReplicas races handles of several processes on one file.
func TestMeteringReplicas(t *testing.T) {
	dbs := openReplicas(t, 3)
	storetest.MeteringReplicas(t, dbs[0], dbs[1], dbs[2])
}
