package cli

import (
	"testing"

	"github.com/spf13/pflag"
)

// TestAttackExchangeRateNaN: pflag parses "NaN" (strconv.ParseFloat) and
// Validate only refuses rates < 0, so --exchange-pod-rate NaN (or
// CUSTODY_EXCHANGE_POD_RATE=NaN) is accepted; ratelimit.New treats NaN as
// a limit (NaN <= 0 is false) and x/time/rate then allows every call: the
// per-pod limit is silently off (see ratelimit's TestAttackNaNRateFailsOpen).
func TestAttackExchangeRateNaN(t *testing.T) {
	for _, v := range []string{"NaN"} {
		cfg := Defaults()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		cfg.RegisterFlags(fs)
		if err := fs.Parse([]string{"--exchange-pod-rate=" + v, "--exchange-address-rate=" + v,
			"--data-dir=/tmp/x", "--kubernetes-auth=false", "--static-tokens-file=/tmp/t.yaml"}); err != nil {
			t.Fatalf("parse %s: %v", v, err)
		}
		if err := cfg.Validate(); err == nil {
			t.Errorf("--exchange-pod-rate=%s --exchange-address-rate=%s accepted by Validate", v, v)
		}
	}
}
