package policy_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentcustody/custody/internal/policy"
)

func Example() {
	p, err := policy.Parse("acme.yaml", []byte(`rules:
  - id: ACME-001
    effect: allow
    tool: WebFetch
`))
	if err != nil {
		panic(err)
	}
	e, err := policy.New(policy.Options{})
	if err != nil {
		panic(err)
	}
	d, _ := e.Decide(context.Background(), p, policy.Call{
		Tool: "WebFetch",
		Args: json.RawMessage(`{"url":"http://0251.0376.0251.0376/latest/meta-data/"}`),
	})
	fmt.Println(d.Effect, d.RuleIDs, d.Destination.Host)
	// Output: deny [CUSTODY-NET-METADATA CUSTODY-NET-INTERNAL ACME-001] 169.254.169.254
}

func ExampleClassifyURL() {
	for _, u := range []string{"https://example.com/", "http://[::ffff:a9fe:a9fe]/", "http://user@169.254.169.254@evil.example/"} {
		fmt.Println(policy.ClassifyURL(u).Kind)
	}
	// Output:
	// public
	// metadata
	// ambiguous
}
