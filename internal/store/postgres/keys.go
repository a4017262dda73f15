package postgres

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/apikey"
)

var _ apikey.Store = (*DB)(nil)

// keysSchema is migration 1: keys minted by the identity exchange. Times
// are Unix seconds (bigint), as the SQLite store keeps them: a key's
// expiry is a whole second and nothing finer is stored.
const keysSchema = `CREATE TABLE api_keys (
	hash       bytea PRIMARY KEY CHECK (length(hash) = 32), -- SHA-256 of the key string
	tenant     text NOT NULL,
	agent      text NOT NULL,
	session    text NOT NULL,
	identity   jsonb NOT NULL,   -- apikey.Identity
	issued_at  bigint NOT NULL,  -- unix seconds
	expires_at bigint NOT NULL,  -- unix seconds
	revoked_at bigint            -- unix seconds, NULL while live
);
CREATE INDEX api_keys_agent ON api_keys (tenant, agent, expires_at);
CREATE INDEX api_keys_expiry ON api_keys (expires_at);`

// KeyRevocationChannel is the LISTEN/NOTIFY channel on which RevokeKey and
// RevokeAgentKeys announce revoked keys to every replica, in the
// transaction that revokes them, so a notification is delivered only if
// the revocation commits.
//
// # Format
//
// The payload is one or more key IDs (64 lowercase hex digits, the
// SHA-256 of the key) joined by ",", at most 64 of them (4,159 bytes),
// well under PostgreSQL's 8,000-byte payload limit:
//
//	9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08,60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752
//
// Channels are per database, not per schema: deployments that share a
// database in different schemas see each other's notifications, which
// costs them only the eviction of an entry they do not hold (and an
// evictAll for a payload in another format).
const KeyRevocationChannel = "custody_key_revoked"

// maxIDsPerNotification bounds the key IDs in one notification payload:
// 64 IDs of 64 hex digits and 63 commas make 4,159 bytes.
const maxIDsPerNotification = 64

// InsertKey implements apikey.Store. A hash already stored is an error.
func (d *DB) InsertKey(ctx context.Context, r apikey.Record) error {
	id, err := json.Marshal(r.Identity)
	if err != nil {
		return fmt.Errorf("postgres: encode identity: %w", err)
	}
	_, err = d.pool.Exec(ctx,
		`INSERT INTO api_keys (hash, tenant, agent, session, identity, issued_at, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		r.Hash[:], r.Identity.Tenant, r.Identity.Agent, r.Identity.Session, string(id), r.IssuedAt.Unix(), r.ExpiresAt.Unix())
	if err != nil {
		return fmt.Errorf("postgres: insert key: %w", err)
	}
	return nil
}

// LookupKey implements apikey.Store. Times come back in UTC, whole
// seconds.
func (d *DB) LookupKey(ctx context.Context, hash [32]byte) (apikey.Record, error) {
	var (
		id              []byte
		issued, expires int64
		revoked         *int64
	)
	err := d.pool.QueryRow(ctx,
		`SELECT identity, issued_at, expires_at, revoked_at FROM api_keys WHERE hash = $1`, hash[:]).
		Scan(&id, &issued, &expires, &revoked)
	if errors.Is(err, pgx.ErrNoRows) {
		return apikey.Record{}, apikey.ErrNotFound
	}
	if err != nil {
		return apikey.Record{}, fmt.Errorf("postgres: look up key: %w", err)
	}
	r := apikey.Record{Hash: hash, IssuedAt: time.Unix(issued, 0).UTC(), ExpiresAt: time.Unix(expires, 0).UTC()}
	if revoked != nil {
		r.RevokedAt = time.Unix(*revoked, 0).UTC()
	}
	if err := json.Unmarshal(id, &r.Identity); err != nil {
		return apikey.Record{}, fmt.Errorf("postgres: decode identity: %w", err)
	}
	return r, nil
}

// RevokeKey implements apikey.Store, and announces the key on
// [KeyRevocationChannel] when the revocation commits (again if it was
// already revoked: a replica that missed the first notice evicts then).
func (d *DB) RevokeKey(ctx context.Context, hash [32]byte, at time.Time) error {
	// One statement: the update and the notification commit together. In
	// d.tx, so read committed whatever the server's default: under
	// repeatable read or serializable, the second of two concurrent
	// revocations of one key failed (SQLSTATE 40001) instead of waiting
	// for the first and finding the key revoked.
	err := d.tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `WITH revoked AS (
				UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE hash = $2 RETURNING hash
			)
			SELECT pg_notify($3, encode(hash, 'hex')) FROM revoked`,
			at.Unix(), hash[:], KeyRevocationChannel)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apikey.ErrNotFound
		}
		return nil
	})
	if errors.Is(err, apikey.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: revoke key: %w", err)
	}
	return nil
}

// RevokeAgentKeys implements apikey.Store: it revokes the keys of
// tenant/agent neither revoked nor expired at at (expires_at > at) and
// returns their hashes, in no particular order. Of two concurrent calls
// each key is returned by one. The keys are announced on
// [KeyRevocationChannel] when the revocation commits.
func (d *DB) RevokeAgentKeys(ctx context.Context, tenant, agent string, at time.Time) ([][32]byte, error) {
	var out [][32]byte
	err := d.tx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx,
			`UPDATE api_keys SET revoked_at = $1 WHERE tenant = $2 AND agent = $3 AND revoked_at IS NULL AND expires_at > $1 RETURNING hash`,
			at.Unix(), tenant, agent)
		if err != nil {
			return err
		}
		var b []byte
		_, err = pgx.ForEachRow(rows, []any{&b}, func() error {
			if len(b) != 32 {
				return fmt.Errorf("stored hash has %d bytes", len(b))
			}
			out = append(out, [32]byte(b))
			return nil
		})
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p`,
			KeyRevocationChannel, revocationPayloads(out))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: revoke agent keys: %w", err)
	}
	return out, nil
}

// revocationPayloads splits hashes into notification payloads (see
// [KeyRevocationChannel]).
func revocationPayloads(hashes [][32]byte) []string {
	var out []string
	for len(hashes) > 0 {
		n := min(len(hashes), maxIDsPerNotification)
		ids := make([]string, n)
		for i, h := range hashes[:n] {
			ids[i] = hex.EncodeToString(h[:])
		}
		out = append(out, strings.Join(ids, ","))
		hashes = hashes[n:]
	}
	return out
}

// parseRevocationPayload returns the hashes of a payload, or false if it
// is not in the format of [KeyRevocationChannel].
func parseRevocationPayload(p string) ([][32]byte, bool) {
	var out [][32]byte
	for id := range strings.SplitSeq(p, ",") {
		h, err := apikey.ParseID(id)
		if err != nil {
			return nil, false
		}
		out = append(out, h)
	}
	return out, true
}

// DeleteExpiredKeys implements apikey.Store: it deletes every key with
// expires_at before before (to the second), revoked or not.
func (d *DB) DeleteExpiredKeys(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := d.tx(ctx, func(tx pgx.Tx) error { // read committed: replicas prune at once (see RevokeKey)
		tag, err := tx.Exec(ctx, `DELETE FROM api_keys WHERE expires_at < $1`, before.Unix())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: delete expired keys: %w", err)
	}
	return n, nil
}

// Timing of [DB.ListenKeyRevocations].
const (
	// listenPingEvery is how long the listener waits for a notification
	// before it checks that its connection still answers, so that a
	// connection lost without a reset (a partition) is noticed within
	// about a cache TTL.
	listenPingEvery = 30 * time.Second
	// listenPingTimeout bounds that check, and connecting.
	listenPingTimeout = 10 * time.Second
	// listenMinBackoff and listenMaxBackoff bound the wait between
	// reconnection attempts; it doubles after each failure.
	listenMinBackoff = 100 * time.Millisecond
	listenMaxBackoff = 30 * time.Second
)

// listener is the state of one [DB.ListenKeyRevocations] or
// [DB.ListenGatewayRevocations] call; tests set its timings and hook.
type listener struct {
	// channel is the channel LISTENed on; empty means
	// [KeyRevocationChannel]. name names the listener in log lines;
	// empty means "key revocation listener".
	channel, name string
	// notify, if set, receives each payload; otherwise the payload is
	// parsed as [KeyRevocationChannel]'s and its keys given to evict.
	notify func(payload string)
	evict  func(hash [32]byte)
	// evictAll runs each time the listener starts listening: what was
	// announced while it was not is to be caught up with.
	evictAll               func()
	pingEvery              time.Duration
	minBackoff, maxBackoff time.Duration
	// listening, if set, is called with the server process ID of each
	// connection once it listens (tests use it to kill the connection).
	listening func(pid uint32)
	log       *slog.Logger
}

// ListenKeyRevocations delivers the keys revoked through any [DB] on this
// database (every replica) to evict, until ctx is done. It holds a
// connection of its own, outside the pool, that LISTENs on
// [KeyRevocationChannel], and calls evict once per key ID notified.
//
// Each time it starts listening, the first time included, it calls
// evictAll: revocations committed while it was not listening (before it
// started, or while its connection was lost) were not delivered. A lost
// connection, or one that does not answer a check after 30 s without
// notifications, is replaced, retrying with a backoff from 100 ms
// doubling to 30 s. A malformed payload also calls evictAll.
//
// evict and evictAll run on the listener's goroutine, one at a time, and
// must return quickly ([apikey.Service.Evict] and
// [apikey.Service.EvictAll] do). ListenKeyRevocations returns nil when
// ctx is done; it returns an error only if evict or evictAll is nil.
// Connection errors are retried, never returned; each is logged at Warn
// to log (nil: not logged), without the connection URL.
func (d *DB) ListenKeyRevocations(ctx context.Context, evict func(hash [32]byte), evictAll func(), log *slog.Logger) error {
	if evict == nil || evictAll == nil {
		return errors.New("postgres: listen for key revocations: evict and evictAll are required")
	}
	l := &listener{
		evict: evict, evictAll: evictAll, log: log,
		pingEvery: listenPingEvery, minBackoff: listenMinBackoff, maxBackoff: listenMaxBackoff,
	}
	d.listen(ctx, l)
	return nil
}

// listen runs l until ctx is done.
func (d *DB) listen(ctx context.Context, l *listener) {
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.channel == "" {
		l.channel = KeyRevocationChannel
	}
	if l.name == "" {
		l.name = "key revocation listener"
	}
	if l.notify == nil {
		l.notify = func(payload string) {
			hashes, ok := parseRevocationPayload(payload)
			if !ok {
				l.evictAll()
				return
			}
			for _, h := range hashes {
				l.evict(h)
			}
		}
	}
	backoff := l.minBackoff
	for ctx.Err() == nil {
		if listened := d.listenOnce(ctx, l); listened {
			backoff = l.minBackoff
		}
		// Wait between backoff/2 and backoff, so that replicas cut off
		// together do not reconnect together.
		wait := backoff/2 + rand.N(backoff/2+1)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, l.maxBackoff)
	}
}

// listenOnce connects, listens and delivers notifications until the
// connection fails or ctx is done. It reports whether it got as far as
// listening.
func (d *DB) listenOnce(ctx context.Context, l *listener) (listened bool) {
	sctx, cancel := context.WithTimeout(ctx, listenPingTimeout) // connecting and LISTEN
	defer cancel()
	conn, err := pgx.ConnectConfig(sctx, d.pool.Config().ConnConfig)
	if err != nil {
		l.log.WarnContext(ctx, l.name+": cannot connect; retrying (other replicas' revocations wait for the fallback meanwhile)", "err", err)
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		conn.Close(cctx)
	}()
	if _, err := conn.Exec(sctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		l.log.WarnContext(ctx, l.name+": LISTEN failed; retrying", "err", err)
		return false
	}
	l.log.DebugContext(ctx, l.name+": listening", "pid", conn.PgConn().PID())
	if l.listening != nil {
		l.listening(conn.PgConn().PID())
	}
	l.evictAll()
	for {
		wctx, cancel := context.WithTimeout(ctx, l.pingEvery)
		n, err := conn.WaitForNotification(wctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return true
		case errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed():
			// Quiet for pingEvery: check the connection still answers.
			pctx, cancel := context.WithTimeout(ctx, listenPingTimeout)
			err := conn.Ping(pctx)
			cancel()
			if err != nil {
				l.log.WarnContext(ctx, l.name+": connection lost; reconnecting and catching up", "err", err)
				return true
			}
		case err != nil:
			l.log.WarnContext(ctx, l.name+": connection lost; reconnecting and catching up", "err", err)
			return true
		default:
			l.notify(n.Payload)
		}
	}
}
