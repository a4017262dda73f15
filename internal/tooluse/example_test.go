package tooluse_test

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentcustody/custody/internal/tooluse"
)

func ExampleScanner() {
	// The gateway tees the response body it passes on into a Scanner.
	f, ok := tooluse.FormatFor("anthropic", "/v1/messages")
	if !ok {
		return
	}
	upstream := strings.NewReader("event: content_block_start\n" +
		`data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}` + "\n\n" +
		"event: content_block_delta\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"cmd\": \"ls\",  \"cwd\":\"/tmp\"}"}}` + "\n\n" +
		"event: content_block_stop\n" +
		`data: {"type":"content_block_stop","index":0}` + "\n\n" +
		"event: message_delta\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":12}}` + "\n\n")
	s := tooluse.NewScanner(f, "text/event-stream", tooluse.Limits{})
	io.Copy(io.Discard, io.TeeReader(upstream, s))

	r := s.Result()
	for _, u := range r.Uses {
		fmt.Printf("%s %s %s\n", u.ID, u.Name, u.Args)
	}
	fmt.Println(r.StopReason, r.Usage.OutputTokens, r.Complete)
	// Output:
	// toolu_1 bash {"cmd":"ls","cwd":"/tmp"}
	// tool_use 12 false
}
