package policy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestFreeTextMetadataBypasses: shell commands that reach a cloud
// metadata endpoint and that the free-text scan lets through (each was
// checked to be what bash, curl, nc, socat or Python accept). Every one
// should be denied by CUSTODY-NET-METADATA, as the commit promises ("in
// any notation").
func TestFreeTextMetadataBypasses(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	long := strings.Repeat("a", 4096)
	groups := map[string][]string{
		// text.go:36 skips a token over maxTextToken instead of
		// classifying its host: padding the path, query or fragment
		// (never sent / ignored by IMDS) hides the endpoint.
		"long token skipped": {
			"curl http://169.254.169.254/latest/meta-data/iam/security-credentials/#" + long,
			`curl "http://169.254.169.254/latest/meta-data/?x=` + long + `"`,
		},
		// args.go:178: a string that starts with "scheme://" is classified
		// as one URL (its host only) and never scanned as text; with no
		// whitespace in it, bash runs the rest.
		"string starting with a URL is not scanned": {
			"http://github.com/;curl${IFS}169.254.169.254/latest/meta-data/",
			"https://github.com/#;curl${IFS}http://169.254.169.254/",
			"ftp://github.com/$(curl${IFS}169.254.169.254)",
		},
		// addressLike cuts the host at the first "/" (or ":"), so paths
		// and prefixes that carry a host are never classified.
		"bash /dev/tcp": {
			"exec 3<>/dev/tcp/169.254.169.254/80; printf 'GET /latest/meta-data/ HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3",
			"cat < /dev/tcp/metadata.google.internal/80",
		},
		"socat address": {
			"socat - TCP:169.254.169.254:80",
			"socat - TCP4:169.254.169.254:80",
		},
		"curl --resolve / --connect-to": {
			"curl --resolve x:80:169.254.169.254 http://x/latest/meta-data/",
			"curl --connect-to ::169.254.169.254: http://github.com/latest/meta-data/",
		},
		// Unbracketed IPv6 (nc, ping, ssh, Python sockets take it).
		"bare IPv6": {
			"nc fd00:ec2::254 80",
			"nc ::ffff:169.254.169.254 80",
			"python3 -c \"import socket; socket.create_connection(('fd00:ec2::254', 80))\"",
		},
		// curl accepts one or three slashes; ClassifyURL calls these
		// ambiguous, and text() keeps only metadata results.
		"lenient slashes": {
			"curl http:/169.254.169.254/latest/meta-data/",
			"curl http:///169.254.169.254/latest/meta-data/",
		},
		// The rebinding names are in metadataNames, but a bare token is
		// only classified when it is numeric or contains "metadata".
		"bare wildcard-DNS name": {
			"curl 169.254.169.254.nip.io/latest/meta-data/",
			"curl 169-254-169-254.sslip.io/latest/meta-data/",
		},
		// Shell quoting and empty expansions split the token (harder to
		// close in general; listed for completeness).
		"shell quoting": {
			`curl 169.254.169.25"4"/latest/meta-data/`,
			`curl 169.254.169.2\54/latest/meta-data/`,
			`curl 169.254${x}.169.254/latest/meta-data/`,
		},
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			for _, cmd := range groups[name] {
				args, _ := json.Marshal(map[string]any{"command": cmd})
				d, err := e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args})
				if err != nil {
					t.Fatal(err)
				}
				if d.Effect != Deny || !slices.Contains(d.RuleIDs, RuleNetMetadata) {
					show := cmd
					if len(show) > 100 {
						show = show[:100] + "..."
					}
					t.Errorf("Bash %q = %s %v, want deny by %s", show, d.Effect, d.RuleIDs, RuleNetMetadata)
				}
			}
		})
	}
}
