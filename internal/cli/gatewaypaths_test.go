package cli

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestGatewayAllowPathFlag(t *testing.T) {
	c := ServeConfig{
		GatewayProviders:  []string{"groq=https://api.groq.com/openai"},
		GatewayAllowPaths: []string{"openai=POST /v1/audio/speech", "groq=GET /v1/files/**", "openai=/v1/x"},
	}
	ps, err := c.providers()
	if err != nil {
		t.Fatal(err)
	}
	if got := ps["openai"].AllowPaths; !slices.Equal(got, []string{"POST /v1/audio/speech", "/v1/x"}) || ps["openai"].BaseURL != "" {
		t.Errorf("openai = %+v, want its two rules and the built-in URL", ps["openai"])
	}
	if got := ps["groq"]; got.BaseURL != "https://api.groq.com/openai" || !slices.Equal(got.AllowPaths, []string{"GET /v1/files/**"}) {
		t.Errorf("groq = %+v", got)
	}
	for _, bad := range []string{"openai", "=POST /v1/x", "openai=", "mistral=POST /v1/x", "openai=POST /v1/x/", "openai=TRACE /v1/x", "openai=/v1/%2F"} {
		c := ServeConfig{GatewayAllowPaths: []string{bad}}
		if _, err := c.providers(); err == nil || !strings.Contains(err.Error(), "--gateway-allow-path") {
			t.Errorf("--gateway-allow-path %q: err = %v, want a usage error", bad, err)
		}
	}
	code, _, stderr := runCLI(t, context.Background(), envMap(map[string]string{"CUSTODY_GATEWAY_ALLOW_PATH": "openai=/v1//x"}), "", "serve")
	if code != 2 || !strings.Contains(stderr, "gateway-allow-path") {
		t.Errorf("CUSTODY_GATEWAY_ALLOW_PATH with a bad rule: exit %d, %q; want a usage error", code, stderr)
	}
	code, out, _ := runCLI(t, context.Background(), envMap(nil), "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "--gateway-allow-path") {
		t.Errorf("serve --help (exit %d) does not document --gateway-allow-path", code)
	}
}

func TestGatewayProviderToolsFlag(t *testing.T) {
	c := ServeConfig{GatewayProviders: []string{"groq=https://api.groq.com/openai"}, GatewayProviderTools: []string{"anthropic", "groq"}}
	ps, err := c.providers()
	if err != nil {
		t.Fatal(err)
	}
	if !ps["anthropic"].ProviderTools || !ps["groq"].ProviderTools || ps["openai"].ProviderTools {
		t.Errorf("providers = %+v, want anthropic and groq with provider tools, openai without", ps)
	}
	for _, bad := range []string{"mistral", "github", ""} {
		c := ServeConfig{GatewayProviderTools: []string{bad}}
		if _, err := c.providers(); err == nil || !strings.Contains(err.Error(), "--gateway-provider-tools") {
			t.Errorf("--gateway-provider-tools %q: err = %v, want a usage error", bad, err)
		}
	}
	code, out, _ := runCLI(t, context.Background(), envMap(nil), "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "--gateway-provider-tools") {
		t.Errorf("serve --help (exit %d) does not document --gateway-provider-tools", code)
	}
}
