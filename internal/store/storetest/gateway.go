package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/metering"
)

// gatewayNow is the suite's "now" for gateway tokens.
var gatewayNow = time.Unix(1_800_000_000, 0).UTC()

func tokenRecord(jti string, issued time.Time, ttl time.Duration) gateway.TokenRecord {
	return gateway.TokenRecord{
		JTI: jti, IssuedAt: issued, ExpiresAt: issued.Add(ttl),
		Providers: []string{"anthropic", "openai"}, Models: []string{"o3-mini", "claude-sonnet-4-5"},
		RunID: "run-" + jti, Tenant: "agents", Agent: "agent-" + jti,
		Budget:    metering.Usage{Requests: 3, OutputTokens: 500},
		RunBudget: metering.Usage{InputTokens: 1 << 40},
	}
}

func recordTokens(t testing.TB, s gateway.Store, recs ...gateway.TokenRecord) {
	t.Helper()
	for _, r := range recs {
		if err := s.RecordToken(context.Background(), r); err != nil {
			t.Fatalf("RecordToken(%s) = %v", r.JTI, err)
		}
	}
}

// sameRevocation reports whether a and b are the same revocation (times
// compared as instants).
func sameRevocation(a, b gateway.Revocation) bool {
	return a.Seq == b.Seq && a.JTI == b.JTI && a.RevokedAt.Equal(b.RevokedAt) && a.ExpiresAt.Equal(b.ExpiresAt)
}

// sameRecord reports whether a and b are the same token record (times
// compared as instants; nil Models, "not recorded", differs from empty;
// Repos in order, nil and empty both none).
func sameRecord(a, b gateway.TokenRecord) bool {
	return a.JTI == b.JTI && a.IssuedAt.Equal(b.IssuedAt) && a.ExpiresAt.Equal(b.ExpiresAt) &&
		slices.Equal(a.Providers, b.Providers) && slices.Equal(a.Models, b.Models) && (a.Models == nil) == (b.Models == nil) &&
		slices.Equal(a.Repos, b.Repos) &&
		a.RunID == b.RunID && a.Tenant == b.Tenant && a.Agent == b.Agent
}

// jtis lists the jtis of revs, for messages.
func jtis(revs []gateway.Revocation) []string {
	out := make([]string, len(revs))
	for i, r := range revs {
		out[i] = r.JTI
	}
	return out
}

// Gateway checks a [gateway.Store]: a first revocation of a recorded jti
// carries a positive Seq, its time and the token's exp; revoking again
// returns it unchanged; unknown and pruned jtis are [gateway.ErrNotFound];
// ListRevocations returns Seq > since in ascending order; PruneExpired
// deletes strictly before its cut-off and counts rows; a Seq is never
// reused, even after the revocation holding the largest one is pruned.
// It runs [GatewayReplicas] on one handle.
// Each subtest calls open for a new, empty store, released when the
// testing.TB given to open ends.
func Gateway(t *testing.T, open func(testing.TB) gateway.Store) {
	ctx := context.Background()

	t.Run("RecordRevokeList", func(t *testing.T) {
		s := open(t)
		recordTokens(t, s,
			tokenRecord("a", gatewayNow, time.Hour),
			tokenRecord("b", gatewayNow, time.Hour),
			tokenRecord("short", gatewayNow, time.Minute),
			gateway.TokenRecord{JTI: "bare", IssuedAt: gatewayNow, ExpiresAt: gatewayNow.Add(time.Hour)}, // optional fields empty
		)
		if err := s.RecordToken(ctx, tokenRecord("a", gatewayNow, time.Hour)); err == nil {
			t.Error("RecordToken(duplicate jti) = nil, want an error")
		}
		if none, err := s.ListRevocations(ctx, 0); err != nil || len(none) != 0 {
			t.Errorf("ListRevocations(0) before any revocation = %v, %v; want none", jtis(none), err)
		}
		if _, err := s.RevokeToken(ctx, "never-minted", gatewayNow); !errors.Is(err, gateway.ErrNotFound) {
			t.Errorf("RevokeToken(unknown) = %v, want ErrNotFound", err)
		}
		ra, err := s.RevokeToken(ctx, "a", gatewayNow.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want := gateway.Revocation{Seq: ra.Seq, JTI: "a", RevokedAt: gatewayNow.Add(time.Minute), ExpiresAt: gatewayNow.Add(time.Hour)}
		if ra.Seq <= 0 || !sameRevocation(ra, want) {
			t.Errorf("RevokeToken(a) = %+v, want %+v with Seq > 0", ra, want)
		}
		again, err := s.RevokeToken(ctx, "a", gatewayNow.Add(2*time.Minute))
		if err != nil || !sameRevocation(again, ra) {
			t.Errorf("RevokeToken(a) again = %+v, %v; want the first revocation %+v", again, err, ra)
		}
		rs, err := s.RevokeToken(ctx, "short", gatewayNow.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if rs.Seq <= ra.Seq {
			t.Errorf("second revocation Seq %d, want > first %d", rs.Seq, ra.Seq)
		}
		rbare, err := s.RevokeToken(ctx, "bare", gatewayNow)
		if err != nil || rbare.Seq <= rs.Seq {
			t.Fatalf("RevokeToken(bare) = %+v, %v; want Seq > %d", rbare, err, rs.Seq)
		}
		for _, c := range []struct {
			since int64
			want  []gateway.Revocation
		}{
			{0, []gateway.Revocation{ra, rs, rbare}},
			{-1, []gateway.Revocation{ra, rs, rbare}},
			{ra.Seq, []gateway.Revocation{rs, rbare}},
			{rs.Seq, []gateway.Revocation{rbare}},
			{rbare.Seq, nil},
			{rbare.Seq + 1000, nil},
		} {
			got, err := s.ListRevocations(ctx, c.since)
			if err != nil || len(got) != len(c.want) {
				t.Errorf("ListRevocations(%d) = %v, %v; want %v", c.since, jtis(got), err, jtis(c.want))
				continue
			}
			for i := range got {
				if !sameRevocation(got[i], c.want[i]) {
					t.Errorf("ListRevocations(%d)[%d] = %+v, want %+v", c.since, i, got[i], c.want[i])
				}
			}
		}
	})

	t.Run("LookupToken", func(t *testing.T) {
		s := open(t)
		full := tokenRecord("full", gatewayNow, time.Hour)
		bare := gateway.TokenRecord{JTI: "bare", IssuedAt: gatewayNow, ExpiresAt: gatewayNow.Add(time.Minute), Providers: []string{"openai"}}
		// Models kept in order, an empty list (no restriction) apart from
		// nil (not recorded, as rows from before models were kept).
		noModels := tokenRecord("no-models", gatewayNow, time.Hour)
		noModels.Models = []string{}
		oneModel := tokenRecord("one-model", gatewayNow, time.Hour)
		oneModel.Models = []string{"gpt-4o-mini"}
		// Repos kept in order with their access; an empty list reads
		// back as none (nil), like a row from before repos were kept.
		repos := tokenRecord("repos", gatewayNow, time.Hour)
		repos.Providers = []string{"github"}
		repos.Repos = []gateway.RepoGrant{{Repo: "octo/hello", Access: gateway.AccessRead}, {Repo: "Octo/Site.io", Access: gateway.AccessWrite}}
		noRepos := tokenRecord("no-repos", gatewayNow, time.Hour)
		noRepos.Repos = []gateway.RepoGrant{}
		recordTokens(t, s, full, bare, noModels, oneModel, repos, noRepos)
		noRepos.Repos = nil
		for _, want := range []gateway.TokenRecord{full, bare, noModels, oneModel, repos, noRepos} {
			got, err := s.LookupToken(ctx, want.JTI)
			if err != nil || !sameRecord(got, want) {
				t.Errorf("LookupToken(%s) = %+v, %v; want %+v", want.JTI, got, err, want)
			}
		}
		if _, err := s.LookupToken(ctx, "never-minted"); !errors.Is(err, gateway.ErrNotFound) {
			t.Errorf("LookupToken(unknown) = %v, want ErrNotFound", err)
		}
		if _, err := s.RevokeToken(ctx, "full", gatewayNow); err != nil {
			t.Fatal(err)
		}
		if got, err := s.LookupToken(ctx, "full"); err != nil || !sameRecord(got, full) {
			t.Errorf("LookupToken(revoked) = %+v, %v; want the record (revocation is checked apart)", got, err)
		}
		if _, err := s.PruneExpired(ctx, gatewayNow.Add(30*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.LookupToken(ctx, "bare"); !errors.Is(err, gateway.ErrNotFound) {
			t.Errorf("LookupToken(pruned) = %v, want ErrNotFound", err)
		}
	})

	t.Run("RunTokens", func(t *testing.T) {
		// The unexpired tokens of one run of one agent: not another
		// agent's token naming the same run, not an expired one.
		s := open(t)
		a, b, other, old := tokenRecord("a", gatewayNow, time.Hour), tokenRecord("b", gatewayNow, time.Hour),
			tokenRecord("other", gatewayNow, time.Hour), tokenRecord("old", gatewayNow.Add(-2*time.Hour), time.Hour)
		for _, r := range []*gateway.TokenRecord{&a, &b, &other, &old} {
			r.RunID, r.Agent = "run-1", "agent-1"
		}
		other.Agent = "agent-2"
		recordTokens(t, s, a, b, other, old)
		got, err := s.RunTokens(ctx, "agents", "agent-1", "run-1", gatewayNow)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"a", "b"}) {
			t.Errorf("RunTokens = %v, %v; want [a b]", got, err)
		}
		if got, err := s.RunTokens(ctx, "agents", "agent-1", "run-2", gatewayNow); err != nil || len(got) != 0 {
			t.Errorf("RunTokens(another run) = %v, %v", got, err)
		}
	})

	t.Run("RevokeExpiredToken", func(t *testing.T) {
		// A recorded token past its exp but not pruned can be revoked (a
		// runner whose command outlived the token still revokes it).
		s := open(t)
		recordTokens(t, s, tokenRecord("late", gatewayNow.Add(-time.Hour), time.Minute))
		r, err := s.RevokeToken(ctx, "late", gatewayNow)
		if err != nil || !r.ExpiresAt.Equal(gatewayNow.Add(-59*time.Minute)) || !r.RevokedAt.Equal(gatewayNow) {
			t.Errorf("RevokeToken(expired) = %+v, %v", r, err)
		}
	})

	t.Run("PruneNeverReusesSeq", func(t *testing.T) {
		s := open(t)
		recordTokens(t, s,
			tokenRecord("a", gatewayNow, time.Hour),
			tokenRecord("b", gatewayNow, time.Hour),
			tokenRecord("short", gatewayNow, time.Minute),
			tokenRecord("short-unrevoked", gatewayNow, time.Minute),
			tokenRecord("at-cutoff", gatewayNow, 30*time.Minute),
		)
		ra, err := s.RevokeToken(ctx, "a", gatewayNow)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := s.RevokeToken(ctx, "short", gatewayNow) // the largest Seq so far
		if err != nil {
			t.Fatal(err)
		}
		// Deletes short and its revocation and short-unrevoked; at-cutoff
		// expires exactly at the cut-off and stays.
		n, err := s.PruneExpired(ctx, gatewayNow.Add(30*time.Minute))
		if err != nil || n != 3 {
			t.Errorf("PruneExpired() = %d, %v; want 3 rows", n, err)
		}
		for _, jti := range []string{"short", "short-unrevoked"} {
			if _, err := s.RevokeToken(ctx, jti, gatewayNow); !errors.Is(err, gateway.ErrNotFound) {
				t.Errorf("RevokeToken(pruned %s) = %v, want ErrNotFound", jti, err)
			}
		}
		rc, err := s.RevokeToken(ctx, "at-cutoff", gatewayNow)
		if err != nil {
			t.Errorf("RevokeToken(at-cutoff) = %v, want it kept by the prune", err)
		}
		rb, err := s.RevokeToken(ctx, "b", gatewayNow)
		if err != nil {
			t.Fatal(err)
		}
		if rc.Seq <= rs.Seq || rb.Seq <= rc.Seq {
			t.Errorf("Seqs after prune = %d, %d; want increasing after the pruned %d (never reused)", rc.Seq, rb.Seq, rs.Seq)
		}
		all, err := s.ListRevocations(ctx, 0)
		if err != nil || len(all) != 3 || !sameRevocation(all[0], ra) || all[1].JTI != "at-cutoff" || all[2].JTI != "b" {
			t.Errorf("ListRevocations(0) after prune = %v, %v; want [a at-cutoff b]", jtis(all), err)
		}
		if n, err := s.PruneExpired(ctx, gatewayNow.Add(30*time.Minute)); err != nil || n != 0 {
			t.Errorf("second PruneExpired() = %d, %v; want 0", n, err)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		s := open(t)
		GatewayReplicas(t, s, s, s, s)
	})
}

// GatewayReplicas races stores, handles on one fresh database: writers
// revoke distinct tokens (and one token from every writer at once) while
// a poller that keeps only the largest Seq it has seen lists revocations
// in a loop, as a gateway replica does. It checks that the poller misses
// no revocation (Seq is assigned in commit order), that each list is in
// ascending Seq above the poller's cursor, that Seqs are distinct, and
// that the racing revocations of one token all return the same first
// revocation.
func GatewayReplicas(t *testing.T, stores ...gateway.Store) {
	t.Helper()
	if len(stores) < 2 {
		t.Fatalf("GatewayReplicas needs at least 2 handles, got %d", len(stores))
	}
	ctx := context.Background()
	const perWriter = 25
	writers := 2 * len(stores)
	for w := range writers {
		for i := range perWriter {
			recordTokens(t, stores[w%len(stores)], tokenRecord(fmt.Sprintf("w%d-%d", w, i), gatewayNow, time.Hour))
		}
	}
	recordTokens(t, stores[0], tokenRecord("shared", gatewayNow, time.Hour))
	// A token recorded through one handle (replica) is found on another.
	if got, err := stores[1].LookupToken(ctx, "shared"); err != nil || !sameRecord(got, tokenRecord("shared", gatewayNow, time.Hour)) {
		t.Errorf("LookupToken(shared) on another handle = %+v, %v", got, err)
	}

	var (
		mu      sync.Mutex
		revoked = map[string]gateway.Revocation{} // by jti, as the writers saw them
		shared  []gateway.Revocation
		done    atomic.Bool
		polled  = map[string]int64{} // jti -> Seq, as the poller saw them
		wg      sync.WaitGroup
	)
	poll := func(s gateway.Store, cursor int64) int64 {
		revs, err := s.ListRevocations(ctx, cursor)
		if err != nil {
			t.Errorf("ListRevocations(%d) = %v", cursor, err)
			return cursor
		}
		for _, r := range revs {
			if r.Seq <= cursor {
				t.Errorf("ListRevocations(%d) returned Seq %d (%s): not ascending above the cursor", cursor, r.Seq, r.JTI)
			}
			cursor = max(cursor, r.Seq)
			if prev, dup := polled[r.JTI]; dup {
				t.Errorf("poller saw %s twice (Seq %d and %d)", r.JTI, prev, r.Seq)
			}
			polled[r.JTI] = r.Seq
		}
		return cursor
	}
	pollerDone := make(chan int64)
	go func() {
		s, cursor := stores[len(stores)-1], int64(0)
		for !done.Load() {
			cursor = poll(s, cursor)
		}
		pollerDone <- poll(s, cursor) // once more, after every writer returned
	}()

	for w := range writers {
		s := stores[w%len(stores)]
		wg.Go(func() {
			for i := range perWriter {
				if i == perWriter/2 {
					r, err := s.RevokeToken(ctx, "shared", gatewayNow.Add(time.Duration(w)*time.Second))
					if err != nil {
						t.Errorf("RevokeToken(shared) = %v", err)
						continue
					}
					mu.Lock()
					shared = append(shared, r)
					mu.Unlock()
				}
				jti := fmt.Sprintf("w%d-%d", w, i)
				r, err := s.RevokeToken(ctx, jti, gatewayNow)
				if err != nil {
					t.Errorf("RevokeToken(%s) = %v", jti, err)
					continue
				}
				mu.Lock()
				revoked[jti] = r
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	done.Store(true)
	<-pollerDone

	if len(shared) != writers {
		t.Fatalf("%d of %d racing revocations of one token succeeded", len(shared), writers)
	}
	for _, r := range shared[1:] {
		if !sameRevocation(r, shared[0]) {
			t.Errorf("racing revocations of one token returned %+v and %+v, want one first revocation", shared[0], r)
		}
	}
	revoked["shared"] = shared[0]
	seqs := map[int64]string{}
	for jti, r := range revoked {
		if other, dup := seqs[r.Seq]; dup {
			t.Errorf("Seq %d given to %s and %s", r.Seq, other, jti)
		}
		seqs[r.Seq] = jti
		if seq, ok := polled[jti]; !ok {
			t.Errorf("poller missed %s (Seq %d): Seq not assigned in commit order", jti, r.Seq)
		} else if seq != r.Seq {
			t.Errorf("poller saw %s with Seq %d, RevokeToken returned %d", jti, seq, r.Seq)
		}
	}
	if len(polled) != len(revoked) {
		t.Errorf("poller saw %d revocations, want %d", len(polled), len(revoked))
	}
}

// LegacyTokenRecord is the record a store's upgrade test writes with the
// INSERT of a binary from before models were recorded (no models column),
// then hands to [GatewayUpgraded] once the store has migrated.
var LegacyTokenRecord = gateway.TokenRecord{
	JTI: "minted-before-models", IssuedAt: gatewayNow, ExpiresAt: gatewayNow.Add(time.Hour),
	Providers: []string{"openai"}, RunID: "run-legacy", Tenant: "agents", Agent: "agent-legacy",
}

// GatewayUpgraded checks a store migrated after [LegacyTokenRecord] was
// written without models: the record reads back whole with nil Models
// (not recorded, which the gateway refuses), and records written since
// keep their models, empty apart from nil.
func GatewayUpgraded(t *testing.T, s gateway.Store) {
	ctx := context.Background()
	got, err := s.LookupToken(ctx, LegacyTokenRecord.JTI)
	if err != nil || !sameRecord(got, LegacyTokenRecord) {
		t.Errorf("LookupToken(legacy) = %+v, %v; want %+v with nil Models", got, err, LegacyTokenRecord)
	}
	none := tokenRecord("after-upgrade-none", gatewayNow, time.Hour)
	none.Models = []string{}
	recordTokens(t, s, tokenRecord("after-upgrade", gatewayNow, time.Hour), none)
	for _, want := range []gateway.TokenRecord{tokenRecord("after-upgrade", gatewayNow, time.Hour), none} {
		if got, err := s.LookupToken(ctx, want.JTI); err != nil || !sameRecord(got, want) {
			t.Errorf("LookupToken(%s) = %+v, %v; want %+v", want.JTI, got, err, want)
		}
	}
}
