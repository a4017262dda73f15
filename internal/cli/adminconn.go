package cli

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// adminConn is how an operator command (exec, export, trust) reaches
// custody's admin listener: its URL, a bearer token and/or a client
// certificate (mutual TLS, --admin-client-ca-file on the server), and the
// CA bundle trusted for an https URL.
type adminConn struct {
	url, tokenFile, caFile, certFile, keyFile, serverName string
}

func (a *adminConn) register(fs *pflag.FlagSet, defaultURL, tokenHelp string) {
	fs.StringVar(&a.url, "admin", defaultURL, "base URL of custody's admin listener, e.g. https://127.0.0.1:8867")
	fs.StringVar(&a.tokenFile, "admin-token-file", "", tokenHelp)
	fs.StringVar(&a.caFile, "ca-file", "", "PEM CA bundle trusted for an https --admin (and the gateway, for exec) instead of the system roots (default: $CUSTODY_CA_FILE)")
	fs.StringVar(&a.certFile, "client-cert-file", "", "PEM client certificate presented to the admin listener (mutual TLS), with --client-key-file")
	fs.StringVar(&a.keyFile, "client-key-file", "", "PEM private key of --client-cert-file")
	fs.StringVar(&a.serverName, "tls-server-name", "", "name to verify the admin listener's certificate against instead of --admin's host (e.g. custody.custody-system.svc when --admin is a pod address)")
}

// resolve fills caFile from $CUSTODY_CA_FILE when unset, and checks the
// flags that go together.
func (a *adminConn) resolve(env Env) error {
	if a.caFile == "" {
		a.caFile, _ = env("CUSTODY_CA_FILE")
	}
	if (a.certFile == "") != (a.keyFile == "") {
		return errors.New("--client-cert-file and --client-key-file go together")
	}
	// As the client refuses CUSTODY_CA_FILE with an http CUSTODY_URL: a
	// TLS setting says TLS was meant, and the admin credential must not
	// go in clear (to a typo, or to the default URL on another port).
	if u, err := url.Parse(a.url); err != nil || u.Scheme != "https" {
		var meant string
		switch {
		case a.caFile != "":
			meant = "--ca-file (or $CUSTODY_CA_FILE)"
		case a.certFile != "":
			meant = "--client-cert-file"
		case a.serverName != "":
			meant = "--tls-server-name"
		}
		if meant != "" {
			return fmt.Errorf("--admin %s is not https, but %s says TLS was meant: the admin credential must not go in clear", urlForError(a.url), meant)
		}
	}
	return nil
}

// token reads the bearer token from --admin-token-file (for export and
// trust, !envToken, at least 32 bytes as serve requires: readAdminToken),
// or
// $CUSTODY_ADMIN_TOKEN when envToken; without either it is "" when a
// client certificate is configured, else an error.
func (a *adminConn) token(env Env, envToken bool) (string, error) {
	if a.tokenFile != "" && !envToken {
		// export and trust: serve's own check, 32 bytes at least.
		tok, err := readAdminToken(a.tokenFile)
		return string(tok), err
	}
	if a.tokenFile != "" {
		b, err := os.ReadFile(a.tokenFile)
		if err != nil {
			return "", fmt.Errorf("--admin-token-file: %w", err)
		}
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, nil
		}
		return "", fmt.Errorf("--admin-token-file %s is empty", a.tokenFile)
	}
	if t, ok := env("CUSTODY_ADMIN_TOKEN"); envToken && ok && strings.TrimSpace(t) != "" {
		return strings.TrimSpace(t), nil
	}
	if a.certFile != "" {
		return "", nil
	}
	if envToken {
		return "", errors.New("no admin credential: set --admin-token-file, $CUSTODY_ADMIN_TOKEN or --client-cert-file")
	}
	return "", errors.New("no admin credential: set --admin-token-file or --client-cert-file")
}

// httpClient is a client with timeout that trusts caFile (or the system
// roots) and presents the client certificate, if any.
func (a *adminConn) httpClient(timeout time.Duration) (*http.Client, error) {
	t, err := tlsfile.ClientTransport(a.caFile)
	if err != nil {
		return nil, fmt.Errorf("--ca-file: %w", err)
	}
	if a.certFile != "" {
		pair, err := tls.LoadX509KeyPair(a.certFile, a.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--client-cert-file: %w", err)
		}
		t.TLSClientConfig.Certificates = []tls.Certificate{pair}
	}
	t.TLSClientConfig.ServerName = a.serverName
	return &http.Client{Timeout: timeout, Transport: t}, nil
}
