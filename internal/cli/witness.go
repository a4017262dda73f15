package cli

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/internal/store/sqlite"
	"github.com/agentcustody/custody/internal/tlsfile"
	"github.com/agentcustody/custody/internal/witness"
	"github.com/agentcustody/custody/verify"
)

// WitnessConfig configures `custody witness serve`. Every field is a flag
// and may also be set with CUSTODY_WITNESS_<FLAG_NAME>.
type WitnessConfig struct {
	// Listen serves POST /add-checkpoint (C2SP tlog-witness) and GET
	// /healthz. Default "127.0.0.1:8869".
	Listen string
	// DataDir holds the witness's SQLite database (the latest cosigned
	// tree per log). Default "custody-witness-data".
	DataDir string
	// DatabaseURL, if set, keeps the trees in PostgreSQL instead (several
	// witness replicas may share it: the compare-and-swap is atomic across
	// them). Give it as CUSTODY_WITNESS_DATABASE_URL from a Secret.
	DatabaseURL string
	// Name is the witness's key name, e.g. "w1.example". Required.
	Name string
	// KeyFile is the Ed25519 PKCS#8 PEM signing key, created (0600) if
	// missing. Default <data-dir>/witness-ed25519.pem.
	KeyFile string
	// Logs are the logs to follow, each ORIGIN=VKEY with VKEY the log's
	// note verifier key; repeat an origin to trust several keys. At least
	// one is required.
	Logs []string
	// LogLevel is debug, info, warn or error. Default "info".
	LogLevel string
	// TLSCertFile and TLSKeyFile are the PEM serving certificate and key,
	// re-read every 10 s (package tlsfile). Required unless Plaintext.
	TLSCertFile, TLSKeyFile string
	// Plaintext serves plain HTTP (behind a TLS-terminating proxy, or on
	// loopback).
	Plaintext bool
}

// WitnessDefaults returns the default witness configuration.
func WitnessDefaults() WitnessConfig {
	return WitnessConfig{Listen: "127.0.0.1:8869", DataDir: "custody-witness-data", LogLevel: "info"}
}

// RegisterFlags registers c's fields as kebab-case flags on fs.
func (c *WitnessConfig) RegisterFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", c.Listen, "address for POST /add-checkpoint and /healthz")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory of the witness database")
	fs.StringVar(&c.DatabaseURL, "database-url", c.DatabaseURL, "PostgreSQL connection URL for the trees (prefer CUSTODY_WITNESS_DATABASE_URL); empty uses SQLite in --data-dir")
	fs.StringVar(&c.Name, "name", c.Name, "witness name, the key name of its cosignatures (required)")
	fs.StringVar(&c.KeyFile, "key-file", c.KeyFile, "Ed25519 PEM signing key, created 0600 if missing (default <data-dir>/witness-ed25519.pem)")
	fs.StringArrayVar(&c.Logs, "log", c.Logs, "log to follow as ORIGIN=VKEY (the log's note verifier key); repeatable")
	fs.StringVar(&c.LogLevel, "log-level", c.LogLevel, "debug, info, warn or error")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", c.TLSCertFile, "PEM serving certificate (leaf first), re-read every 10s; required unless --plaintext")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", c.TLSKeyFile, "PEM private key of --tls-cert-file")
	fs.BoolVar(&c.Plaintext, "plaintext", c.Plaintext, "serve plain HTTP instead of TLS (behind a TLS-terminating proxy, or on loopback)")
	markEnvNonEmpty(fs, "database-url")
}

// Validate checks c and returns the logs to follow.
func (c *WitnessConfig) Validate() ([]witness.LogConfig, error) {
	if c.Name == "" {
		return nil, errors.New("--name is required")
	}
	if c.Listen == "" || c.DataDir == "" {
		return nil, errors.New("--listen and --data-dir must not be empty")
	}
	if _, err := parseLevel(c.LogLevel); err != nil {
		return nil, err
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return nil, errors.New("--tls-cert-file and --tls-key-file go together")
	}
	if c.TLSCertFile == "" && !c.Plaintext {
		return nil, errors.New("no TLS certificate: set --tls-cert-file and --tls-key-file, or --plaintext")
	}
	if len(c.Logs) == 0 {
		return nil, errors.New("at least one --log ORIGIN=VKEY is required")
	}
	keys := map[string][]string{}
	for _, l := range c.Logs {
		origin, vkey, ok := strings.Cut(l, "=")
		if !ok || origin == "" || vkey == "" {
			return nil, fmt.Errorf("--log %q: want ORIGIN=VKEY", l)
		}
		keys[origin] = append(keys[origin], vkey)
	}
	logs := make([]witness.LogConfig, 0, len(keys))
	for origin, vkeys := range keys {
		logs = append(logs, witness.LogConfig{Origin: origin, VerifierKeys: vkeys})
	}
	sort.Slice(logs, func(i, j int) bool { return logs[i].Origin < logs[j].Origin })
	return logs, nil
}

func (c *WitnessConfig) keyFile() string {
	if c.KeyFile != "" {
		return c.KeyFile
	}
	return filepath.Join(c.DataDir, witnessKeyFile)
}

// witnessKeyFile is the witness key's file in --data-dir by default.
const witnessKeyFile = "witness-ed25519.pem"

// newWitnessCmd is `custody witness`: serve and key.
func newWitnessCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "Run a C2SP tlog-witness that cosigns checkpoints, or print its key",
		Long: `A witness is an outside party that cosigns a log's checkpoints after checking
that each is consistent with the last one it cosigned (C2SP tlog-witness), so a
signer log that is rolled back or forked is detected. Run it on another host
and under another operator than the signer.`,
	}
	cmd.AddCommand(newWitnessServeCmd(env), newWitnessKeyCmd(env))
	return cmd
}

func newWitnessServeCmd(env Env) *cobra.Command {
	cfg := WitnessDefaults()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve POST /add-checkpoint for the configured logs",
		Long: `Serve a C2SP tlog-witness: POST /add-checkpoint verifies the log's signature
and the consistency proof from the last tree it cosigned, stores the new tree
(never going backwards) and answers with a cosignature/v1 line.

Example:
  custody witness serve --name w1.example --data-dir /var/lib/custody-witness \
    --log 'signer.custody.example/log=signer.custody.example/log+1dde4531+AT…'

Every flag can also be set as CUSTODY_WITNESS_<FLAG>, e.g. CUSTODY_WITNESS_NAME.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags(), "CUSTODY_WITNESS_", env); err != nil {
				return err
			}
			logs, err := cfg.Validate()
			if err != nil {
				return usageError{err}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveWitness(ctx, cfg, logs, cmd.ErrOrStderr())
		},
	}
	cfg.RegisterFlags(cmd.Flags())
	return cmd
}

func serveWitness(ctx context.Context, cfg WitnessConfig, logs []witness.LogConfig, logw io.Writer) error {
	level, _ := parseLevel(cfg.LogLevel)
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: level}))
	if cfg.DatabaseURL == "" || cfg.KeyFile == "" {
		// Created here, so that the check below sees it as it will be used.
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
	}
	if err := checkDataDir("--data-dir", cfg.DataDir, sqlite.FileName, sqlite.FileName+"-wal", sqlite.FileName+"-shm", witnessKeyFile); err != nil {
		return err
	}
	key, err := witness.LoadOrCreateKey(cfg.keyFile())
	if err != nil {
		return err
	}
	var db interface {
		witness.Store
		Close() error
	}
	if cfg.DatabaseURL != "" {
		db, err = postgres.Open(ctx, cfg.DatabaseURL)
	} else {
		db, err = sqlite.Open(ctx, cfg.DataDir)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	w, err := witness.New(witness.Options{Name: cfg.Name, Key: key, Logs: logs, Store: db, Log: log})
	if err != nil {
		return usageError{err}
	}
	origins := make([]string, len(logs))
	for i, l := range logs {
		origins[i] = l.Origin
	}
	log.Info("witness ready", "name", w.Name(), "vkey", w.VerifierKey(), "logs", strings.Join(origins, ","))
	srv := &namedServer{name: "witness", addr: cfg.Listen, handler: w.Handler()}
	if cfg.TLSCertFile != "" {
		r, err := tlsfile.New(tlsfile.Options{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, Log: log})
		if err != nil {
			return usageError{err}
		}
		go r.Run(ctx)
		srv.tls = r.ServerConfig(tls.NoClientCert)
	}
	return runServers(ctx, []*namedServer{srv}, 30*time.Second, log)
}

func newWitnessKeyCmd(env Env) *cobra.Command {
	var keyFile, name string
	dataDir := WitnessDefaults().DataDir
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Print the witness's cosignature verifier key (vkey) for trust.json",
		Long: `Print the witness's C2SP cosignature/v1 verifier key,
"<name>+<key hash>+<base64 key>", for the "witnesses" list of trust.json. The
key file is created (0600) if missing, so this also generates a witness key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags(), "CUSTODY_WITNESS_", env); err != nil {
				return err
			}
			if name == "" {
				return usageError{errors.New("--name is required")}
			}
			path := (&WitnessConfig{KeyFile: keyFile, DataDir: dataDir}).keyFile()
			key, err := witness.LoadOrCreateKey(path)
			if err != nil {
				return err
			}
			vkey, err := verify.NewCosignatureVerifierKey(name, key.Public().(ed25519.PublicKey))
			if err != nil {
				return usageError{fmt.Errorf("--name %q: %w", name, err)}
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), vkey)
			return err
		},
	}
	cmd.Flags().StringVar(&keyFile, "key-file", "", "Ed25519 PEM signing key, created 0600 if missing (default <data-dir>/witness-ed25519.pem, as witness serve)")
	cmd.Flags().StringVar(&dataDir, "data-dir", dataDir, "the witness's data directory, as witness serve --data-dir")
	cmd.Flags().StringVar(&name, "name", "", "witness name (required)")
	return cmd
}
