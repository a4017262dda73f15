package postgres

// Attacks on the implicit-transaction remember under every pgx query exec
// mode Open accepts (extended-protocol pipelines ended by one Sync; Open
// refuses simple_protocol, see TestOpenRefusesSimpleProtocol) and under
// server defaults that are not read committed (the explicit fallback).

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
)

var rememberExecModes = []string{"", "exec", "cache_describe", "describe_exec", "cache_statement"}

// TestAttackRememberModesAtomic: under every exec mode, with transactions
// defaulting to read committed (implicit transaction), repeatable read
// and serializable (explicit fallback):
//   - create, supersede and unchanged work;
//   - a deferred constraint trigger that fails at the commit makes the
//     remember fail, and nothing of it is stored (the old memory stays
//     active, no insert);
//   - a remember whose insert fails after its supersede ran (ID taken,
//     every try) is not stored either;
//   - no connection is left in a transaction, no setting leaks.
func TestAttackRememberModesAtomic(t *testing.T) {
	for _, level := range []string{"read committed", "repeatable read", "serializable"} {
		for _, mode := range rememberExecModes {
			name := mode
			if name == "" {
				name = "default"
			}
			t.Run(strings.ReplaceAll(level, " ", "_")+"/"+name, func(t *testing.T) {
				t.Parallel()
				db := openMode(t, mode, level, 2)
				ctx := context.Background()
				ns := memory.Namespace{Tenant: "t-modes", Agent: strings.ReplaceAll(level, " ", "_") + "/" + name}
				old, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "blue"))
				if err != nil || old.Status != memory.StatusCreated {
					t.Fatalf("create: %+v, %v", old, err)
				}
				if explicit := db.explicitRemember.Load(); explicit != (level != "read committed") {
					t.Errorf("explicit = %v under %s", explicit, level)
				}
				if r, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "blue")); err != nil || r.Status != memory.StatusUnchanged || r.ID != old.ID {
					t.Errorf("duplicate: %+v, %v; want unchanged %s", r, err, old.ID)
				}

				// Fails at the (implicit or explicit) commit.
				if _, err := db.pool.Exec(ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
					BEGIN IF NEW.text = 'green'::bytea THEN RAISE EXCEPTION 'refused at commit' USING ERRCODE = '23514'; END IF; RETURN NEW; END $$;
					CREATE CONSTRAINT TRIGGER refuse AFTER INSERT ON memories DEFERRABLE INITIALLY DEFERRED
					FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
					t.Fatal(err)
				}
				if r, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "green")); err == nil || !strings.Contains(err.Error(), "refused at commit") {
					t.Errorf("remember refused at commit = %+v, %v; want the trigger's error", r, err)
				}
				if n := rememberAttackCount(t, db, `text = 'green'::bytea`); n != 0 {
					t.Errorf("refused at commit, yet %d row stored", n)
				}
				if rememberAttackActive(t, db, old.ID) != 1 {
					t.Error("refused at commit, yet the old memory was superseded")
				}
				timeoutAttackSettings(t, db)
				rememberAttackNoOpenTx(t, db)

				// The insert fails after the supersede: its ID is taken, on every try.
				db.newID = func(time.Time) (int64, error) { return mustID(old.ID), nil }
				if r, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "red")); err == nil {
					t.Errorf("remember with its ID always taken = %+v, want an error", r)
				}
				db.newID = memory.NewID
				if n := rememberAttackCount(t, db, `text = 'red'::bytea`); n != 0 {
					t.Errorf("ID taken, yet %d row stored", n)
				}
				if rememberAttackActive(t, db, old.ID) != 1 {
					t.Error("ID taken, yet the old memory was superseded")
				}

				if _, err := db.pool.Exec(ctx, `DROP TRIGGER refuse ON memories`); err != nil {
					t.Fatal(err)
				}
				r, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "green"))
				if err != nil || r.Status != memory.StatusSuperseded || r.Supersedes != old.ID {
					t.Errorf("supersede: %+v, %v", r, err)
				}
				timeoutAttackSettings(t, db)
				rememberAttackNoOpenTx(t, db)
				rememberAttackInvariants(t, db)
			})
		}
	}
}

// TestAttackRememberKilledMidPipeline: the remember's backend is
// terminated while its insert runs (a BEFORE INSERT trigger sleeps),
// after its supersede: the remember fails and nothing of it is stored,
// in the implicit transaction and in the explicit fallback.
func TestAttackRememberKilledMidPipeline(t *testing.T) {
	for _, level := range []string{"read committed", "serializable"} {
		t.Run(strings.ReplaceAll(level, " ", "_"), func(t *testing.T) {
			t.Parallel()
			db := openMode(t, "", level, 2)
			ctx := context.Background()
			ns := memory.Namespace{Tenant: "t-kill", Agent: strings.ReplaceAll(level, " ", "_")}
			old, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "blue"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.pool.Exec(ctx, `CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_sleep(5); RETURN NEW; END $$;
				CREATE TRIGGER slow BEFORE INSERT ON memories FOR EACH ROW EXECUTE FUNCTION slow()`); err != nil {
				t.Fatal(err)
			}
			app := db.pool.Config().ConnConfig.RuntimeParams["application_name"]
			killed := make(chan error, 1)
			go func() {
				deadline := time.Now().Add(3 * time.Second)
				for time.Now().Before(deadline) {
					var n int
					err := db.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
						WHERE application_name = $1 AND wait_event = 'PgSleep' AND pid <> pg_backend_pid()`, app).Scan(&n)
					if err != nil || n > 0 {
						killed <- err
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
				killed <- fmt.Errorf("no remember to kill")
			}()
			r, err := db.RememberMemory(ctx, ns, rememberAttackMem("pref", "color", "green"))
			if kerr := <-killed; kerr != nil {
				t.Fatal(kerr)
			}
			if err == nil {
				t.Errorf("remember killed mid-pipeline = %+v, want an error", r)
			}
			if _, err := db.pool.Exec(ctx, `DROP TRIGGER slow ON memories`); err != nil {
				t.Fatal(err)
			}
			if n := rememberAttackCount(t, db, `text = 'green'::bytea`); n != 0 {
				t.Errorf("killed mid-pipeline, yet %d row stored", n)
			}
			if rememberAttackActive(t, db, old.ID) != 1 {
				t.Error("killed mid-pipeline, yet the old memory was superseded")
			}
			timeoutAttackSettings(t, db)
			rememberAttackNoOpenTx(t, db)
			rememberAttackInvariants(t, db)
		})
	}
}

// TestAttackRememberFallbackRace: on a fresh DB whose transactions default
// to serializable, many remembers race the first switch to explicit
// transactions (each may see 25001 and retry): every one succeeds once,
// one key ends with one active memory, and the DB has switched.
func TestAttackRememberFallbackRace(t *testing.T) {
	db := openMode(t, "", "serializable", 8)
	ctx := context.Background()
	ns := memory.Namespace{Tenant: "t-race", Agent: "a"}
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := ""
			if i%2 == 0 {
				key = "k"
			}
			_, err := db.RememberMemory(ctx, ns, rememberAttackMem("fact", key, fmt.Sprint("race ", i)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := rememberAttackCount(t, db, `tenant = 't-race'`); got != n {
		t.Errorf("%d memories stored, want %d", got, n)
	}
	if got := rememberAttackCount(t, db, `tenant = 't-race' AND key = 'k'::bytea AND superseded_by IS NULL`); got != 1 {
		t.Errorf("%d active memories under the key, want 1", got)
	}
	if !db.explicitRemember.Load() {
		t.Error("the DB did not switch to explicit transactions")
	}
	timeoutAttackSettings(t, db)
	rememberAttackNoOpenTx(t, db)
	rememberAttackInvariants(t, db)
}
