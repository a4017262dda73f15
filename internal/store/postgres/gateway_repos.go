package postgres

import (
	"encoding/json"
	"fmt"

	"github.com/agentcustody/custody/internal/gateway"
)

// gatewayReposSchema is migration 11: the repository grants of each minted
// token (for providers of kind github), a JSON array of
// {"repo":"OWNER/NAME","access":"read"|"write"} as text; NULL for none,
// and in rows recorded before it, which read back as no repos.
const gatewayReposSchema = `ALTER TABLE gateway_tokens ADD COLUMN repos text; -- JSON array of {repo, access}, NULL for none`

// encodeRepos is the repos column for rs: nil (NULL) for none.
func encodeRepos(rs []gateway.RepoGrant) (*string, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return nil, fmt.Errorf("postgres: encode repos: %w", err)
	}
	s := string(b)
	return &s, nil
}

// decodeRepos reads the repos column: nil for NULL.
func decodeRepos(s *string) ([]gateway.RepoGrant, error) {
	if s == nil {
		return nil, nil
	}
	var rs []gateway.RepoGrant
	if err := json.Unmarshal([]byte(*s), &rs); err != nil {
		return nil, fmt.Errorf("postgres: decode repos: %w", err)
	}
	return rs, nil
}
