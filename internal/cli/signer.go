package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

type witnessConfig struct {
	name, vkey, url string
}

// witnesses parses Witnesses ("VKEY@URL").
func (c *ServeConfig) witnesses() ([]witnessConfig, error) {
	var out []witnessConfig
	for _, w := range c.Witnesses {
		i := strings.LastIndex(w, "@")
		if i < 0 {
			return nil, fmt.Errorf("--witness %q: want VKEY@URL", w)
		}
		vkey, raw := w[:i], w[i+1:]
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("--witness %q: bad vkey: %w", w, err)
		}
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--witness %q: bad URL", w)
		}
		out = append(out, witnessConfig{name: v.Name(), vkey: vkey, url: raw})
	}
	return out, nil
}

func newSigner(ctx context.Context, cfg ServeConfig, db *sqlite.DB, log *slog.Logger) (*signer.Signer, error) {
	ws, err := cfg.witnesses()
	if err != nil {
		return nil, usageError{err}
	}
	key := cfg.SignerKeyFile
	if key == "" {
		key = filepath.Join(cfg.DataDir, "signer-ed25519.pem")
	}
	opts := signer.Options{
		Store: db, KeyFile: key, Origin: cfg.SignerOrigin, PolicyDir: cfg.PolicyDir,
		IdleTimeout: cfg.SignerIdle, Log: log,
		WitnessSize: func(err error) (int64, bool) {
			var ce *witness.ConflictError
			if errors.As(err, &ce) {
				return ce.Size, true
			}
			return 0, false
		},
		WitnessQuorum: cfg.WitnessQuorum,
	}
	if opts.WitnessQuorum < 0 {
		opts.WitnessQuorum = len(ws)
	}
	for _, w := range ws {
		opts.Witnesses = append(opts.Witnesses, &witness.Client{URL: w.url, Name: w.name, HTTPClient: &http.Client{Timeout: 30 * time.Second}})
		opts.TrustedWitnesses = append(opts.TrustedWitnesses, verify.TrustedWitness{Name: w.name, VKey: w.vkey})
	}
	return signer.New(ctx, opts)
}
