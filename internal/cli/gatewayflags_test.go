package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/agentcustody/custody/internal/gateway"
)

// TestGatewayClockLeewayFlag: --gateway-clock-leeway is a validated serve
// flag (also CUSTODY_GATEWAY_CLOCK_LEEWAY) whose zero means no leeway,
// not the default.
func TestGatewayClockLeewayFlag(t *testing.T) {
	base := []string{"--plaintext=all", "--data-dir=/tmp/x", "--kubernetes-auth=false", "--static-tokens-file=/tmp/t.yaml"}
	for _, tc := range []struct {
		arg  string
		ok   bool
		want time.Duration // as gateway.Options.Leeway
	}{
		{"", true, gateway.DefaultLeeway},
		{"--gateway-clock-leeway=0", true, gateway.NoLeeway},
		{"--gateway-clock-leeway=90s", true, 90 * time.Second},
		{"--gateway-clock-leeway=5m", true, 5 * time.Minute},
		{"--gateway-clock-leeway=-1s", false, 0},
		{"--gateway-clock-leeway=6m", false, 0},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			cfg := Defaults()
			fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			cfg.RegisterFlags(fs)
			args := base
			if tc.arg != "" {
				args = append([]string{tc.arg}, base...)
			}
			if err := fs.Parse(args); err != nil {
				t.Fatalf("parse %v: %v", args, err)
			}
			err := cfg.Validate()
			if (err == nil) != tc.ok {
				t.Fatalf("Validate(%s) = %v, want ok=%v", tc.arg, err, tc.ok)
			}
			if tc.ok && cfg.gatewayLeeway() != tc.want {
				t.Errorf("gatewayLeeway(%s) = %v, want %v", tc.arg, cfg.gatewayLeeway(), tc.want)
			}
		})
	}
	code, out, _ := runCLI(t, t.Context(), envMap(nil), "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "--gateway-clock-leeway") || !strings.Contains(out, "5s") {
		t.Errorf("serve --help = exit %d, lacks --gateway-clock-leeway with its default", code)
	}
	code, _, stderr := runCLI(t, t.Context(), envMap(map[string]string{"CUSTODY_GATEWAY_CLOCK_LEEWAY": "1h"}), "", "serve")
	if code != 2 || !strings.Contains(stderr, "gateway-clock-leeway") {
		t.Errorf("CUSTODY_GATEWAY_CLOCK_LEEWAY=1h: exit %d, %q; want a usage error naming the flag", code, stderr)
	}
}
