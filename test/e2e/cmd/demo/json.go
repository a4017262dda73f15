package main

import (
	"bytes"
	"encoding/json"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

func jsonField(r fixture.Response, name string) string {
	var m map[string]any
	_ = json.Unmarshal(r.Body, &m)
	s, _ := m[name].(string)
	return s
}

func jsonInt(r fixture.Response, name string) int64 {
	d := json.NewDecoder(bytes.NewReader(r.Body))
	d.UseNumber()
	var raw map[string]any
	if d.Decode(&raw) != nil {
		return 0
	}
	if n, ok := raw[name].(json.Number); ok {
		v, _ := n.Int64()
		return v
	}
	return 0
}

func jsonRaw(r fixture.Response, name string) json.RawMessage {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(r.Body, &m)
	return m[name]
}

func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func countMemories(r fixture.Response) int {
	var b struct {
		Memories []json.RawMessage `json:"memories"`
	}
	_ = json.Unmarshal(r.Body, &b)
	return len(b.Memories)
}

func jsonStrings(r fixture.Response, name string) []string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal(r.Body, &m)
	var out []string
	_ = json.Unmarshal(m[name], &out)
	return out
}
