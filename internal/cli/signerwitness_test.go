package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/verify"
)

// TestSignerWitnessMisbehaviourExposed: serve's signer wiring counts a
// witness's cosignatures that do not verify with its configured vkey
// (custody_signer_witness_bad_cosignatures_total{witness}), and a
// witness's fork answer halts writes, fails the signer_log readiness
// check and sets custody_signer_log_halted{reason="fork"} — both hostile
// witnesses on loopback.
func TestSignerWitnessMisbehaviourExposed(t *testing.T) {
	ctx := context.Background()
	newVKey := func(name string) (string, uint32) {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		must(t, err)
		vkey, err := verify.NewCosignatureVerifierKey(name, pub)
		must(t, err)
		return vkey, verify.CosignatureKeyHash(name, pub)
	}
	vkey1, hash1 := newVKey("w1.example")
	badCosig := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		sig := make([]byte, 4+8+ed25519.SignatureSize)
		binary.BigEndian.PutUint32(sig, hash1)
		rand.Read(sig[4:])
		io.WriteString(rw, "— w1.example "+base64.StdEncoding.EncodeToString(sig)+"\n")
	}))
	defer badCosig.Close()
	vkey2, _ := newVKey("w2.example")
	forkAnswer := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		http.Error(rw, "checkpoint root differs from the cosigned root at the same size", http.StatusConflict)
	}))
	defer forkAnswer.Close()

	dir := t.TempDir()
	db, err := sqlite.Open(ctx, dir)
	must(t, err)
	defer db.Close()
	cfg := Defaults()
	cfg.DataDir = dir
	cfg.Witnesses = []string{vkey1 + "@" + badCosig.URL, vkey2 + "@" + forkAnswer.URL}
	reg := prometheus.NewRegistry()
	sl := &signerSlot{keys: &apikey.Service{}}
	sl.registerMetrics(reg)
	s, err := newSigner(ctx, cfg, db, slog.New(slog.DiscardHandler), sl.onBadCosignature, signerHooks{})
	must(t, err)
	sl.cur.Store(&signerHandlers{s: s})
	defer s.Close()

	if err := sl.logReady(ctx); err != nil {
		t.Fatalf("signer_log readiness before any checkpoint = %v, want ready", err)
	}
	id := apikey.Identity{Tenant: "agents", Agent: "a", Session: "p", Method: "static"}
	if _, err := s.Register(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Checkpoint(ctx); !errors.Is(err, signer.ErrLogRollback) {
		t.Fatalf("Checkpoint() with a witness answering fork = %v, want ErrLogRollback", err)
	}
	if got := gathered(t, reg, "custody_signer_witness_bad_cosignatures_total", "witness", "w1.example"); got != 1 {
		t.Errorf("custody_signer_witness_bad_cosignatures_total{witness=w1.example} = %v, want 1", got)
	}
	if err := sl.logReady(ctx); err == nil || !strings.Contains(err.Error(), "forked") {
		t.Errorf("signer_log readiness after a fork answer = %v, want a failure naming the fork", err)
	}
	if _, err := s.Register(ctx, id); !errors.Is(err, signer.ErrLogRollback) {
		t.Errorf("Register() after a fork answer = %v, want ErrLogRollback", err)
	}
	for reason, want := range map[string]float64{"fork": 1, "rollback": 0} {
		if got := gathered(t, reg, "custody_signer_log_halted", "reason", reason); got != want {
			t.Errorf("custody_signer_log_halted{reason=%s} = %v, want %v", reason, got, want)
		}
	}
	if err := s.AcknowledgeRollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sl.logReady(ctx); err != nil {
		t.Errorf("signer_log readiness after acknowledgement = %v, want ready", err)
	}
	if got := gathered(t, reg, "custody_signer_log_halted", "reason", "fork"); got != 0 {
		t.Errorf("custody_signer_log_halted{reason=fork} after acknowledgement = %v, want 0", got)
	}
}

// gathered returns the value of the counter or gauge name{label=value}
// in reg; it fails the test if there is none.
func gathered(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	must(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{%s=%q}", name, label, value)
	return 0
}
