package postgres

import (
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestAttackMemoryIDTakenByOtherTenant(t *testing.T) {
	db := openTestDB(t)
	storetest.MemoryIDTakenByOtherTenant(t, db, func(next func(time.Time) (int64, error)) { db.newID = next })
}

func TestAttackMemoryIDRace(t *testing.T) {
	db := openTestDB(t)
	storetest.MemoryIDRace(t, db, func(next func(time.Time) (int64, error)) { db.newID = next })
}
