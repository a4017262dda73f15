package sdk

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestNodeSDKs runs node/sdk.test.mjs (node's test runner) with the npm
// SDKs (openai, @anthropic-ai/sdk, @google/genai) against this package's
// custody and stand-in. The packages must be installed (`npm ci` in
// node/; .ci/run and `make test` do it): a missing node or package fails
// the test, it is never skipped.
func TestNodeSDKs(t *testing.T) {
	if _, err := os.Stat(filepath.Join("node", "node_modules", "openai")); err != nil {
		t.Fatalf("npm packages not installed (run `npm ci` in test/sdk/node): %v", err)
	}
	from := len(up.credentials())
	cmd := exec.Command("node", "--test", "--test-concurrency=1", "sdk.test.mjs")
	cmd.Dir = "node"
	cmd.Env = append(os.Environ(),
		"CUSTODY_GATEWAY_URL="+gw.gatewayURL, "CUSTODY_ADMIN_URL="+gw.adminURL,
		"CUSTODY_ADMIN_TOKEN="+gw.adminToken, "STANDIN_URL="+up.URL)
	out, err := cmd.CombinedOutput()
	t.Logf("node --test:\n%s", out)
	if err != nil {
		t.Fatalf("node --test: %v", err)
	}
	checkNoStall(t)
	checkCredentials(t, from)
}
