package signer_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/verify"
)

// downgradeDigests rewrites a closed SQLite store's signer_arg_digests to
// the table of schema 11 (a run column, from each digest's leaf) and sets
// user_version back to 11, as a file written by a binary from before
// migration 12.
func downgradeDigests(t *testing.T, dir string) {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`ALTER TABLE signer_arg_digests RENAME TO d12`,
		`CREATE TABLE signer_arg_digests (
			run TEXT NOT NULL, idx INTEGER NOT NULL, pos INTEGER NOT NULL, kind TEXT NOT NULL,
			tool TEXT NOT NULL, digest BLOB, PRIMARY KEY (idx, kind, pos)) STRICT`,
		`CREATE INDEX signer_arg_digests_run ON signer_arg_digests (run, idx, pos)`,
		`INSERT INTO signer_arg_digests SELECT l.run, d.idx, d.pos, d.kind, d.tool, d.digest FROM d12 d JOIN signer_leaves l USING (idx)`,
		`DROP TABLE d12`,
		`PRAGMA user_version = 11`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// reconScenario runs the same work on runs runs of a signer on SQLite
// (decides sent concurrently across runs, so that group commits hold
// records of several runs), with the signer restarted between the two
// phases per mode ("none", "restart", "migrate": restarted on a file
// turned back into schema 11), and returns each run's run.reconciled body
// with the unreported uses' log indexes replaced by the run_seq of their
// record.
func reconScenario(t *testing.T, mode string, runs int) []map[string]any {
	e := newEnv(t, nil)
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = e.register(agentTok)
	}
	each := func(f func(i int, run string)) {
		var wg sync.WaitGroup
		for i, run := range ids {
			wg.Add(1)
			go func() { defer wg.Done(); f(i, run) }()
		}
		wg.Wait()
	}
	bash := func(cmd string) signer.ToolUse {
		return signer.ToolUse{Name: "Bash", Args: json.RawMessage(fmt.Sprintf(`{"command":%q}`, cmd))}
	}
	each(func(i int, run string) {
		e.decide(agentTok, run, "c1", "Bash", `{"command":"ls"}`)
		e.decide(agentTok, run, "c2", "Bash", fmt.Sprintf(`{"command":"echo %d"}`, i))
		e.decide(agentTok, run, "c3", "WebFetch", `{"url":"https://example.com"}`)
	})
	var calls []signer.ModelCall
	for i, run := range ids {
		calls = append(calls, modelCall(run, bash("ls"), bash("rm"),
			signer.ToolUse{Name: "WebFetch", Args: json.RawMessage(`{"url":"https://example.com"}`)}, bash(fmt.Sprintf("echo %d", i))))
	}
	e.put(calls...)
	if _, err := e.s.DrainInbox(context.Background()); err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "restart":
		e.close()
		e.open()
	case "migrate":
		e.close()
		downgradeDigests(t, e.dir)
		e.open()
	}
	each(func(i int, run string) {
		e.decide(agentTok, run, "c4", "Bash", `{"command":"rm"}`)
	})
	calls = calls[:0]
	for _, run := range ids {
		c := modelCall(run, bash("ls"))
		c.ToolUsesDropped = 1
		calls = append(calls, c)
	}
	e.put(calls...)
	if _, err := e.s.DrainInbox(context.Background()); err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, run := range ids {
		if st := e.call(e.api, agentTok, "POST", "/v1/signer/runs/"+run+"/close", nil, nil); st != 200 {
			t.Fatalf("%s: close = %d", mode, st)
		}
		res, b := e.verify(run)
		if res.ModelCalls != 2 {
			t.Fatalf("%s: %+v", mode, res)
		}
		seqOf := map[int64]int64{}
		var body map[string]any
		for _, raw := range bundleRecords(b) {
			r, err := verify.ParseRecord(raw)
			if err != nil {
				t.Fatal(err)
			}
			seqOf[r.Index] = r.RunSeq
			if r.Type == verify.TypeRunReconciled {
				body = r.Body
			}
		}
		if body == nil {
			t.Fatalf("%s: run %s has no run.reconciled", mode, run)
		}
		j, _ := json.Marshal(body)
		var norm map[string]any
		json.Unmarshal(j, &norm)
		for _, u := range norm["unreported"].([]any) {
			m := u.(map[string]any)
			m["run_seq"] = seqOf[int64(m["index"].(float64))]
			delete(m, "index")
		}
		out = append(out, norm)
	}
	return out
}

// TestAttackReconcileAfterRestartAndMigration: the reconciliation of runs
// whose digests were reloaded from the store after a restart (and after
// migration 12 rebuilt their table) equals that of a signer that kept
// them in memory, and is what the work implies.
func TestAttackReconcileAfterRestartAndMigration(t *testing.T) {
	const runs = 6
	want := reconScenario(t, "none", runs)
	for i, w := range want {
		if w["unreported_count"].(float64) != 2 || w["decided_calls"].(float64) != 4 || w["tool_uses"].(float64) != 6 {
			t.Fatalf("run %d without restart: %v", i, w)
		}
	}
	t.Logf("run 0: %v", want[0])
	for _, mode := range []string{"restart", "migrate"} {
		got := reconScenario(t, mode, runs)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: run.reconciled = %v\nwant %v", mode, got, want)
		}
	}
}
