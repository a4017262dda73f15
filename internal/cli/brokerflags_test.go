package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/gateway"
)

func TestGatewayBrokerFlags(t *testing.T) {
	c := ServeConfig{
		GatewayProviders: []string{"acme=http:https://api.acme.example/v1", "basicapi=http:http://127.0.0.1:9000",
			"ghe=github:https://ghe.example/api/v3", "plain=http://127.0.0.1:8000"},
		GatewayProviderAuth:   []string{"acme=header:Authorization:Bearer", "basicapi=basic:api"},
		GatewayAllowPaths:     []string{"acme=GET /items/*", "basicapi=/status", "github=POST /repos/*/*/dispatches"},
		GatewayProviderGitURL: []string{"ghe=https://ghe.example", "github=http://127.0.0.1:3000"},
	}
	ps, err := c.providers()
	if err != nil {
		t.Fatal(err)
	}
	if got := ps["acme"]; got.Kind != gateway.KindHTTP || got.BaseURL != "https://api.acme.example/v1" ||
		got.Auth == nil || *got.Auth != (gateway.ProviderAuth{Header: "Authorization", Prefix: "Bearer "}) {
		t.Errorf("acme = %+v", got)
	}
	if got := ps["basicapi"]; got.Auth == nil || got.Auth.BasicUser != "api" || got.BaseURL != "http://127.0.0.1:9000" {
		t.Errorf("basicapi = %+v", got)
	}
	if got := ps["ghe"]; got.Kind != gateway.KindGitHub || got.GitURL != "https://ghe.example" {
		t.Errorf("ghe = %+v", got)
	}
	if got := ps["github"]; got.GitURL != "http://127.0.0.1:3000" || len(got.AllowPaths) != 1 {
		t.Errorf("github = %+v", got)
	}
	// NAME=http://... is a URL of the default kind, not kind http.
	if got := ps["plain"]; got.Kind != "" || got.BaseURL != "http://127.0.0.1:8000" {
		t.Errorf("plain = %+v", got)
	}
	for _, tc := range []struct {
		name string
		c    ServeConfig
		flag string
	}{
		{"http without auth", ServeConfig{GatewayProviders: []string{"acme=http:https://x.example"}, GatewayAllowPaths: []string{"acme=/x"}}, "--gateway-provider-auth"},
		{"http without paths", ServeConfig{GatewayProviders: []string{"acme=http:https://x.example"}, GatewayProviderAuth: []string{"acme=header:X-Key"}}, "--gateway-allow-path"},
		{"auth for openai", ServeConfig{GatewayProviderAuth: []string{"openai=header:X-Key"}}, "--gateway-provider-auth"},
		{"auth for nothing", ServeConfig{GatewayProviderAuth: []string{"nope=header:X-Key"}}, "--gateway-provider-auth"},
		{"bad auth", ServeConfig{GatewayProviders: []string{"acme=http:https://x.example"}, GatewayAllowPaths: []string{"acme=/x"},
			GatewayProviderAuth: []string{"acme=cookie:x"}}, "--gateway-provider-auth"},
		{"auth twice", ServeConfig{GatewayProviders: []string{"acme=http:https://x.example"}, GatewayAllowPaths: []string{"acme=/x"},
			GatewayProviderAuth: []string{"acme=header:X-Key", "acme=basic:u"}}, "--gateway-provider-auth"},
		{"git URL for openai", ServeConfig{GatewayProviderGitURL: []string{"openai=https://x.example"}}, "--gateway-provider-git-url"},
		{"bad git URL", ServeConfig{GatewayProviderGitURL: []string{"github=git://x.example"}}, "--gateway-provider-git-url"},
		{"git URL with credentials", ServeConfig{GatewayProviderGitURL: []string{"github=https://u:p@x.example"}}, "--gateway-provider-git-url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.c.providers(); err == nil || !strings.Contains(err.Error(), tc.flag) {
				t.Errorf("providers() = %v, want an error naming %s", err, tc.flag)
			}
		})
	}
	code, _, stderr := runCLI(t, context.Background(), envMap(map[string]string{"CUSTODY_GATEWAY_PROVIDER": "acme=http:https://x.example"}), "", "serve")
	if code != 2 || !strings.Contains(stderr, "--gateway-provider-auth") {
		t.Errorf("serve with a kind-http provider without auth: exit %d, %q; want a usage error", code, stderr)
	}
	code, out, _ := runCLI(t, context.Background(), envMap(nil), "", "serve", "--help")
	if code != 0 || !strings.Contains(out, "--gateway-provider-auth") || !strings.Contains(out, "--gateway-provider-git-url") {
		t.Errorf("serve --help (exit %d) does not document the broker flags", code)
	}
}
