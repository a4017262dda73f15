package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
)

// keysNow is the suite's "now" for keys: a whole second, UTC.
var keysNow = time.Unix(1_800_000_000, 0).UTC()

// keyRecord is a key named name (its hash is SHA-256 of name) of
// tenant/agent, issued at issued, living ttl.
func keyRecord(name, tenant, agent string, issued time.Time, ttl time.Duration) apikey.Record {
	return apikey.Record{
		Hash: sha256.Sum256([]byte(name)),
		Identity: apikey.Identity{
			Tenant: tenant, Agent: agent, Session: "pod-" + name, Method: "kubernetes",
			ServiceAccount: "system:serviceaccount:" + tenant + ":default", PodUID: "uid-" + name,
			SandboxName: "sb-" + agent, SandboxUID: "sb-uid-" + name, ClaimUID: "claim-uid-" + agent,
		},
		IssuedAt:  issued,
		ExpiresAt: issued.Add(ttl),
	}
}

func insertKeys(t testing.TB, s apikey.Store, recs ...apikey.Record) {
	t.Helper()
	for _, r := range recs {
		if err := s.InsertKey(context.Background(), r); err != nil {
			t.Fatalf("InsertKey(%s) = %v", r.Identity.Session, err)
		}
	}
}

func sortHashes(hs [][32]byte) [][32]byte {
	hs = slices.Clone(hs)
	slices.SortFunc(hs, func(a, b [32]byte) int { return bytes.Compare(a[:], b[:]) })
	return hs
}

// Keys checks an [apikey.Store]: records round-trip, RevokeKey keeps the
// first time and knows no unknown hash, RevokeAgentKeys touches only the
// unexpired, unrevoked keys of one tenant/agent, DeleteExpiredKeys
// deletes strictly before its cut-off, revoked or not. It runs
// [KeysReplicas] on one handle.
// Each subtest calls open for a new, empty store, released when the
// testing.TB given to open ends.
func Keys(t *testing.T, open func(testing.TB) apikey.Store) {
	ctx := context.Background()

	t.Run("InsertLookup", func(t *testing.T) {
		s := open(t)
		a := keyRecord("a", "agents", "run-1", keysNow, 15*time.Minute)
		static := apikey.Record{ // optional identity fields empty
			Hash:     sha256.Sum256([]byte("static")),
			Identity: apikey.Identity{Tenant: "local", Agent: "dev", Session: "laptop", Method: "static"},
			IssuedAt: keysNow, ExpiresAt: keysNow.Add(time.Hour),
		}
		insertKeys(t, s, a, static)
		if err := s.InsertKey(ctx, a); err == nil {
			t.Error("InsertKey(duplicate hash) = nil, want an error")
		}
		for _, want := range []apikey.Record{a, static} {
			got, err := s.LookupKey(ctx, want.Hash)
			if err != nil {
				t.Fatalf("LookupKey(%s) = %v", want.ID(), err)
			}
			if got.Hash != want.Hash || got.Identity != want.Identity || !got.IssuedAt.Equal(want.IssuedAt) ||
				!got.ExpiresAt.Equal(want.ExpiresAt) || !got.RevokedAt.IsZero() {
				t.Errorf("LookupKey() = %+v, want %+v", got, want)
			}
		}
		if _, err := s.LookupKey(ctx, sha256.Sum256([]byte("nope"))); !errors.Is(err, apikey.ErrNotFound) {
			t.Errorf("LookupKey(unknown) = %v, want ErrNotFound", err)
		}
	})

	t.Run("RevokeKeepsFirstTime", func(t *testing.T) {
		s := open(t)
		a := keyRecord("a", "agents", "run-1", keysNow, 15*time.Minute)
		b := keyRecord("b", "agents", "run-1", keysNow, 15*time.Minute)
		insertKeys(t, s, a, b)
		for _, at := range []time.Time{keysNow.Add(time.Minute), keysNow.Add(2 * time.Minute)} {
			if err := s.RevokeKey(ctx, a.Hash, at); err != nil {
				t.Fatalf("RevokeKey(a, %v) = %v", at, err)
			}
		}
		if got, err := s.LookupKey(ctx, a.Hash); err != nil || !got.RevokedAt.Equal(keysNow.Add(time.Minute)) {
			t.Errorf("LookupKey(a).RevokedAt = %v, %v; want the first revocation %v", got.RevokedAt, err, keysNow.Add(time.Minute))
		}
		if got, _ := s.LookupKey(ctx, b.Hash); !got.RevokedAt.IsZero() {
			t.Errorf("LookupKey(b).RevokedAt = %v after revoking a, want zero", got.RevokedAt)
		}
		if err := s.RevokeKey(ctx, sha256.Sum256([]byte("nope")), keysNow); !errors.Is(err, apikey.ErrNotFound) {
			t.Errorf("RevokeKey(unknown) = %v, want ErrNotFound", err)
		}
	})

	t.Run("RevokeExpiredKey", func(t *testing.T) {
		// Revoke has no expiry condition: an expired key still stored is
		// revoked (and stays refused either way).
		s := open(t)
		old := keyRecord("old", "agents", "run-1", keysNow.Add(-time.Hour), time.Minute)
		insertKeys(t, s, old)
		if err := s.RevokeKey(ctx, old.Hash, keysNow); err != nil {
			t.Fatalf("RevokeKey(expired) = %v", err)
		}
		if got, _ := s.LookupKey(ctx, old.Hash); !got.RevokedAt.Equal(keysNow) {
			t.Errorf("RevokedAt = %v, want %v", got.RevokedAt, keysNow)
		}
	})

	t.Run("RevokeAgentKeys", func(t *testing.T) {
		s := open(t)
		live1 := keyRecord("live-1", "agents", "run-1", keysNow, time.Hour)
		live2 := keyRecord("live-2", "agents", "run-1", keysNow.Add(-time.Minute), time.Hour)
		expired := keyRecord("expired", "agents", "run-1", keysNow.Add(-time.Hour), time.Minute)
		// Expires exactly at the revocation time: already expired (a key
		// is refused from its expires_at on).
		boundary := keyRecord("boundary", "agents", "run-1", keysNow.Add(-time.Hour), time.Hour)
		revoked := keyRecord("revoked", "agents", "run-1", keysNow, time.Hour)
		otherAgent := keyRecord("other-agent", "agents", "run-2", keysNow, time.Hour)
		otherTenant := keyRecord("other-tenant", "team-b", "run-1", keysNow, time.Hour)
		insertKeys(t, s, live1, live2, expired, boundary, revoked, otherAgent, otherTenant)
		earlier := keysNow.Add(-30 * time.Second)
		if err := s.RevokeKey(ctx, revoked.Hash, earlier); err != nil {
			t.Fatal(err)
		}

		got, err := s.RevokeAgentKeys(ctx, "agents", "run-1", keysNow)
		if err != nil {
			t.Fatalf("RevokeAgentKeys() = %v", err)
		}
		want := sortHashes([][32]byte{live1.Hash, live2.Hash})
		if got = sortHashes(got); !slices.Equal(got, want) {
			t.Fatalf("RevokeAgentKeys() returned %d hashes, want the 2 live keys of agents/run-1", len(got))
		}
		for _, c := range []struct {
			name string
			rec  apikey.Record
			want time.Time
		}{
			{"live-1", live1, keysNow},
			{"live-2", live2, keysNow},
			{"expired", expired, time.Time{}},
			{"boundary", boundary, time.Time{}},
			{"revoked before", revoked, earlier},
			{"other agent", otherAgent, time.Time{}},
			{"other tenant", otherTenant, time.Time{}},
		} {
			r, err := s.LookupKey(ctx, c.rec.Hash)
			if err != nil || !r.RevokedAt.Equal(c.want) {
				t.Errorf("%s: RevokedAt = %v, %v; want %v", c.name, r.RevokedAt, err, c.want)
			}
		}
		if again, err := s.RevokeAgentKeys(ctx, "agents", "run-1", keysNow.Add(time.Second)); err != nil || len(again) != 0 {
			t.Errorf("second RevokeAgentKeys() = %d hashes, %v; want none", len(again), err)
		}
		if none, err := s.RevokeAgentKeys(ctx, "agents", "nobody", keysNow); err != nil || len(none) != 0 {
			t.Errorf("RevokeAgentKeys(no keys) = %d hashes, %v; want none, nil", len(none), err)
		}
	})

	t.Run("DeleteExpiredKeys", func(t *testing.T) {
		s := open(t)
		live := keyRecord("live", "agents", "run-1", keysNow, time.Hour)
		atCutoff := keyRecord("at-cutoff", "agents", "run-1", keysNow.Add(-time.Hour), time.Hour) // expires at keysNow
		dead := keyRecord("dead", "agents", "run-1", keysNow.Add(-2*time.Hour), time.Hour)
		deadRevoked := keyRecord("dead-revoked", "agents", "run-2", keysNow.Add(-2*time.Hour), time.Hour)
		liveRevoked := keyRecord("live-revoked", "agents", "run-2", keysNow, time.Hour)
		insertKeys(t, s, live, atCutoff, dead, deadRevoked, liveRevoked)
		for _, r := range []apikey.Record{deadRevoked, liveRevoked} {
			if err := s.RevokeKey(ctx, r.Hash, keysNow.Add(-90*time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		n, err := s.DeleteExpiredKeys(ctx, keysNow)
		if err != nil || n != 2 {
			t.Fatalf("DeleteExpiredKeys() = %d, %v; want 2 (dead, dead-revoked)", n, err)
		}
		for _, r := range []apikey.Record{dead, deadRevoked} {
			if _, err := s.LookupKey(ctx, r.Hash); !errors.Is(err, apikey.ErrNotFound) {
				t.Errorf("LookupKey(%s) after delete = %v, want ErrNotFound", r.Identity.Session, err)
			}
		}
		for _, r := range []apikey.Record{live, atCutoff, liveRevoked} {
			if _, err := s.LookupKey(ctx, r.Hash); err != nil {
				t.Errorf("LookupKey(%s) after delete = %v, want it kept", r.Identity.Session, err)
			}
		}
		if n, err := s.DeleteExpiredKeys(ctx, keysNow); err != nil || n != 0 {
			t.Errorf("second DeleteExpiredKeys() = %d, %v; want 0", n, err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		s := open(t)
		KeysReplicas(t, s, s, s, s)
	})
}

// KeysReplicas races stores, handles on one fresh database, and checks
// that concurrent RevokeAgentKeys calls of one tenant/agent revoke every
// live key once (each hash is returned by exactly one call) and that
// concurrent RevokeKey calls of one key all succeed and leave one of
// their times, which a later revocation does not change.
func KeysReplicas(t *testing.T, stores ...apikey.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatalf("KeysReplicas needs at least 2 handles, got %d", len(stores))
	}
	ctx := context.Background()
	const perAgent = 20
	var live [][32]byte
	for i := range perAgent {
		r := keyRecord("race-"+string(rune('a'+i)), "agents", "race", keysNow, time.Hour)
		insertKeys(t, stores[i%len(stores)], r)
		live = append(live, r.Hash)
	}
	var (
		mu   sync.Mutex
		seen = map[[32]byte]int{}
		wg   sync.WaitGroup
	)
	for i := range 2 * len(stores) {
		s := stores[i%len(stores)]
		wg.Go(func() {
			hs, err := s.RevokeAgentKeys(ctx, "agents", "race", keysNow)
			if err != nil {
				t.Errorf("concurrent RevokeAgentKeys() = %v", err)
				return
			}
			mu.Lock()
			for _, h := range hs {
				seen[h]++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, h := range live {
		if seen[h] != 1 {
			t.Errorf("key %x returned by %d concurrent RevokeAgentKeys calls, want 1", h[:4], seen[h])
		}
	}
	if len(seen) != len(live) {
		t.Errorf("concurrent RevokeAgentKeys returned %d distinct keys, want %d", len(seen), len(live))
	}

	one := keyRecord("race-one", "agents", "race-one", keysNow, time.Hour)
	insertKeys(t, stores[0], one)
	times := map[int64]bool{}
	for i := range 4 * len(stores) {
		at := keysNow.Add(time.Duration(i+1) * time.Second)
		times[at.Unix()] = true
		s := stores[i%len(stores)]
		wg.Go(func() {
			if err := s.RevokeKey(ctx, one.Hash, at); err != nil {
				t.Errorf("concurrent RevokeKey() = %v", err)
			}
		})
	}
	wg.Wait()
	first, err := stores[len(stores)-1].LookupKey(ctx, one.Hash)
	if err != nil || !times[first.RevokedAt.Unix()] {
		t.Fatalf("after concurrent RevokeKey: RevokedAt = %v, %v; want one of the revocation times", first.RevokedAt, err)
	}
	if err := stores[0].RevokeKey(ctx, one.Hash, keysNow.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r, _ := stores[0].LookupKey(ctx, one.Hash); !r.RevokedAt.Equal(first.RevokedAt) {
		t.Errorf("RevokedAt changed from %v to %v by a later revocation", first.RevokedAt, r.RevokedAt)
	}
}
