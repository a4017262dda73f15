package cli

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/policy"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/tlsfile"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

type witnessConfig struct {
	name, vkey, url string
}

// witnesses parses Witnesses ("VKEY@URL").
func (c *ServeConfig) witnesses() ([]witnessConfig, error) {
	var out []witnessConfig
	for n, w := range c.Witnesses {
		// Errors name the witness by position: the value may hold a
		// password (user info, refused below), and the '@' that splits it
		// may be the user info's.
		i := strings.LastIndex(w, "@")
		if i < 0 {
			return nil, fmt.Errorf("--witness #%d: want VKEY@URL", n+1)
		}
		vkey, raw := w[:i], w[i+1:]
		name, err := vkeyName(vkey)
		if err != nil {
			return nil, fmt.Errorf("--witness #%d: bad vkey (want VKEY@URL, the URL without user info): %w", n+1, err)
		}
		// The URL is a prefix that paths are appended to: no query or
		// fragment, which would swallow them.
		if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
			u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
			return nil, fmt.Errorf("--witness #%d (%s): URL %s: want http(s)://host[/path] without user info, query or fragment", n+1, name, urlForError(raw))
		}
		out = append(out, witnessConfig{name: name, vkey: vkey, url: raw})
	}
	return out, nil
}

// vkeyName checks the shape of a C2SP vkey, NAME+HASH+BASE64 with an
// Ed25519 key of algorithm 0x01 (note) or 0x04 (cosignature/v1), and
// returns NAME. (x/mod's note parser knows only 0x01.)
func vkeyName(vkey string) (string, error) {
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 || parts[0] == "" || len(parts[1]) != 8 {
		return "", errors.New("want NAME+HASH+KEY")
	}
	if _, err := hex.DecodeString(parts[1]); err != nil {
		return "", errors.New("key hash is not 8 hex digits")
	}
	key, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(key) != 33 || (key[0] != 0x01 && key[0] != 0x04) {
		return "", errors.New("key is not an Ed25519 note or cosignature/v1 key")
	}
	return parts[0], nil
}

// newSigner starts the signer of cfg on db. onBadCosignature, if not nil,
// is called with a witness's name for each cosignature it answered that
// does not verify with its configured vkey (the line is dropped).
// signerHooks connect the signer to this replica's gateway and metrics
// (zero: none): FlushInbox writes its queued model calls, RevokeRunTokens
// revokes a closing run's gateway tokens, OnCommit counts group commits
// (signer.Options).
type signerHooks struct {
	FlushInbox      func(context.Context) error
	RevokeRunTokens func(ctx context.Context, tenant, agent, run string) error
	OnCommit        func(records int, took time.Duration)
}

func newSigner(ctx context.Context, cfg ServeConfig, db signer.Store, log *slog.Logger, onBadCosignature func(witness string), hooks signerHooks) (*signer.Signer, error) {
	ws, err := cfg.witnesses()
	if err != nil {
		return nil, usageError{err}
	}
	key := cfg.SignerKeyFile
	if key == "" {
		key = filepath.Join(cfg.DataDir, signerKeyFile)
	}
	opts := signer.Options{
		Store: db, KeyFile: key, Origin: cfg.SignerOrigin, PolicyDir: cfg.PolicyDir,
		Shared:      cfg.DatabaseURL != "", // replicas take turns on one log
		IdleTimeout: cfg.SignerIdle, MaxOpenRuns: cfg.SignerMaxOpenRuns, ApprovalTTL: cfg.ApprovalTTL, Log: log, FlushInbox: hooks.FlushInbox, RevokeRunTokens: hooks.RevokeRunTokens,
		OnCommit: hooks.OnCommit,
		WitnessSize: func(err error) (int64, bool) {
			var ce *witness.ConflictError
			if errors.As(err, &ce) {
				return ce.Size, true
			}
			return 0, false
		},
		WitnessQuorum: cfg.WitnessQuorum,
	}
	if cfg.PolicyResolve {
		e, err := policy.New(policy.Options{Resolve: true, Log: log})
		if err != nil {
			return nil, err
		}
		opts.Engine = e
	}
	if opts.WitnessQuorum < 0 {
		opts.WitnessQuorum = len(ws)
	}
	wt, err := tlsfile.ClientTransport(cfg.WitnessCAFile)
	if err != nil {
		return nil, usageError{fmt.Errorf("--witness-ca-file: %w", err)}
	}
	for _, w := range ws {
		opts.Witnesses = append(opts.Witnesses, &witness.Client{URL: w.url, Name: w.name, HTTPClient: &http.Client{Timeout: 30 * time.Second, Transport: wt}})
		opts.TrustedWitnesses = append(opts.TrustedWitnesses, verify.TrustedWitness{Name: w.name, VKey: w.vkey})
	}
	if onBadCosignature != nil {
		opts.OnBadCosignature = func(i int) { onBadCosignature(ws[i].name) }
	}
	return signer.New(ctx, opts)
}
