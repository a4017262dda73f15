package cli

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/agentcustody/custody/internal/gateway"
)

// isKind reports whether s names a provider kind of --gateway-provider.
func isKind(s string) bool {
	return slices.Contains([]string{gateway.KindAnthropic, gateway.KindOpenAI, gateway.KindGemini, gateway.KindHTTP, gateway.KindGitHub}, s)
}

// kindOf is the kind provider name will have: its --gateway-provider
// kind, else the built-in provider's, else openai.
func kindOf(name string, pc gateway.ProviderConfig) string {
	if pc.Kind != "" {
		return pc.Kind
	}
	if d, ok := gateway.DefaultProviders()[name]; ok {
		return d.Kind
	}
	return gateway.KindOpenAI
}

// brokeredProviders adds --gateway-provider-auth and
// --gateway-provider-git-url to out (parsed from --gateway-provider and
// --gateway-allow-path) and checks the brokered providers: a kind-http
// one has an auth and at least one allow path.
func (c *ServeConfig) brokeredProviders(out map[string]gateway.ProviderConfig) error {
	for _, a := range c.GatewayProviderAuth {
		name, spec, ok := strings.Cut(a, "=")
		if !ok || name == "" || spec == "" {
			return fmt.Errorf("--gateway-provider-auth %q: want NAME=header:HEADER[:PREFIX] or NAME=basic:USERNAME", a)
		}
		pc, ok := out[name]
		if !ok || kindOf(name, pc) != gateway.KindHTTP {
			return fmt.Errorf("--gateway-provider-auth %q: %s is not a provider of kind http (add it with --gateway-provider %s=http:URL)", a, name, name)
		}
		if pc.Auth != nil {
			return fmt.Errorf("--gateway-provider-auth %q: %s has one already", a, name)
		}
		auth, err := gateway.ParseProviderAuth(spec)
		if err != nil {
			return fmt.Errorf("--gateway-provider-auth %q: %w", a, err)
		}
		pc.Auth = &auth
		out[name] = pc
	}
	for _, g := range c.GatewayProviderGitURL {
		name, u, ok := strings.Cut(g, "=")
		if !ok || name == "" || u == "" {
			return fmt.Errorf("--gateway-provider-git-url %s: want NAME=URL", urlForError(g))
		}
		pc := out[name]
		if kindOf(name, pc) != gateway.KindGitHub {
			return fmt.Errorf("--gateway-provider-git-url %s=...: %s is not a provider of kind github", name, name)
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" || pu.User != nil || pu.RawQuery != "" {
			return fmt.Errorf("--gateway-provider-git-url %s=%s: want http(s)://host[/path], no credentials or query", name, urlForError(u))
		}
		pc.GitURL = u
		out[name] = pc
	}
	for name, pc := range out {
		if kindOf(name, pc) != gateway.KindHTTP {
			continue
		}
		if pc.Auth == nil {
			return fmt.Errorf("--gateway-provider %s: kind http needs --gateway-provider-auth %s=header:HEADER[:PREFIX] or %s=basic:USERNAME", name, name, name)
		}
		if len(pc.AllowPaths) == 0 {
			return fmt.Errorf("--gateway-provider %s: kind http forwards only declared paths: add --gateway-allow-path '%s=[METHOD ]PATH'", name, name)
		}
	}
	return nil
}
