package postgres

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/memory"
	"github.com/agentcustody/custody/internal/store/postgres/pgtest"
)

// TestAttackOpenAcceptsWhatRecallRefuses: a URL Open accepts must work,
// or Open must refuse it at start (as it does simple_protocol). A keyword
// recall is sent in cache_describe (searchExecMode), which pgx refuses
// on a connection without a description cache; with pgx's
// description_cache_capacity=0 in the URL (a documented pgx setting, like
// default_query_exec_mode) it is sent in exec instead (DB.searchMode).
// Before, such a URL opened, remembered and read fine, and then every
// keyword recall failed at run time.
func TestAttackOpenAcceptsWhatRecallRefuses(t *testing.T) {
	for _, mode := range []string{"", "exec", "describe_exec"} {
		t.Run("mode="+mode, func(t *testing.T) {
			u, err := url.Parse(pgtest.Schema(t))
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("description_cache_capacity", "0")
			if mode != "" {
				q.Set("default_query_exec_mode", mode)
			}
			u.RawQuery = q.Encode()
			ctx := context.Background()
			db, err := Open(ctx, u.String())
			if err != nil {
				return // refused at start: fine
			}
			defer db.Close()
			if _, err := db.RememberMemory(ctx, nsA, memory.Memory{Kind: "fact", Text: "deploys run on kubernetes", Session: "pod-a", CreatedAt: time.Now()}); err != nil {
				t.Fatalf("Open accepted the URL; RememberMemory = %v", err)
			}
			ms, err := db.RecallMemories(ctx, nsA, memory.Query{Text: "kubernetes", Limit: 10})
			if err != nil || len(ms) != 1 {
				t.Fatalf("Open accepted description_cache_capacity=0; a keyword recall then = %d memories, %v", len(ms), err)
			}
		})
	}
}
