package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/agentcustody/custody/internal/memory"
)

// recallCap bounds the work of one keyword recall: at most this many
// matching memories of the namespace are ranked by BM25 (which costs
// about 5-10 µs per memory). A query matching more of them ("the user
// prefers" matches most memories) ranks the namespace's newest recallCap
// matches (FTS5 walks its index in descending rowid, and a memory's ID,
// its rowid, begins with its creation time: memory.NewID) instead of all
// of them: its answer is the best of the newest recallCap matches, not of
// every match. (IDs made before IDs carried the time are random, so
// among those the bound keeps an arbitrary subset.)
const recallCap = 2000

// recallWiden is how many more FTS5 candidates than the limit the fast
// path of a keyword recall ranks before it filters them by namespace.
const recallWiden = 2

// recallFilter returns the namespace and query filter on memories x
// (tenant, agent, kind, active) and its arguments.
func recallFilter(ns memory.Namespace, q memory.Query) (string, []any) {
	var (
		filter strings.Builder
		args   []any
	)
	filter.WriteString(`x.tenant = ? AND x.agent = ?`)
	args = append(args, ns.Tenant, ns.Agent)
	if q.Kind != "" {
		filter.WriteString(` AND x.kind = ?`)
		args = append(args, q.Kind)
	}
	if !q.History {
		filter.WriteString(` AND x.superseded_by IS NULL`)
	}
	return filter.String(), args
}

// recallSQL returns the exact (bounded) statement and arguments for q, or
// "" if q has text but no searchable term.
//
// A search ranks, in a subquery that carries only (rowid, score,
// created_at), the newest recallCap matches of the namespace, so sorting
// many matches never holds their texts; the outer query reads the full
// rows of the few that are returned. The CROSS JOIN keeps the FTS index
// as the outer loop. It is exact when the namespace has at most
// recallCap matches.
func recallSQL(ns memory.Namespace, q memory.Query) (string, []any) {
	filter, args := recallFilter(ns, q)
	if strings.TrimSpace(q.Text) == "" {
		return `SELECT ` + strings.ReplaceAll(memoryColumns, "m.", "x.") + ` FROM memories x WHERE ` + filter +
			` ORDER BY x.created_at DESC, x.id DESC LIMIT ?`, append(args, q.Limit)
	}
	match := ftsQuery(q.Text)
	if match == "" {
		return "", nil
	}
	return `SELECT ` + memoryColumns + ` FROM (
			SELECT rid, score, created FROM (
				SELECT memories_fts.rowid AS rid, bm25(memories_fts) AS score, x.created_at AS created
				FROM memories_fts CROSS JOIN memories x ON x.id = memories_fts.rowid
				WHERE memories_fts MATCH ? AND ` + filter + `
				ORDER BY memories_fts.rowid DESC LIMIT ` + fmt.Sprint(recallCap) + `
			) ORDER BY score, created DESC, rid DESC LIMIT ?
		) r CROSS JOIN memories m ON m.id = r.rid
		ORDER BY r.score, r.created DESC, r.rid DESC`,
		append(append([]any{match}, args...), q.Limit)
}

// recallKindWiden is how many more candidates the fast path ranks when
// the recall is restricted to one kind (one of four in a typical
// namespace), so that the restriction still leaves the limit's worth.
const recallKindWiden = 4

// recallFastSQL returns the fast path of a keyword recall, one
// statement over the whole index:
//   - a: the newest recallCap+1 matches with their FTS5 rank (bm25), no
//     row read;
//   - t: the best n of a, and every match tied with the n-th (so the
//     cut never falls inside a tie): the candidates;
//   - r: those of t in the namespace, ranked, carrying only (rowid,
//     score, created_at) until the limit is taken; the rows of those
//     few are joined last (in no particular order: recallFast sorts
//     them).
//
// It returns one row per memory of r (matches, candidates, rowid, score,
// memoryColumns), or, when r is empty, a single row whose rowid is NULL
// and whose other columns are zero values:
// matches is the number of rows of a (recallCap+1 means more than the
// cap), candidates the number of rows of t.
func recallFastSQL(ns memory.Namespace, q memory.Query, match string, n int) (string, []any) {
	filter, args := recallFilter(ns, q)
	return `WITH a AS MATERIALIZED (
			SELECT rowid AS rid, rank AS score FROM memories_fts WHERE memories_fts MATCH ?
			ORDER BY rowid DESC LIMIT ` + fmt.Sprint(recallCap+1) + `
		), t AS MATERIALIZED (
			SELECT rid, score FROM a
			WHERE score <= coalesce((SELECT score FROM a ORDER BY score LIMIT 1 OFFSET ?), 1e308)
		), r AS (
			SELECT t.rid, t.score, x.created_at AS created FROM t CROSS JOIN memories x ON x.id = t.rid
			WHERE ` + filter + `
			ORDER BY t.score, x.created_at DESC, x.id DESC LIMIT ?
		)
		SELECT s.matches, s.candidates, r.rid, coalesce(r.score, 0),
			coalesce(m.id, 0), coalesce(m.kind, ''), coalesce(m.key, ''), coalesce(m.text, ''),
			coalesce(m.tags, '[]'), coalesce(m.session, ''), coalesce(m.created_at, 0),
			m.superseded_by, m.superseded_at FROM (
			SELECT (SELECT count(*) FROM a) AS matches, (SELECT count(*) FROM t) AS candidates
		) s LEFT JOIN r ON true LEFT JOIN memories m ON m.id = r.rid`,
		append(append([]any{match, n - 1}, args...), q.Limit)
}

// RecallMemories implements memory.Store.
//
// A keyword recall first ranks the best few candidates of the whole
// index, with every match tied at the cut (the fast path: no row is read
// until the ranking is done), and keeps those of the namespace (see
// recallFast for when that answer is exact). Otherwise (candidates
// mostly of other namespaces, or a query matching more than recallCap
// memories) it runs recallSQL, which filters by namespace before
// ranking.
func (d *DB) RecallMemories(ctx context.Context, ns memory.Namespace, q memory.Query) ([]memory.Memory, error) {
	out, err := d.recall(ctx, ns, q)
	if err != nil {
		return nil, fmt.Errorf("sqlite: recall memories: %w", err)
	}
	return out, nil
}

func (d *DB) recall(ctx context.Context, ns memory.Namespace, q memory.Query) ([]memory.Memory, error) {
	if match := ftsQuery(q.Text); match != "" {
		out, ok, err := d.recallFast(ctx, ns, q, match)
		if err != nil || ok {
			return out, err
		}
	}
	query, args := recallSQL(ns, q)
	if query == "" {
		return nil, nil
	}
	st, err := d.stmts.get(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []memory.Memory
	for rows.Next() {
		m, err := scanMemory(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// recallFast runs the fast path; ok is false if its answer is not known
// to be exact. It is exact when the query matches at most recallCap
// memories and either the limit is filled (every match outside the
// candidates ranks strictly after every candidate) or every match was a
// candidate.
func (d *DB) recallFast(ctx context.Context, ns memory.Namespace, q memory.Query, match string) (out []memory.Memory, ok bool, err error) {
	n := recallWiden*q.Limit + 8
	if q.Kind != "" {
		n *= recallKindWiden
	}
	query, args := recallFastSQL(ns, q, match, n)
	st, err := d.stmts.get(ctx, query)
	if err != nil {
		return nil, false, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var (
		matches    int
		candidates int
		score      float64
		rid        sql.NullInt64 // NULL: no candidate is in the namespace
		row        memoryRow
		dest       = append([]any{&matches, &candidates, &rid, &score}, row.dest()...)
		ranked     []rankedMemory
	)
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, false, err
		}
		if !rid.Valid {
			break
		}
		m, err := row.memory()
		if err != nil {
			return nil, false, err
		}
		ranked = append(ranked, rankedMemory{score: score, created: row.created, id: row.id, m: m})
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	// The statement ranks r but joins the rows after it: put them back
	// in rank order.
	slices.SortFunc(ranked, compareRanked)
	for _, r := range ranked {
		out = append(out, r.m)
	}
	switch {
	case matches > recallCap:
		return nil, false, nil
	case len(out) == q.Limit || candidates == matches:
		return out, true, nil
	}
	return nil, false, nil
}

// rankedMemory is a memory with the keys a keyword recall orders by.
type rankedMemory struct {
	score   float64 // FTS5 rank (bm25): lower is better
	created int64   // unix milliseconds
	id      int64
	m       memory.Memory
}

// compareRanked orders as a keyword recall does: by score, then newest
// first, then by descending ID.
func compareRanked(a, b rankedMemory) int {
	if c := cmp.Compare(a.score, b.score); c != 0 {
		return c
	}
	if c := cmp.Compare(b.created, a.created); c != 0 {
		return c
	}
	return cmp.Compare(b.id, a.id)
}
