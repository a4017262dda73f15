package signer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentcustody/custody/verify"
)

// resultCommitment adds "result_commitment" to a call.completed body
// when result is set: verify.CommitArgs over a fresh salt and the JCS
// form of result, as args are committed, so the result is never stored
// and one record's commitment can be opened later with the salt
// ([Signer.RevealSalt] of the call.completed record's index,
// verify.VerifyArgsReveal). It returns the salt to store, nil without a
// result. A result that is not JSON is ErrInvalid.
func resultCommitment(result json.RawMessage, body map[string]any) ([]byte, error) {
	if len(result) == 0 {
		return nil, nil
	}
	canon, err := verify.CanonicalizeJSON(result)
	if err != nil {
		return nil, fmt.Errorf("%w: result: %w", ErrInvalid, err)
	}
	salt := newSalt()
	c, err := verify.CommitArgs(salt, canon)
	if err != nil {
		return nil, err
	}
	body["result_commitment"] = c
	return salt, nil
}

// MayAllow reports whether the tenant's policy could allow some call of
// tool, directly or after an approval ([policy.Engine.MayAllow]): false
// when it never can, and for every tool while the tenant's policy file
// does not parse (every call is then denied). The MCP proxy hides such
// tools from tools/list. An error means the policy could not be read.
func (s *Signer) MayAllow(ctx context.Context, tenant, tool string) (bool, error) {
	pol, _, err := s.tenantPolicy(ctx, tenant)
	var invalid *invalidPolicyError
	if errors.As(err, &invalid) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.engine.MayAllow(pol, tool), nil
}
