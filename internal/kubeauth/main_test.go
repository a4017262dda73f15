package kubeauth

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines after stopping the control plane
// BenchmarkExchange may have started (its API connections must close
// first, so goleak.VerifyTestMain, which checks before any cleanup, won't
// do).
func TestMain(m *testing.M) {
	code := m.Run()
	stopExchangeBench()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
