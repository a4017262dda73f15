package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentcustody/custody/internal/memory"
)

var _ memory.Store = (*DB)(nil)

// memorySchema is migration 2: memories and working state. A memory's id
// is memory.NewID: it begins with its creation time in milliseconds,
// then random bits (IDs made by earlier versions are wholly random).
//
// Text and key are bytea, not text: a memory is kept byte for byte, and
// PostgreSQL's text cannot hold NUL, which valid UTF-8 may contain. Tags
// and the lease holder's identity are json (not jsonb, which refuses
// \u0000). Times have millisecond resolution, as in the SQLite store.
//
// memories.terms is the memory's tsvector, built in Go from
// terms.Tokens (see memoryTerms), not by a text search configuration, so
// that it holds exactly the tokens the SQLite store indexes.
//
// The GIN index has no pending list (fastupdate off): each insert updates
// the index itself, a little slower, so that a search never has to scan
// a list of up to gin_pending_list_limit (4 MB) of unindexed entries
// between vacuums.
//
// Writes to one namespace are serialized by a transaction-scoped
// advisory lock (lockNamespace); the unique partial indexes back the
// rules it enforces: one active memory per content and per (kind,
// non-empty key).
const memorySchema = `
CREATE TABLE memories (
	id            bigint PRIMARY KEY CHECK (id > 0), -- random; shown as 16 hex digits
	tenant        text NOT NULL,
	agent         text NOT NULL,
	kind          text NOT NULL,
	key           bytea NOT NULL,        -- UTF-8; '' when none
	text          bytea NOT NULL,        -- UTF-8, byte for byte as remembered
	tags          json NOT NULL,         -- JSON array of strings
	hash          bytea NOT NULL,        -- SHA-256 of kind, key and text (contentHash)
	session       text NOT NULL,         -- pod that remembered it
	created_at    timestamptz NOT NULL,  -- millisecond resolution
	superseded_by bigint,                -- memories.id of the replacement, NULL while active
	superseded_at timestamptz,
	terms         tsvector NOT NULL      -- memoryTerms(text, key and tags)
);
CREATE UNIQUE INDEX memories_active_hash ON memories (tenant, agent, hash)
	WHERE superseded_by IS NULL;
CREATE UNIQUE INDEX memories_active_key ON memories (tenant, agent, kind, key)
	WHERE superseded_by IS NULL AND key <> '';
CREATE INDEX memories_newest ON memories (tenant, agent, created_at, id);
CREATE INDEX memories_kind_newest ON memories (tenant, agent, kind, created_at, id);
CREATE INDEX memories_terms ON memories USING gin (terms) WITH (fastupdate = off);

CREATE TABLE memory_state (
	tenant           text NOT NULL,
	agent            text NOT NULL,
	name             text NOT NULL,
	version          bigint NOT NULL CHECK (version >= 0), -- 0 until first written
	state            bytea,               -- JSON value byte for byte, NULL at version 0
	updated_at       timestamptz,
	updated_by       text,                -- session
	lease_epoch      bigint NOT NULL,     -- epoch of the last lease granted; only grows
	lease_holder     text,                -- memory.HolderKey (session/pod UID), NULL when released
	lease_identity   json,                -- holder's apikey.Identity
	lease_expires_at timestamptz,
	PRIMARY KEY (tenant, agent, name),
	CHECK ((lease_holder IS NULL) = (lease_expires_at IS NULL))
);
`

// memoryLockClass is the first key of the two-key advisory locks that
// serialize writes to a memory namespace ("mem" in ASCII). Two-key locks
// never collide with single bigint key locks such as migrationLock.
const memoryLockClass int32 = 0x6d656d

// lockNamespace takes the transaction-scoped advisory lock of ns's
// memory writes: writes to one namespace, from any replica, run one at a
// time, and each sees every write committed before it (a read-committed
// statement's snapshot is taken after the lock is granted). Namespaces
// whose names hash alike share a lock, which costs only waiting.
func lockNamespace(ctx context.Context, tx pgx.Tx, ns memory.Namespace) error {
	if _, err := tx.Exec(ctx, sqlLockNamespace, memoryLockClass, namespaceLockKey(ns)); err != nil {
		return fmt.Errorf("lock namespace: %w", err)
	}
	return nil
}

// sqlLockNamespace takes the advisory lock of lockNamespace; its
// arguments are memoryLockClass and namespaceLockKey.
const sqlLockNamespace = `SELECT pg_advisory_xact_lock($1, hashtext($2))`

// namespaceLockKey is the text whose hashtext is the second key of ns's
// advisory lock: the tenant's length first, so that no two namespaces
// share the text.
func namespaceLockKey(ns memory.Namespace) string {
	return strconv.Itoa(len(ns.Tenant)) + ":" + ns.Tenant + "/" + ns.Agent
}

// millisUTC returns t at the millisecond resolution the store keeps, in UTC.
func millisUTC(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

const memoryColumns = `id, kind, key, text, tags, session, created_at, superseded_by, superseded_at`

// Statements whose plans TestMemoryQueryPlans checks.
const (
	sqlFindActiveByHash = `SELECT ` + memoryColumns + ` FROM memories
		WHERE tenant = $1 AND agent = $2 AND hash = $3 AND superseded_by IS NULL`
	sqlForget = `DELETE FROM memories WHERE id = $1 AND tenant = $2 AND agent = $3`
)

func scanMemory(row pgx.Row) (memory.Memory, error) {
	var (
		m         memory.Memory
		id        int64
		key, text []byte
		tags      []byte
		supBy     *int64
		supAt     *time.Time
		createdAt time.Time
	)
	if err := row.Scan(&id, &m.Kind, &key, &text, &tags, &m.Session, &createdAt, &supBy, &supAt); err != nil {
		return memory.Memory{}, err
	}
	m.ID = memory.FormatID(id)
	m.Key, m.Text = string(key), string(text)
	m.CreatedAt = createdAt.UTC()
	if supBy != nil {
		m.SupersededBy = memory.FormatID(*supBy)
	}
	if supAt != nil {
		m.SupersededAt = supAt.UTC()
	}
	if err := json.Unmarshal(tags, &m.Tags); err != nil {
		return memory.Memory{}, fmt.Errorf("decode tags of memory %s: %w", m.ID, err)
	}
	if len(m.Tags) == 0 {
		m.Tags = nil
	}
	return m, nil
}

const sqlInsertMemory = `INSERT INTO memories (id, tenant, agent, kind, key, text, tags, hash, session, created_at, terms)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::tsvector)`

// memoryInsertArgs returns the arguments of sqlInsertMemory for m of ns under
// id.
func memoryInsertArgs(ns memory.Namespace, m memory.Memory, id int64) ([]any, error) {
	tags := m.Tags
	if tags == nil {
		tags = []string{}
	}
	tagsJSON, err := json.Marshal(tags)
	if err != nil {
		return nil, fmt.Errorf("encode tags: %w", err)
	}
	return []any{id, ns.Tenant, ns.Agent, m.Kind, []byte(m.Key), []byte(m.Text), string(tagsJSON),
		memory.ContentHash(m.Kind, m.Key, m.Text), m.Session, millisUTC(m.CreatedAt), memoryTerms(m)}, nil
}

// insertMemory inserts m of ns under id, with its terms.
func insertMemory(ctx context.Context, tx pgx.Tx, ns memory.Namespace, m memory.Memory, id int64) error {
	args, err := memoryInsertArgs(ns, m, id)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sqlInsertMemory, args...); err != nil {
		return fmt.Errorf("insert memory: %w", err)
	}
	return nil
}

// recallCap bounds the work of one keyword recall: at most this many
// matching memories of the namespace are ranked by ts_rank (which reads
// each one's tsvector, a few µs a memory). A query matching more of
// them ("the user prefers" matches most memories) ranks the first
// recallCap matches the index yields instead of all of them: its answer
// is the best of a bounded, arbitrary subset, not of every match.
const recallCap = 2000

// recallSQL returns the statement and arguments for q, or "" if q has
// text but no searchable term. A search's arguments begin with mode, the
// pgx query mode to send it in (DB.searchMode).
//
// A search returns the memories of the namespace whose terms match
// memoryQuery(q.Text), best first by ts_rank (PostgreSQL has no BM25;
// see RecallMemories), then newest first, among the first recallCap
// matches of the namespace (all of them, when there are no more). The
// ranking carries only (id, created_at, rank); the full rows are read
// for the limit's worth that it returns.
func recallSQL(ns memory.Namespace, q memory.Query, mode pgx.QueryExecMode) (string, []any) {
	var filter strings.Builder
	args := []any{ns.Tenant, ns.Agent}
	filter.WriteString(`tenant = $1 AND agent = $2`)
	if q.Kind != "" {
		args = append(args, q.Kind)
		fmt.Fprintf(&filter, ` AND kind = $%d`, len(args))
	}
	if !q.History {
		filter.WriteString(` AND superseded_by IS NULL`)
	}
	// The limit (1 to 100) is written into the statement, not bound: a
	// generic plan of a bound LIMIT guesses it large, and for the newest
	// memories sorts the namespace instead of walking memories_newest.
	if strings.TrimSpace(q.Text) == "" {
		return fmt.Sprintf(`SELECT %s FROM memories WHERE %s ORDER BY created_at DESC, id DESC LIMIT %d`,
			memoryColumns, filter.String(), q.Limit), args
	}
	tsq := memoryQuery(q.Text)
	if tsq == "" {
		return "", nil
	}
	args = append(args, tsq)
	qi := len(args)
	args = append([]any{mode}, args...) // planned per call (see searchExecMode)
	return fmt.Sprintf(`SELECT %s FROM (
			SELECT id, created_at, score FROM (
				SELECT id, created_at, ts_rank(terms, $%d::tsquery) AS score FROM memories
				WHERE %s AND terms @@ $%d::tsquery LIMIT %d
			) s ORDER BY score DESC, created_at DESC, id DESC LIMIT %d
		) r JOIN memories m USING (id)
		ORDER BY r.score DESC, r.created_at DESC, r.id DESC`,
		"m."+strings.ReplaceAll(memoryColumns, ", ", ", m."), qi, filter.String(), qi, recallCap, q.Limit), args
}

// searchExecMode is how a keyword recall is sent: as the unnamed
// statement (its description cached by pgx), so that the server plans
// it for its own tenant, agent and terms every time. A named prepared
// statement, pgx's default, is planned for its values only 5 times;
// from then on PostgreSQL runs one generic plan whenever it estimates
// that plan no dearer than the average of those five, and a generic plan
// cannot tell a namespace of 5 memories from one of 100,000 or a rare
// term from a common one. Measured on 100,000 memories of one agent
// beside two small namespaces (EXPLAIN ANALYZE): the generic plan ANDs
// the term index with the namespace's memories_newest entries, 12-23 ms
// for a word in 111 memories, against 0.3-0.5 ms planning plus 0.4 ms
// execution for the plan made for the values; a small namespace's
// recall of common words read every match of every namespace, 11-15 ms
// against 0.5 ms. Planning each search costs about 0.35 ms.
//
// pgx refuses cache_describe on a connection without a description
// cache (description_cache_capacity=0 in the URL); there a search is
// sent in exec, also as the unnamed statement, its arguments as text
// (DB.searchMode).
const searchExecMode = pgx.QueryExecModeCacheDescribe

// RecallMemories implements memory.Store. PostgreSQL has no BM25: a
// search ranks by ts_rank with the default weights and no length
// normalization, in which each term's tokens that a memory holds add to
// its score, a term's repeats adding less and less. So a memory that
// holds all terms of a query comes before one that holds one (as with
// BM25 on memories of similar length), but unlike BM25 a rare term weighs
// no more than a common one. Equal ranks come newest first.
func (d *DB) RecallMemories(ctx context.Context, ns memory.Namespace, q memory.Query) ([]memory.Memory, error) {
	query, args := recallSQL(ns, q, d.searchMode)
	if query == "" {
		return nil, nil
	}
	rows, err := d.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: recall memories: %w", err)
	}
	defer rows.Close()
	var out []memory.Memory
	for rows.Next() {
		m, err := scanMemory(rows)
		if err != nil {
			return nil, fmt.Errorf("postgres: recall memories: %w", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: recall memories: %w", err)
	}
	return out, nil
}

// ForgetMemory implements memory.Store.
func (d *DB) ForgetMemory(ctx context.Context, ns memory.Namespace, idStr string) error {
	id, ok := memory.ParseID(idStr)
	if !ok {
		return memory.ErrNotFound
	}
	err := d.tx(ctx, func(tx pgx.Tx) error {
		if err := lockNamespace(ctx, tx, ns); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, sqlForget, id, ns.Tenant, ns.Agent)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.ErrNotFound
		}
		return nil
	})
	if errors.Is(err, memory.ErrNotFound) {
		return err
	}
	if err != nil {
		return fmt.Errorf("postgres: forget memory: %w", err)
	}
	return nil
}
