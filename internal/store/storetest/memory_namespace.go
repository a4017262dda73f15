package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentcustody/custody/internal/memory"
)

// testRecallOtherNamespaceRanksFirst: the best matches of the whole store
// are another namespace's; a recall returns only its own namespace's
// memories, as many as the limit allows, and a smaller limit returns a
// prefix of a larger one's answer (a store that ranks the store's best
// candidates first must widen or fall back, not come back short).
func testRecallOtherNamespaceRanksFirst(t *testing.T, s memory.Store) {
	var others []string
	for i := range 60 {
		m := memRemember(t, s, memNSB, newMem("note", "", fmt.Sprintf("alpha alpha alpha %d", i), memT0))
		others = append(others, m.ID)
	}
	var own []string
	for i := range 15 {
		text := fmt.Sprintf("alpha %s%d", strings.Repeat("filler ", i%5+1), i)
		own = append(own, memRemember(t, s, memNSA, newMem("note", "", text, memT0)).ID)
	}
	all := memIDs(memRecall(t, s, memNSA, memory.Query{Text: "alpha", Limit: 20}))
	if got := slices.Sorted(slices.Values(all)); !slices.Equal(got, slices.Sorted(slices.Values(own))) {
		t.Fatalf("RecallMemories(alpha, limit 20) = %v, want this namespace's %v", all, own)
	}
	for _, limit := range []int{1, 3, 10} {
		got := memIDs(memRecall(t, s, memNSA, memory.Query{Text: "alpha", Limit: limit}))
		if !slices.Equal(got, all[:limit]) {
			t.Errorf("RecallMemories(alpha, limit %d) = %v, want %v", limit, got, all[:limit])
		}
	}
	if got := memIDs(memRecall(t, s, memNSB, memory.Query{Text: "alpha", Limit: 10})); len(got) != 10 || slices.ContainsFunc(got, func(id string) bool { return !slices.Contains(others, id) }) {
		t.Errorf("RecallMemories(other namespace) = %v, want 10 of its own", got)
	}
}
