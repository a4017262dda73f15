package sqlite

import (
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/agentcustody/custody/internal/gateway"
)

// gatewayReposSchema is migration 11: the repository grants of each minted
// token (for providers of kind github), a JSON array of
// {"repo":"OWNER/NAME","access":"read"|"write"}; NULL for none, and in
// rows recorded before it, which read back as no repos.
const gatewayReposSchema = `ALTER TABLE gateway_tokens ADD COLUMN repos TEXT; -- JSON array of {repo, access}, NULL for none`

// encodeRepos is the repos column for rs: NULL for none.
func encodeRepos(rs []gateway.RepoGrant) (sql.NullString, error) {
	if len(rs) == 0 {
		return sql.NullString{}, nil
	}
	b, err := json.Marshal(rs)
	if err != nil {
		return sql.NullString{}, fmt.Errorf("sqlite: encode repos: %w", err)
	}
	return sql.NullString{String: string(b), Valid: true}, nil
}

// decodeRepos reads the repos column: nil for NULL.
func decodeRepos(s sql.NullString) ([]gateway.RepoGrant, error) {
	if !s.Valid {
		return nil, nil
	}
	var rs []gateway.RepoGrant
	if err := json.Unmarshal([]byte(s.String), &rs); err != nil {
		return nil, fmt.Errorf("sqlite: decode repos: %w", err)
	}
	return rs, nil
}
