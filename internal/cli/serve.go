package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"golang.org/x/net/netutil"
	"golang.org/x/sync/errgroup"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/egress"
	"github.com/agentcustody/custody/internal/gateway"
	"github.com/agentcustody/custody/internal/kubeauth"
	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/signer"
	"github.com/agentcustody/custody/internal/staticauth"
	"github.com/agentcustody/custody/internal/store/postgres"
	"github.com/agentcustody/custody/internal/store/sqlite"
)

func newServeCmd(env Env) *cobra.Command {
	cfg := Defaults()
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run custody: identity exchange, memory (HTTP + MCP), model gateway, signer",
		Long: `Run custody's services in one process.

Listeners:
  --listen          API for sandboxes: POST /v1/auth/kubernetes, POST /v1/auth/static,
                    POST /v1/auth/revoke, /v1/memory/..., /mcp, /v1/signer/...,
                    /mcp/servers/{name} (with --mcp-upstreams), /healthz, /readyz
  --gateway-listen  model gateway for sandboxes: /{provider}/... (empty disables it)
  --egress-listen   HTTP forward proxy for the sandbox's own connections (empty disables it)
  --admin-listen    operators only, never reachable from sandboxes; started only with
                    --admin-token-file, --admin-service-accounts or --admin-client-ca-file:
                    POST /v1/admin/keys/{key_id}/revoke, POST /v1/admin/agents/{tenant}/{agent}/revoke,
                    POST /v1/gateway/tokens, POST /v1/gateway/tokens/{jti}/revoke,
                    GET /v1/gateway/usage, GET /v1/gateway/budgets,
                    /v1/signer/... (approvals, bundles, trust)
  --metrics-listen  Prometheus /metrics, /healthz, /readyz naming why a check failed

Every listener serves TLS (1.2 or later) with --tls-cert-file and --tls-key-file,
re-read while running, unless named in --plaintext; with neither, serve refuses
to start.

Every flag can also be set as CUSTODY_<FLAG>, e.g. CUSTODY_DATA_DIR.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags(), "CUSTODY_", env); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return usageError{err}
			}
			if cfg.Kubeconfig == "" {
				cfg.Kubeconfig, _ = env("KUBECONFIG")
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serve(ctx, cfg, cmd.ErrOrStderr())
		},
	}
	cfg.RegisterFlags(cmd.Flags())
	return cmd
}

func newLogger(cfg ServeConfig, w io.Writer) *slog.Logger {
	level, _ := parseLevel(cfg.LogLevel)
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// serve runs until ctx is done, then shuts the listeners down gracefully.
func serve(ctx context.Context, cfg ServeConfig, logw io.Writer) error {
	log := newLogger(cfg, logw)
	applyGCSettings(log)
	if cfg.DatabaseURL == "" {
		// Created here, so that the check below sees it as it will be used.
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return fmt.Errorf("--data-dir: %w", err)
		}
	}
	if err := checkDataDir("--data-dir", cfg.DataDir, sqlite.FileName, sqlite.FileName+"-wal", sqlite.FileName+"-shm",
		gateway.SigningKeyFile, signerKeyFile); err != nil {
		return err
	}
	db, err := openStore(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer db.Close()

	cacheTTL := cfg.KeyCacheTTL
	if cacheTTL == 0 {
		cacheTTL = -1
	}
	keys, err := apikey.New(apikey.Options{Store: db, TTL: cfg.KubernetesKeyTTL, CacheTTL: cacheTTL, Log: log})
	if err != nil {
		return err
	}
	followRevocations(ctx, db, keys, log)

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "custody_http_requests_total",
		Help: "HTTP requests served, by handler and status code.",
	}, []string{"handler", "code", "method"})
	reg.MustRegister(requests)
	instrument := func(name string, h http.Handler) http.Handler {
		return promhttp.InstrumentHandlerCounter(requests.MustCurryWith(prometheus.Labels{"handler": name}), h)
	}

	limits := exchangeLimits(cfg, nil)
	api := http.NewServeMux()
	ready := []readinessCheck{{"store", db.Ping}}
	var podAlive func(context.Context, apikey.Identity) (bool, error)
	var ex *kubeauth.Exchanger
	if cfg.KubernetesAuth {
		ex, err = newExchanger(cfg, log)
		if err != nil {
			return err
		}
		podAlive = ex.PodAlive
		ready = append(ready, readinessCheck{"kubernetes", ex.Ready})
		api.Handle("POST /v1/auth/kubernetes", instrument("auth_kubernetes", keys.ExchangeHandler(ex, kubeauth.Refusal, log, limits)))
	}
	if cfg.StaticTokensFile != "" {
		st, err := staticauth.Load(cfg.StaticTokensFile, log)
		if err != nil {
			return usageError{err}
		}
		api.Handle("POST /v1/auth/static", instrument("auth_static", keys.ExchangeHandler(st, staticauth.Refusal, log, limits)))
	}
	api.Handle("POST /v1/auth/revoke", instrument("auth_revoke", keys.SelfRevokeHandler()))

	mem, err := memory.New(memory.Options{Store: db, HolderAlive: podAlive, Log: log})
	if err != nil {
		return err
	}
	api.Handle("/v1/memory/", instrument("memory", keys.Middleware(mem.Handler())))
	api.Handle("/mcp", instrument("mcp", mem.MCPHandler(keys.Verify)))

	var sg *signerSlot
	var inbox *signer.InboxWriter
	if cfg.Signer {
		sg = &signerSlot{keys: keys}
		if cfg.GatewayListen != "" {
			// Every replica's gateway records run calls into the store's
			// inbox; the signer's writer drains it.
			inbox = signer.NewInboxWriter(db, signer.InboxWriterOptions{Log: log})
			defer func() {
				fctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				inbox.Close(fctx)
			}()
			sg.flushInbox = inbox.Flush
		}
		sg.registerMetrics(reg)
		ready = append(ready, readinessCheck{"signer_log", sg.logReady})
		if pg, ok := db.(*postgres.DB); ok {
			lctx, stopLeased := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); sg.runLeased(lctx, pg, cfg, log) }()
			defer func() { stopLeased(); <-done }()
		} else {
			s, err := newSigner(ctx, cfg, db, log, sg.onBadCosignature, sg.hooks())
			if err != nil {
				return err
			}
			sg.set(s)
			defer sg.close()
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "custody_signer_writer",
			Help: "1 while this replica runs the signer (holds the log's writer lease), 0 while it stands by.",
		}, func() float64 {
			if sg.writer() {
				return 1
			}
			return 0
		}))
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "custody_signer_start_failures_total",
			Help: "Times this replica held the writer lease but could not start the signer (see its log).",
		}, func() float64 { return float64(sg.startFailures.Load()) }))
		api.Handle("/v1/signer/", instrument("signer", sg.API()))
		api.Handle("/mcp/signer", instrument("mcp_signer", sg.MCP()))
		if cfg.MCPUpstreams != "" {
			p, err := newMCPProxy(cfg, keys, sg.current, log)
			if err != nil {
				return usageError{err}
			}
			defer p.Close()
			api.Handle("/mcp/servers/", instrument("mcp_proxy", p.Handler()))
		}
	}

	health := healthHandlers(ready, log)
	health.register(api, false)

	servers := []*namedServer{{name: "api", addr: cfg.Listen, handler: api}}
	if cfg.MetricsListen != "" {
		m := http.NewServeMux()
		m.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		health.register(m, true)
		servers = append(servers, &namedServer{name: "metrics", addr: cfg.MetricsListen, handler: m})
	}
	var gw *gateway.Gateway
	if cfg.GatewayListen != "" {
		var rec gateway.Recorder
		if inbox != nil {
			rec = modelCallRecorder{w: inbox, log: log}
		}
		var meter *metering.Meter
		if gw, meter, err = newGateway(ctx, cfg, db, reg, rec, log); err != nil {
			return err
		}
		defer func() {
			// After the gateway: what its last requests used is written.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if err := meter.Close(cctx); err != nil {
				log.Warn("writing the last usage failed", "error", err)
			}
		}()
		defer gw.Close()
		if sg != nil {
			sg.gw.Store(gw) // a closing run's gateway tokens are revoked through it
		}
		followGatewayRevocations(ctx, db, gw, log)
		health.checks = append(health.checks, readinessCheck{"gateway_revocations", gw.Current})
		servers = append(servers, &namedServer{name: "gateway", addr: cfg.GatewayListen, handler: gw.DataHandler()})
	}
	if cfg.EgressListen != "" && sg != nil { // Validate refuses it without the signer
		refused := new(atomic.Int64)
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "custody_egress_connections_refused_total",
			Help: "Connections to the egress listener closed at accept: their source address held --egress-max-conns-per-source already.",
		}, func() float64 { return float64(refused.Load()) }))
		servers = append(servers, &namedServer{
			name: "egress", addr: cfg.EgressListen, handler: newEgressProxy(keys, gw, sg.current, cfg.ProxyApprovalWait, log),
			// One request per connection: an idle kept-alive connection
			// would hold a place under the caps without a request.
			noKeepAlive: true,
			limit: func(ln net.Listener) net.Listener {
				return egress.LimitBySource(ln, cfg.EgressMaxConnsPerSource, refused)
			},
		})
	}
	if cfg.adminEnabled() {
		var tok []byte
		if cfg.AdminTokenFile != "" {
			if tok, err = readAdminToken(cfg.AdminTokenFile); err != nil {
				return usageError{err}
			}
		}
		admin := http.NewServeMux()
		admin.Handle("POST /v1/admin/keys/{id}/revoke", instrument("admin_revoke_key", keys.AdminRevokeKeyHandler()))
		admin.Handle("POST /v1/admin/agents/{tenant}/{agent}/revoke", instrument("admin_revoke_agent", keys.AdminRevokeAgentHandler()))
		if gw != nil {
			admin.Handle("/v1/gateway/", instrument("admin_gateway", gw.AdminHandler()))
			mh := instrument("admin_metering", metering.AdminHandler(db))
			admin.Handle("GET /v1/gateway/usage", mh)
			admin.Handle("GET /v1/gateway/budgets", mh)
		}
		if sg != nil {
			admin.Handle("/v1/signer/", instrument("admin_signer", sg.Admin()))
		}
		auth := &adminAuth{token: tok, accounts: cfg.AdminServiceAccounts, audience: cfg.AdminAudience, reviewer: ex, clientCerts: cfg.AdminClientCAFile != "", log: log}
		servers = append(servers, &namedServer{name: "admin", addr: cfg.AdminListen, handler: auth.wrap(admin)})
	}
	if err := serveTLS(ctx, cfg, servers, reg, log); err != nil {
		return err
	}
	go keys.PruneExpired(ctx, 10*time.Minute, time.Hour)
	return runServers(ctx, servers, cfg.ReadTimeout, log)
}

type namedServer struct {
	name, addr string
	handler    http.Handler
	tls        *tls.Config // nil: plain HTTP
	// limit, if set, wraps the listener under the connection cap.
	limit       func(net.Listener) net.Listener
	noKeepAlive bool
}

// maxConns is the cap on open connections of a listener: 4096 for the
// listeners sandboxes reach, 256 for the admin and metrics listeners.
func (s *namedServer) maxConns() int {
	switch s.name {
	case "api", "gateway", "egress":
		return 4096
	default:
		return 256
	}
}

func runServers(ctx context.Context, servers []*namedServer, readTimeout time.Duration, log *slog.Logger) error {
	g, gctx := errgroup.WithContext(ctx)
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.addr)
		if err != nil {
			return fmt.Errorf("%s listener: %w", s.name, err)
		}
		// ReadTimeout bounds reading a whole request, body included: a
		// client trickling a body must not hold a connection (and a file
		// descriptor) forever. It does not limit streamed responses.
		// Each listener has its own connection cap, so a flood on one
		// (the gateway, say) cannot starve the admin listener of file
		// descriptors and block revocations.
		// net/http's own errors (TLS handshakes refused, recovered
		// panics) go to custody's log, not to stderr unformatted.
		srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: readTimeout, IdleTimeout: 120 * time.Second,
			ErrorLog: slog.NewLogLogger(log.With("listener", s.name).Handler(), slog.LevelWarn)}
		if s.limit != nil {
			ln = s.limit(ln)
		}
		ln = netutil.LimitListener(ln, s.maxConns())
		srv.SetKeepAlivesEnabled(!s.noKeepAlive)
		serve := srv.Serve
		if s.tls != nil {
			// HTTP/1.1 only (see tlsfile.Reloader.ServerConfig): a
			// non-nil empty TLSNextProto keeps net/http from adding h2.
			srv.TLSConfig = s.tls
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
			serve = func(ln net.Listener) error { return srv.ServeTLS(ln, "", "") }
		}
		log.Info("listening", "listener", s.name, "addr", ln.Addr().String(), "tls", s.tls != nil)
		g.Go(func() error {
			if err := serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("%s listener: %w", s.name, err)
			}
			return nil
		})
		g.Go(func() error {
			<-gctx.Done()
			sctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), 10*time.Second)
			defer cancel()
			return srv.Shutdown(sctx)
		})
	}
	err := g.Wait()
	log.Info("stopped")
	return err
}
