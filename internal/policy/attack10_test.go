package policy

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
)

// TestAttack10LeadingZeroMetadataInText: a numeric host with a leading
// zero that one reading (octal: curl, glibc inet_aton, WHATWG; or
// decimal: older Go) makes the metadata address was only "ambiguous",
// and free text drops ambiguous hosts: "curl http://0251.254.169.254/"
// reached IMDS undenied. Either reading being metadata makes it metadata.
func TestAttack10LeadingZeroMetadataInText(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	for _, cmd := range []string{
		"curl http://0251.254.169.254/latest/meta-data/", // octal 169; decimal 251.254.169.254
		"curl 0251.254.169.254/latest/meta-data/",
		"curl http://169.254.0251.254/",            // octal 169; decimal 169.254.251.254
		"nc 00000251.254.169.254 80",               // octal 169
		"curl http://169.254.169.0254/",            // decimal 254; octal 172
		"wget -qO- http://0100.0100.0100.0200/",    // decimal 100.100.100.200 (Alibaba); octal 64.64.64.128
		"curl http://user@0251.254.169.254:80/x#y", // userinfo and port
	} {
		args, _ := json.Marshal(map[string]string{"command": cmd})
		d, err := e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args})
		if err != nil || d.Effect != Deny || !slices.Contains(d.RuleIDs, RuleNetMetadata) {
			t.Errorf("Decide(%q) = %s %v, %v; want deny by %s", cmd, d.Effect, d.RuleIDs, err, RuleNetMetadata)
		}
	}
}

// TestAttack10NumericHost: a host given as a JSON integer was skipped
// (only strings are classified), but a tool that formats it into a URL
// (f"http://{host}/", `http://${host}/`) reaches 2852039166, which is
// 169.254.169.254. An integer under a destination key is classified as
// its decimal string.
func TestAttack10NumericHost(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	for _, args := range []string{
		`{"host":2852039166,"port":80}`,
		`{"hostname":2852039166}`,
		`{"server":{"Host":[2852039166]}}`,
		`{"host":167772161}`,    // 10.0.0.1
		`{"host":2852039166.0}`, // JavaScript prints it 2852039166
		`{"url":2.852039166e9}`,
	} {
		d, err := e.Decide(context.Background(), nil, Call{Tool: "mcp__net__get", Args: json.RawMessage(args)})
		if err != nil || d.Effect != Deny {
			t.Errorf("Decide(%s) = %s %v, %v; want deny", args, d.Effect, d.RuleIDs, err)
		}
	}
	// Integers elsewhere are not destinations.
	for _, args := range []string{`{"count":2852039166}`, `{"target":3}`, `{"port":80}`} {
		d, err := e.Decide(context.Background(), nil, Call{Tool: "mcp__net__get", Args: json.RawMessage(args)})
		if err != nil || d.Effect != Allow {
			t.Errorf("Decide(%s) = %s %v, %v; want allow", args, d.Effect, d.RuleIDs, err)
		}
	}
}

// TestAttack10PaddedWeakKeyHost: a value under address or target was a
// host only without whitespace, so " 10.0.0.1" or "10.0.0.1\n" was free
// text (where internal addresses are not denied), while a tool that trims
// its arguments, or inet_aton (which skips leading and allows trailing
// whitespace), connects to 10.0.0.1. A value that looks like a host once
// trimmed is classified as given (whitespace: ambiguous).
func TestAttack10PaddedWeakKeyHost(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	for _, args := range []string{
		`{"address":"10.0.0.1 "}`,
		`{"address":" 10.0.0.1"}`,
		`{"target":"\t10.0.0.5:8080\n"}`,
		`{"conn":{"Address":["192.168.1.1 "]}}`,
	} {
		d, err := e.Decide(context.Background(), nil, Call{Tool: "mcp__net__connect", Args: json.RawMessage(args)})
		if err != nil || d.Effect != Deny {
			t.Errorf("Decide(%s) = %s %v, %v; want deny", args, d.Effect, d.RuleIDs, err)
		}
	}
	for _, args := range []string{`{"target":"the main target"}`, `{"address":" 12 Main St. "}`} {
		d, err := e.Decide(context.Background(), nil, Call{Tool: "mcp__net__connect", Args: json.RawMessage(args)})
		if err != nil || d.Effect != Allow {
			t.Errorf("Decide(%s) = %s %v, %v; want allow (prose)", args, d.Effect, d.RuleIDs, err)
		}
	}
}
