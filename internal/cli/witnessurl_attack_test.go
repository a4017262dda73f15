package cli

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/agentcustody/custody/internal/witness"
)

// TestAttackWitnessURLQueryOrFragment: --witness VKEY@URL is checked for
// a scheme and a host only, then the client appends "/add-checkpoint" to
// the URL as a string (witness.Client: TrimSuffix(URL, "/") +
// "/add-checkpoint"). A URL with a query or a fragment — accepted by
// Validate — therefore sends every checkpoint to another path: after a
// '?' the suffix becomes part of the query, after a '#' it is dropped
// with the fragment, and the witness's prefix itself is what is POSTed
// to. The gateway refuses the same shapes in its upstream URLs
// (gateway.parseUpstream: no userinfo, query or fragment); the witness
// URL must be refused as well, or be joined as a URL.
func TestAttackWitnessURLQueryOrFragment(t *testing.T) {
	_, vkey, err := note.GenerateKey(rand.Reader, "w1.example")
	must(t, err)
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.URL.Path + "?" + r.URL.RawQuery:
		default:
		}
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer srv.Close()
	for _, suffix := range []string{"/tlog?shard=1", "/tlog#frag"} {
		t.Run(suffix, func(t *testing.T) {
			cfg := Defaults()
			cfg.Plaintext = []string{"all"}
			cfg.Witnesses = []string{vkey + "@" + srv.URL + suffix}
			if err := cfg.Validate(); err != nil {
				return // refused at start: nothing is misrouted
			}
			ws, err := cfg.witnesses()
			must(t, err)
			c := &witness.Client{URL: ws[0].url, Name: ws[0].name}
			_, _ = c.AddCheckpoint(context.Background(), 0, tlog.TreeProof{}, []byte("custody.local/log\n1\nAAAA\n\n— x AAAA\n"))
			path := <-got
			if !strings.HasPrefix(path, "/tlog/add-checkpoint?") {
				t.Fatalf("--witness %q passed Validate, but the checkpoint was POSTed to %q, not /tlog/add-checkpoint", cfg.Witnesses[0], path)
			}
		})
	}
}
