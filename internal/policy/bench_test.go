package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func BenchmarkDecide(b *testing.B) {
	var src strings.Builder
	src.WriteString("rules:\n")
	for i := range 20 {
		switch i % 4 {
		case 0:
			fmt.Fprintf(&src, "  - {id: B-%03d, effect: allow, tool: 'Tool%d'}\n", i, i)
		case 1:
			fmt.Fprintf(&src, "  - {id: B-%03d, effect: ask, tool: 'mcp__*', when: 'args.repo.startsWith(\"acme/%d\")'}\n", i, i)
		case 2:
			fmt.Fprintf(&src, "  - {id: B-%03d, effect: deny, tool: 'WebFetch', when: 'dest.host.endsWith(\".bad%d.com\")'}\n", i, i)
		case 3:
			fmt.Fprintf(&src, "  - {id: B-%03d, effect: allow, tool: '*', when: 'tenant == \"acme\" && agent != \"x%d\"'}\n", i, i)
		}
	}
	p, err := Parse("bench.yaml", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Options{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	calls := []Call{
		{Tool: "WebFetch", Args: json.RawMessage(`{"url":"https://docs.example.com/a/b?c=d","prompt":"summarise"}`), Tenant: "acme", Agent: "bot"},
		{Tool: "mcp__github__create_issue", Args: json.RawMessage(`{"repo":"acme/widgets","title":"t","body":"b"}`), Tenant: "acme", Agent: "bot"},
		{Tool: "WebFetch", Args: json.RawMessage(`{"url":"http://0xA9FEA9FE/latest/meta-data/"}`), Tenant: "acme", Agent: "bot"},
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := e.Decide(ctx, p, calls[i%len(calls)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecideShellText decides a Bash call with 250 KB of shell text
// (every string is scanned for metadata endpoints), beside its floor in
// the same run: decoding the same arguments, which every decision does.
func BenchmarkDecideShellText(b *testing.B) {
	e, err := New(Options{DefaultEffect: Allow})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat(`curl -s https://example.com/v1.2.3/api?x=1 | jq '.items[] | .name' && echo "done $HOME" ; `, 2500)
	args, _ := json.Marshal(map[string]any{"command": text})
	start := time.Now()
	const floorN = 20
	for range floorN {
		if _, err := decodeArgs(args); err != nil {
			b.Fatal(err)
		}
	}
	floor := time.Since(start) / floorN
	b.SetBytes(int64(len(args)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d, _ := e.Decide(context.Background(), nil, Call{Tool: "Bash", Args: args}); d.Effect != Allow {
			b.Fatalf("effect %s", d.Effect)
		}
	}
	b.StopTimer()
	per := b.Elapsed() / time.Duration(b.N)
	b.ReportMetric(float64(per)/float64(floor), "x_decode_floor")
}
