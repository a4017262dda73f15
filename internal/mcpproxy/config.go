package mcpproxy

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"

	"golang.org/x/net/http/httpguts"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
)

// Config is the upstreams file (`custody serve --mcp-upstreams FILE`),
// YAML or JSON; unknown fields are an error. See the package doc for an
// example.
type Config struct {
	Upstreams []Upstream `json:"upstreams"`
}

// Upstream is one upstream MCP server.
type Upstream struct {
	// Name is the server's name in /mcp/servers/{name} and in signer tool
	// names (mcp__{name}__{tool}): a DNS label (lowercase letters, digits
	// and -, at most 63 bytes) without "__". Required, unique.
	Name string `json:"name"`
	// URL is the upstream's streamable-HTTP endpoint, http or https.
	// Required.
	URL string `json:"url"`
	// Tenants may use the server (Kubernetes namespaces). At least one.
	Tenants []string `json:"tenants"`
	// Credential, if set, is sent to the upstream on every request;
	// the sandbox never sees it.
	Credential *Credential `json:"credential,omitempty"`
	// Tools filters the upstream's tools; nil offers all of them.
	Tools *ToolFilter `json:"tools,omitempty"`
}

// Credential is a secret custody adds to each upstream request.
type Credential struct {
	// File holds the secret (a mounted Secret); trailing white space is
	// dropped. It is read when an upstream session starts, so a rotated
	// file applies to new sessions. Required.
	File string `json:"file"`
	// Header is the request header that carries it. Default
	// "Authorization".
	Header string `json:"header,omitempty"`
	// Prefix goes before the secret in the header value. Default
	// "Bearer " for Authorization, "" for any other header; set "" with
	// an explicit Header to send the bare secret.
	Prefix *string `json:"prefix,omitempty"`
}

// ToolFilter lists tool name globs (path.Match syntax: * any run of
// characters, '/' included, ? one, [a-z] a class). A tool is offered when it matches
// an allow glob (an empty Allow allows all) and no deny glob: deny wins.
type ToolFilter struct {
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// header returns the header name and value prefix the credential uses.
func (c *Credential) header() (name, prefix string) {
	name = http.CanonicalHeaderKey(c.Header)
	if name == "" {
		name = "Authorization"
	}
	if c.Prefix != nil {
		return name, *c.Prefix
	}
	if name == "Authorization" {
		return name, "Bearer "
	}
	return name, ""
}

// readSecret reads the credential file.
func (c *Credential) readSecret() (string, error) {
	b, err := os.ReadFile(c.File)
	if err != nil {
		return "", fmt.Errorf("credential file: %w", err)
	}
	v := strings.TrimRight(string(b), " \t\r\n")
	if v == "" {
		return "", fmt.Errorf("credential file %s is empty", c.File)
	}
	if strings.ContainsAny(v, "\r\n\x00") {
		return "", fmt.Errorf("credential file %s: the secret spans several lines", c.File)
	}
	return v, nil
}

// offers reports whether f lets tool through (nil: every tool). A name
// holding NUL is never offered (globMatch uses NUL for '/').
func (f *ToolFilter) offers(tool string) bool {
	if f == nil {
		return true
	}
	if strings.ContainsRune(tool, 0) {
		return false
	}
	for _, g := range f.Deny {
		if globMatch(g, tool) {
			return false
		}
	}
	if len(f.Allow) == 0 {
		return true
	}
	for _, g := range f.Allow {
		if globMatch(g, tool) {
			return true
		}
	}
	return false
}

// globMatch is path.Match with '/' an ordinary character: * matches any
// run of characters and ? any one, '/' included, as the signer's policy
// globs do (path.Match's stop at '/', so deny ["delete_*"] would not
// deny a tool named "delete_repo/force"). '/' is swapped for NUL on both
// sides, which path.Match treats as any other character.
func globMatch(g, name string) bool {
	ok, _ := path.Match(strings.ReplaceAll(g, "/", "\x00"), strings.ReplaceAll(name, "/", "\x00"))
	return ok
}

// reservedHeaders may not carry a credential: the transport sets them.
var reservedHeaders = map[string]bool{
	"Host": true, "Content-Type": true, "Content-Length": true, "Accept": true, "Connection": true,
	"Transfer-Encoding": true, "Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true,
}

// ParseConfig parses and validates an upstreams file. Errors name the
// field, e.g. `upstreams[1].tenants[0] "Bad": ...`.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("mcpproxy: parse: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// LoadConfig reads and parses the upstreams file at path; each
// credential file must be readable and non-empty.
func LoadConfig(p string) (*Config, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("mcpproxy: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	for i, u := range c.Upstreams {
		if u.Credential != nil {
			if _, err := u.Credential.readSecret(); err != nil {
				return nil, fmt.Errorf("%s: mcpproxy: upstreams[%d].credential.file: %w", p, i, err)
			}
		}
	}
	return c, nil
}

// Validate reports every invalid field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field string, v any, format string, a ...any) {
		errs = append(errs, fmt.Errorf("mcpproxy: %s %q: %s", field, v, fmt.Sprintf(format, a...)))
	}
	seen := map[string]bool{}
	for i, u := range c.Upstreams {
		f := fmt.Sprintf("upstreams[%d]", i)
		if msgs := validation.IsDNS1123Label(u.Name); len(msgs) > 0 {
			bad(f+".name", u.Name, "%s", msgs[0])
		} else if strings.Contains(u.Name, "__") {
			bad(f+".name", u.Name, "must not contain \"__\" (it separates the parts of mcp__{server}__{tool})")
		} else if seen[u.Name] {
			bad(f+".name", u.Name, "duplicate name")
		}
		seen[u.Name] = true
		// No user info, query or fragment: a key belongs in a credential
		// or header (they never reach a log; net/http's errors quote the
		// request URL, query included).
		if pu, err := url.Parse(u.URL); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" ||
			pu.User != nil || pu.RawQuery != "" || pu.ForceQuery || pu.Fragment != "" {
			bad(f+".url", urlForError(u.URL), "want http(s)://host/path without user info, query or fragment")
		}
		if len(u.Tenants) == 0 {
			errs = append(errs, fmt.Errorf("mcpproxy: %s.tenants: at least one tenant is required", f))
		}
		for j, t := range u.Tenants {
			if msgs := validation.IsDNS1123Label(t); len(msgs) > 0 {
				bad(fmt.Sprintf("%s.tenants[%d]", f, j), t, "%s", msgs[0])
			}
		}
		if cr := u.Credential; cr != nil {
			if cr.File == "" {
				errs = append(errs, fmt.Errorf("mcpproxy: %s.credential.file is required", f))
			}
			if cr.Header != "" && (!httpguts.ValidHeaderFieldName(cr.Header) || reservedHeaders[http.CanonicalHeaderKey(cr.Header)]) {
				bad(f+".credential.header", cr.Header, "not a header name custody may set")
			}
			if cr.Prefix != nil && !httpguts.ValidHeaderFieldValue(*cr.Prefix) {
				bad(f+".credential.prefix", *cr.Prefix, "not valid in a header value")
			}
		}
		if u.Tools != nil {
			for kind, globs := range map[string][]string{"allow": u.Tools.Allow, "deny": u.Tools.Deny} {
				for j, g := range globs {
					if _, err := path.Match(g, ""); err != nil || g == "" {
						bad(fmt.Sprintf("%s.tools.%s[%d]", f, kind, j), g, "bad glob (path.Match syntax)")
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}

// urlForError is raw as an error may quote it: without its user info
// (a token may be given as the user name alone), query and fragment
// (they may hold a key), each replaced by "...", or a placeholder if it
// does not parse.
func urlForError(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	if u.User != nil {
		u.User = url.User("...")
	}
	if u.RawQuery != "" || u.ForceQuery {
		u.RawQuery, u.ForceQuery = "...", false
	}
	if u.Fragment != "" {
		u.Fragment, u.RawFragment = "...", ""
	}
	return u.String()
}
