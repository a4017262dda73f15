package cli

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// TestAttackServeTLSNoHTTP2 offers ALPN h2 (alone and first) to every TLS
// listener, the admin one included (its configuration comes from
// GetConfigForClient): none may pick h2, which cannot be hijacked.
func TestAttackServeTLSNoHTTP2(t *testing.T) {
	s := startTLSServe(t, true)
	for name, addr := range map[string]string{"api": s.api, "admin": s.admin, "gateway": s.gateway, "metrics": s.metric} {
		for _, protos := range [][]string{{"h2"}, {"h2", "http/1.1"}} {
			cfg, err := tlsfile.ClientConfig(s.files.CA)
			must(t, err)
			cfg.ServerName = "localhost"
			cfg.NextProtos = protos
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
			if len(protos) == 1 {
				// h2 alone: refused (no_application_protocol) or served
				// without ALPN, never h2.
				if err == nil && c.ConnectionState().NegotiatedProtocol == "h2" {
					t.Errorf("%s offered h2 alone negotiated h2", name)
				}
				if err == nil {
					c.Close()
				}
				continue
			}
			if err != nil {
				t.Errorf("%s %v: %v", name, protos, err)
				continue
			}
			if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
				t.Errorf("%s offered %v negotiated %q, want http/1.1", name, protos, p)
			}
			c.Close()
		}
	}
}
