package sqlite

import (
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/store/storetest"
)

func TestAttackMemoryIDTakenByOtherTenant(t *testing.T) {
	db := openTestDB(t)
	storetest.MemoryIDTakenByOtherTenant(t, db, func(next func(time.Time) (int64, error)) { db.newID = next })
	// A failed attempt leaves no index entry behind: one per memory.
	var rows, indexed int
	if err := db.db.QueryRow(`SELECT count(*) FROM memories`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if err := db.db.QueryRow(`SELECT count(*) FROM memories_fts`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if rows != indexed {
		t.Errorf("%d memories, %d index entries", rows, indexed)
	}
}

func TestAttackMemoryIDRace(t *testing.T) {
	db := openTestDB(t)
	storetest.MemoryIDRace(t, db, func(next func(time.Time) (int64, error)) { db.newID = next })
}
