// Package sdk tests the model gateway with the providers' official SDKs as
// clients: openai-go v3, anthropic-sdk-go v2 and genai (Go), and the npm
// packages openai, @anthropic-ai/sdk and @google/genai (through node, see
// node/). It is its own module so that the SDKs never become dependencies
// of custody itself.
//
// Each test runs the real `custody serve` binary (built from the
// repository) with a gateway on loopback, mints gateway tokens on its
// admin listener, and points an SDK at it. Behind the gateway, a narrow
// stand-in answers as each provider's API does (the paid APIs cannot be
// reached here). For every SDK the tests check:
//
//   - the upstream sees only the real key, never the gateway token;
//   - streams arrive whole and unbuffered (the stand-in sends each event
//     only after the client has read the previous one);
//   - a revoked token surfaces as "gateway token revoked", before a call
//     and in the middle of a stream (as the SDK's own typed error);
//   - a gateway refusal is not retried (the SDKs retry 5xx by default).
package sdk
