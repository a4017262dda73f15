package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// listenerNames are the names --plaintext accepts, one per listener.
var listenerNames = []string{"api", "gateway", "admin", "metrics", "egress"}

// enabledListeners maps each enabled listener's name to its flag.
func (c *ServeConfig) enabledListeners() map[string]string {
	m := map[string]string{}
	for name, addr := range map[string]string{"api": c.Listen, "gateway": c.GatewayListen, "metrics": c.MetricsListen, "egress": c.EgressListen} {
		if addr != "" {
			m[name] = addr
		}
	}
	if c.adminEnabled() {
		m["admin"] = c.AdminListen
	}
	return m
}

// adminEnabled reports whether some admin credential is configured, the
// condition for starting the admin listener.
func (c *ServeConfig) adminEnabled() bool {
	return c.AdminTokenFile != "" || len(c.AdminServiceAccounts) > 0 || c.AdminClientCAFile != ""
}

// plaintext reports whether the listener named name serves plain HTTP.
func (c *ServeConfig) plaintext(name string) bool {
	return slices.Contains(c.Plaintext, "all") || slices.Contains(c.Plaintext, name)
}

func (c *ServeConfig) validateTLS() []error {
	var errs []error
	for _, p := range c.Plaintext {
		if p != "all" && !slices.Contains(listenerNames, p) {
			errs = append(errs, fmt.Errorf("--plaintext %q: want one of %v or all", p, listenerNames))
		}
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		errs = append(errs, errors.New("--tls-cert-file and --tls-key-file go together"))
	}
	if c.TLSReloadInterval < time.Second || c.TLSReloadInterval > time.Hour {
		errs = append(errs, fmt.Errorf("--tls-reload-interval %v: must be between 1s and 1h", c.TLSReloadInterval))
	}
	if c.TLSCertFile == "" {
		var bare []string
		for _, name := range listenerNames {
			if _, on := c.enabledListeners()[name]; on && !c.plaintext(name) {
				bare = append(bare, name)
			}
		}
		if len(bare) > 0 {
			errs = append(errs, fmt.Errorf("no TLS certificate for the %v listeners: set --tls-cert-file and --tls-key-file, or name them in --plaintext (e.g. --plaintext=all on a loopback-only setup)", bare))
		}
	}
	if c.AdminClientCAFile != "" && c.plaintext("admin") {
		errs = append(errs, errors.New("--admin-client-ca-file needs TLS on the admin listener (remove admin from --plaintext)"))
	}
	return errs
}

// adminClientAuth is the admin listener's client-certificate mode: none
// without a client CA; required when certificates are the only admin
// credential; otherwise verified when given.
func (c *ServeConfig) adminClientAuth() tls.ClientAuthType {
	switch {
	case c.AdminClientCAFile == "":
		return tls.NoClientCert
	case c.AdminTokenFile == "" && len(c.AdminServiceAccounts) == 0:
		return tls.RequireAndVerifyClientCert
	default:
		return tls.VerifyClientCertIfGiven
	}
}

// serveTLS loads the serving certificate, keeps reloading it until ctx is
// done, exports its expiry and reload failures, and sets each server's
// TLS configuration unless the server is named in --plaintext. Without
// --tls-cert-file (every listener plaintext, as Validate ensured) it does
// nothing.
func serveTLS(ctx context.Context, cfg ServeConfig, servers []*namedServer, reg prometheus.Registerer, log *slog.Logger) error {
	if cfg.TLSCertFile == "" {
		return nil
	}
	r, err := tlsfile.New(tlsfile.Options{
		CertFile:     cfg.TLSCertFile,
		KeyFile:      cfg.TLSKeyFile,
		ClientCAFile: cfg.AdminClientCAFile,
		Interval:     cfg.TLSReloadInterval,
		Log:          log,
	})
	if err != nil {
		return usageError{err}
	}
	go r.Run(ctx)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "custody_tls_certificate_not_after_seconds",
		Help: "Expiry of the serving certificate in service (Unix seconds, its NotAfter).",
	}, func() float64 { return float64(r.Leaf().NotAfter.Unix()) }))
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "custody_tls_reload_failures_total",
		Help: "Checks that found changed certificate files that did not load (the previous certificate stayed in service; see the log).",
	}, func() float64 { return float64(r.Failures()) }))
	for _, s := range servers {
		if cfg.plaintext(s.name) {
			continue
		}
		mode := tls.NoClientCert
		if s.name == "admin" {
			mode = cfg.adminClientAuth()
		}
		s.tls = r.ServerConfig(mode)
	}
	log.Info("tls", "cert_file", cfg.TLSCertFile, "subject", r.Leaf().Subject.String(), "not_after", r.Leaf().NotAfter, "plaintext", cfg.Plaintext)
	return nil
}
