package mcpproxy_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/mcpproxy"
)

func TestParseConfigErrors(t *testing.T) {
	const ok = "  - name: gh\n    url: https://mcp.example.com/mcp\n    tenants: [a]\n"
	for _, tc := range []struct{ name, file, want string }{
		{"unknown field", ok + "    token: x\n", `unknown field "token"`},
		{"unknown top-level field", "servers: []\n", `unknown field "servers"`},
		{"bad name", "  - name: Git_Hub\n    url: https://h/\n    tenants: [a]\n", "upstreams[0].name"},
		{"name with __", "  - name: a--b__c\n    url: https://h/\n    tenants: [a]\n", "upstreams[0].name"},
		{"duplicate name", ok + ok, "upstreams[1].name \"gh\": duplicate"},
		{"bad url", "  - name: gh\n    url: ftp://h/\n    tenants: [a]\n", "upstreams[0].url"},
		{"url with user", "  - name: gh\n    url: https://u:p@h/\n    tenants: [a]\n", "upstreams[0].url"},
		{"no tenants", "  - name: gh\n    url: https://h/\n", "upstreams[0].tenants"},
		{"bad tenant", "  - name: gh\n    url: https://h/\n    tenants: [a, B]\n", "upstreams[0].tenants[1]"},
		{"credential without file", ok + "    credential: {header: X-Key}\n", "upstreams[0].credential.file"},
		{"reserved header", ok + "    credential: {file: /x, header: Mcp-Session-Id}\n", "upstreams[0].credential.header"},
		{"bad header", ok + "    credential: {file: /x, header: \"a b\"}\n", "upstreams[0].credential.header"},
		{"bad glob", ok + "    tools: {deny: [\"[a-\"]}\n", "upstreams[0].tools.deny[0]"},
		{"duplicate key", ok + "    url: https://other/\n", `key "url" already set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := mcpproxy.ParseConfig([]byte("upstreams:\n" + tc.file))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("ParseConfig() = %v, want an error mentioning %q", err, tc.want)
			}
		})
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	cred := filepath.Join(dir, "cred")
	file := filepath.Join(dir, "upstreams.json")
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(file, `{"upstreams":[{"name":"gh","url":"https://h/mcp","tenants":["a"],"credential":{"file":"`+cred+`","header":"X-Api-Key"},"tools":{"allow":["get_*"],"deny":["get_secret"]}}]}`)
	if _, err := mcpproxy.LoadConfig(file); err == nil || !strings.Contains(err.Error(), "credential.file") {
		t.Errorf("LoadConfig with a missing credential file = %v", err)
	}
	write(cred, "\n")
	if _, err := mcpproxy.LoadConfig(file); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("LoadConfig with an empty credential file = %v", err)
	}
	write(cred, "s3cret\n")
	c, err := mcpproxy.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	if u := c.Upstreams[0]; u.Name != "gh" || u.Credential.Header != "X-Api-Key" || len(u.Tools.Allow) != 1 {
		t.Errorf("LoadConfig = %+v", u)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("upstreams:\n  - name: gh\n    url: https://h/mcp\n    tenants: [a]\n    credential: {file: /x, header: X-Key, prefix: \"\"}\n    tools: {allow: [\"*\"], deny: [\"d[a-z]*\"]}\n"))
	f.Add([]byte(`{"upstreams":[{"name":"a","url":"http://h","tenants":["t"]}]}`))
	f.Add([]byte("upstreams: [{name: a, url: ':', tenants: []}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := mcpproxy.ParseConfig(data)
		if err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("a parsed config does not validate: %v", err)
			}
		}
	})
}
