package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentcustody/custody/internal/memory"
)

// recallCap bounds the work of one keyword recall: at most this many
// matching memories of the namespace are ranked by BM25 (which costs
// about 5-10 µs per memory). A query matching more of them ("the user
// prefers" matches most memories) ranks the namespace's newest recallCap
// matches (FTS5 walks its index in descending rowid, the order memories
// were written) instead of all of them: its answer is the best of the
// newest recallCap matches, not of every match.
const recallCap = 2000

// recallWiden is how many more FTS5 candidates than the limit the fast
// path of a keyword recall ranks before it filters them by namespace.
const recallWiden = 2

// sqlRecallProbe counts the matches of an FTS5 query in the whole index,
// up to recallCap+1 (no ranking, no row read).
const sqlRecallProbe = `SELECT count(*) FROM (SELECT 1 FROM memories_fts WHERE memories_fts MATCH ? LIMIT ?)`

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

// recallFastSQL returns the fast path of a keyword recall: the best
// n candidates of the whole index by FTS5 rank (bm25), ranked without
// reading a row, then filtered by namespace, carrying only (rowid,
// score, created_at) until the limit is taken. Each row is
// memoryColumns, its score, the number of candidates and the worst
// candidate's score.
func recallFastSQL(ns memory.Namespace, q memory.Query, match string, n int) (string, []any) {
	filter, args := recallFilter(ns, q)
	return `WITH c AS MATERIALIZED (
			SELECT rowid AS rid, rank AS score FROM memories_fts WHERE memories_fts MATCH ? ORDER BY rank LIMIT ?
		), r AS (
			SELECT c.rid, c.score, x.created_at AS created FROM c CROSS JOIN memories x ON x.id = c.rid
			WHERE ` + filter + `
			ORDER BY c.score, x.created_at DESC, x.id DESC LIMIT ?
		)
		SELECT ` + memoryColumns + `, r.score, (SELECT count(*) FROM c), (SELECT max(score) FROM c)
		FROM r CROSS JOIN memories m ON m.id = r.rid
		ORDER BY r.score, r.created DESC, r.rid DESC`,
		append(append([]any{match, n}, args...), q.Limit)
}

// RecallMemories implements memory.Store.
//
// A keyword recall whose query matches at most recallCap memories of the
// whole index first ranks the best few candidates of the index (the fast
// path: no row is read until the ranking is done) and keeps those of the
// namespace; the answer is exact when the candidates hold the limit's
// worth of the namespace's memories strictly better than the worst
// candidate, or every match. Otherwise (candidates mostly of other
// namespaces, ties at the cut, or a query matching more than recallCap
// memories) it runs recallSQL, which filters by namespace before ranking.
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
// to be exact (see RecallMemories).
func (d *DB) recallFast(ctx context.Context, ns memory.Namespace, q memory.Query, match string) (out []memory.Memory, ok bool, err error) {
	probe, err := d.stmts.get(ctx, sqlRecallProbe)
	if err != nil {
		return nil, false, err
	}
	var matches int
	if err := probe.QueryRowContext(ctx, match, recallCap+1).Scan(&matches); err != nil {
		return nil, false, err
	}
	if matches > recallCap {
		return nil, false, nil
	}
	n := recallWiden*q.Limit + 8
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
		last, worst float64
		candidates  int
	)
	for rows.Next() {
		m, err := scanMemory(scanFunc(func(dest ...any) error {
			return rows.Scan(append(dest, &last, &candidates, &worst)...)
		}))
		if err != nil {
			return nil, false, err
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, false, err
	}
	switch {
	case matches < n || (len(out) > 0 && candidates < n):
		return out, true, nil // every match was a candidate
	case len(out) == q.Limit && last < worst:
		return out, true, nil // no match outside the candidates ranks before the last
	}
	return nil, false, nil
}

// scanFunc is a scanner from a function.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }
