package gateway

import (
	"runtime"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/metering"
	"github.com/agentcustody/custody/internal/providerreach"
	"github.com/agentcustody/custody/internal/tooluse"
)

// allocated is the bytes f allocates.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// FINDING (low-medium, budget accounting): the held-body budget counts a
// body once (len(b)), but each check that reads the held bytes copies
// them again through a growing decoder buffer, uncounted. Measured on a
// 16 MiB OpenAI chat stream body (no race detector): bodyModel 64 MiB
// (jsontext.NewDecoder over a bytes.Reader copies into its own doubling
// buffer; over a *bytes.Buffer it would parse in place), providerreach
// 64 MiB, metering.Inspect 80 MiB, SetMaxOutput 96 MiB,
// AddIncludeUsage 96 MiB: ~25x the body per metered, model-scoped,
// tool-checked request, several times it live at the peak. Four
// sandboxes' 32 MiB bodies (all the 128 MiB budget lets in) then use
// well over the memory the budget claims to bound. Should: the checks
// parse the held bytes in place (or the budget counts what they hold).
// Fixed: the checks that read allocate next to nothing; a rewrite
// allocates the one body it forwards (replaceHeld counts any growth).
func TestAttack5ChecksAllocateManyTimesTheCountedBody(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"` + strings.Repeat("q", 16<<20) + `"}]}`)
	var reads uint64
	for _, c := range []struct {
		name    string
		f       func()
		rewrite bool
	}{
		{"bodyModel", func() { bodyModel(body) }, false},
		{"providerreach.Check", func() {
			providerreach.Check(body, providerreach.Request{ContentType: "application/json", Path: "/v1/chat/completions"})
		}, false},
		{"metering.Inspect", func() { metering.Inspect(tooluse.OpenAIChat, body) }, false},
		{"metering.SetMaxOutput", func() { metering.SetMaxOutput(tooluse.OpenAIChat, body, 16) }, true},
		{"metering.AddIncludeUsage", func() { metering.AddIncludeUsage(body) }, true},
	} {
		n := allocated(c.f)
		t.Logf("%s: %d KiB allocated for a %d MiB body", c.name, n>>10, len(body)>>20)
		if !c.rewrite {
			reads += n
		} else if n > uint64(len(body))+uint64(len(body))/64 {
			t.Errorf("%s allocates %d MiB for a %d MiB body: more than the one body it makes", c.name, n>>20, len(body)>>20)
		}
	}
	if reads > uint64(len(body))/8 {
		t.Errorf("the checks that only read one held %d MiB body allocate %d MiB (%.2fx), none of it counted against the held-body budget", len(body)>>20, reads>>20, float64(reads)/float64(len(body)))
	}
}
