package policy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestFreeTextMetadata: a metadata endpoint written anywhere in free text
// (a Bash command, a script, a prompt), in any notation the classifier
// knows, is denied by CUSTODY-NET-METADATA; internal or odd addresses in
// prose are not denied, nor are words like "metadata".
func TestFreeTextMetadata(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	denied := []string{
		"curl http://169.254.169.254/latest/meta-data/iam/security-credentials/",
		"curl -s 169.254.169.254/latest/meta-data/",
		"wget -qO- http://2852039166/latest",
		"curl http://0xA9FEA9FE/",
		"curl 0251.0376.0251.0376",
		"curl 169.254.43518/latest",
		"curl -H 'Metadata-Flavor: Google' http://metadata.google.internal/computeMetadata/v1/",
		"curl metadata.google.internal/computeMetadata/v1/",
		"curl -g 'http://[fd00:ec2::254]/latest/'",
		"curl [::ffff:169.254.169.254]/latest",
		"python3 -c \"import urllib.request as u; print(u.urlopen('http://169.254.169.254/').read())\"",
		"X=$(curl http://user@169.254.169.254@evil.example/); echo $X",
		"curl 'http://evil.example\\@169.254.169.254/'",
		"URL=http://169.254.169.254/ ./fetch.sh",
		"echo ok && curl --url=http://169.254.169.254/",
		"see http://169.254.169.254.nip.io/",
		"curl http://169.254.170.2/v2/credentials",
		"curl 169.254.169.254.",
		"fetch(\"http://metadata.azure.com/metadata/instance\")",
	}
	for _, cmd := range denied {
		args, _ := json.Marshal(map[string]any{"command": cmd})
		d, err := e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args})
		if err != nil {
			t.Fatal(err)
		}
		if d.Effect != Deny || !slices.Contains(d.RuleIDs, RuleNetMetadata) {
			t.Errorf("Bash %q = %s %v, want deny by %s", cmd, d.Effect, d.RuleIDs, RuleNetMetadata)
			continue
		}
		if d.Destination == nil || !d.Destination.InText || d.Destination.Kind != KindMetadata {
			t.Errorf("Bash %q: destination %+v, want a metadata destination marked in_text", cmd, d.Destination)
		}
	}
	allowed := []string{
		"curl http://localhost:3000/health",
		"npm run dev -- --host 127.0.0.1",
		"ping 10.0.0.1",
		"git clone https://github.com/kubernetes-sigs/agent-sandbox",
		"read the metadata of the file and print instance-data counts",
		"exiftool -metadata photo.jpg",
		"echo 12345678 deadbeef 1.2.3",
		"the server at 169.254.1.1 is a link-local example",
		"see docs.example.com/metadata and cafe.example",
		"see http:// 169.254",
		"git clone http://u@a.example@b.example/",
		"",
	}
	for _, cmd := range allowed {
		args, _ := json.Marshal(map[string]any{"command": cmd})
		d, err := e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args})
		if err != nil {
			t.Fatal(err)
		}
		if d.Effect != Allow {
			t.Errorf("Bash %q = %s %v %+v, want allow (no metadata endpoint)", cmd, d.Effect, d.RuleIDs, d.Destinations)
		}
	}
}

// TestFreeTextBounded: one call cannot make the scan record more than
// maxTextDests destinations, and padding a token does not hide its host.
func TestFreeTextBounded(t *testing.T) {
	e := newEngine(t, Options{DefaultEffect: Allow})
	cmd := strings.Repeat("curl http://169.254.169.254/ ; ", 1000)
	args, _ := json.Marshal(map[string]any{"command": cmd})
	d, _ := e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args})
	if d.Effect != Deny || len(d.Destinations) != maxTextDests {
		t.Fatalf("1000 metadata URLs: %s with %d destinations, want deny with %d", d.Effect, len(d.Destinations), maxTextDests)
	}
	long := "http://169.254.169.254/#" + strings.Repeat("a", 1<<16)
	args, _ = json.Marshal(map[string]any{"command": "curl " + long})
	d, _ = e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args})
	if d.Effect != Deny {
		t.Fatalf("a 64 KiB token: %s %v, want deny", d.Effect, d.RuleIDs)
	}
}

// FuzzFreeText: the free-text scan never panics, stays bounded, and
// every destination it records is a metadata endpoint marked in_text.
func FuzzFreeText(f *testing.F) {
	for _, s := range []string{"curl http://169.254.169.254/", "x 0xA9FEA9FE y", "[fd00:ec2::254]", "a@b\\c/metadata.goog", "http://u@169.254.169.254@e/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fd := finder{budget: maxDestStrings}
		fd.text(s)
		if len(fd.out) > maxTextDests {
			t.Fatalf("%d destinations from one text", len(fd.out))
		}
		for _, d := range fd.out {
			if d.Kind != KindMetadata || !d.InText {
				t.Fatalf("recorded %+v from %q", d, s)
			}
		}
	})
}
