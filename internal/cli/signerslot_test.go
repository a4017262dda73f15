package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func attackGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func attackPoll(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestStandbyRecoversAfterItsKeyIsFixed: a replica that failed to start
// the signer (another log key) answers signer_unavailable; once its key is
// fixed (as a corrected Secret would be) and another replica holds the
// lease, it is a plain standby again (signer_standby) and stays ready.
// It once kept its start error, and was not ready, until it itself held
// the lease, which never happened while another replica did.
func TestStandbyRecoversAfterItsKeyIsFixed(t *testing.T) {
	p := newPGReplicas(t)
	keysA, keysB := filepath.Join(p.dir, "keys-a"), filepath.Join(p.dir, "keys-b")

	a, stopA := p.start("a", keysA)
	ka := p.key(a)
	attackPoll(t, 20*time.Second, "a to run the signer", func() bool {
		st, _, _ := p.do("POST", "http://"+a.api+"/v1/signer/runs", ka, "")
		return st == 201
	})
	stopA()

	b, _ := p.start("b", keysB) // another log key: cannot start the signer
	kb := p.key(b)
	attackPoll(t, 20*time.Second, "b to refuse signer calls as unavailable", func() bool {
		st, body, _ := p.do("POST", "http://"+b.api+"/v1/signer/runs", kb, "")
		return st == 503 && strings.Contains(body, "signer_unavailable")
	})

	c, _ := p.start("c", keysA) // the right key: takes the lease b released
	kc := p.key(c)
	attackPoll(t, 30*time.Second, "c to run the signer", func() bool {
		st, _, _ := p.do("POST", "http://"+c.api+"/v1/signer/runs", kc, "")
		return st == 201
	})

	// The operator fixes b's key.
	good, err := os.ReadFile(filepath.Join(keysA, signerKeyFile))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(keysB, signerKeyFile), good, 0o600))

	// Once its key is fixed, b is a plain standby: signer_standby, ready.
	attackPoll(t, 40*time.Second, "b to stand by (signer_standby) after its key was fixed", func() bool {
		st, body, _ := p.do("POST", "http://"+b.api+"/v1/signer/runs", kb, "")
		return st == 503 && strings.Contains(body, "signer_standby")
	})
	if st, body := attackGet(t, "http://"+b.metrics+"/readyz"); st != 200 {
		t.Fatalf("standby b not ready: %d %s", st, body)
	}
}

// TestFailedWriterReleasesTheLease: the writer's group commit fails and
// its reload fails too (the log table renamed away for a moment; in life a
// pool that cannot reconnect while the lease's own connection lives on),
// so its signer refuses every write for good. It must give the lease up
// so that a fresh signer takes over once the cause is gone; it once kept
// the lease, reported itself the writer, and the log stayed unwritable.
func TestFailedWriterReleasesTheLease(t *testing.T) {
	p := newPGReplicas(t)
	keys := filepath.Join(p.dir, "keys")
	a, _ := p.start("a", keys)
	b, _ := p.start("b", keys)
	var writer, standby replica
	keyOf := map[replica]string{a: p.key(a), b: p.key(b)}
	attackPoll(t, 20*time.Second, "a writer", func() bool {
		for _, r := range []replica{a, b} {
			if st, _, _ := p.do("POST", "http://"+r.api+"/v1/signer/runs", keyOf[r], ""); st == 201 {
				writer = r
				return true
			}
		}
		return false
	})
	standby = b
	if writer == b {
		standby = a
	}
	kw := keyOf[writer]

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.db)
	must(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `ALTER TABLE signer_leaves RENAME TO signer_leaves_away`)
	must(t, err)
	st, body, _ := p.do("POST", "http://"+writer.api+"/v1/signer/runs", kw, "")
	t.Logf("run while the table is away: %d %s", st, strings.TrimSpace(body))
	_, err = conn.Exec(ctx, `ALTER TABLE signer_leaves_away RENAME TO signer_leaves`)
	must(t, err)

	// The cause is gone. Give the cluster 20 s to write again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		ok := false
		for _, r := range []replica{writer, standby} {
			if st, _, _ := p.do("POST", "http://"+r.api+"/v1/signer/runs", keyOf[r], ""); st == 201 {
				ok = true
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			st, body, _ := p.do("POST", "http://"+writer.api+"/v1/signer/runs", kw, "")
			rst, rbody := attackGet(t, "http://"+writer.metrics+"/readyz")
			_, m := attackGet(t, "http://"+writer.metrics+"/metrics")
			gauge := "custody_signer_writer 0"
			if strings.Contains(m, "custody_signer_writer 1") {
				gauge = "custody_signer_writer 1"
			}
			sst, sbody, _ := p.do("POST", "http://"+standby.api+"/v1/signer/runs", keyOf[standby], "")
			t.Fatalf("20 s after the cause was fixed no replica can write: writer answers %d %s, its /readyz %d %s, %s; standby answers %d %s",
				st, strings.TrimSpace(body), rst, strings.TrimSpace(rbody), gauge, sst, strings.TrimSpace(sbody))
		}
		time.Sleep(200 * time.Millisecond)
	}
}
