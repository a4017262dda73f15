package gateway

import (
	"strings"
	"testing"
)

// HELD: percent-encoded method override parameters (_m%65thod,
// %5Fmethod, _METHOD) on a bodyless POST .../cancel, which skips the
// model check, do not reach the upstream.
func TestAttack8EncodedOverrideOnCancel(t *testing.T) {
	e := newEnv(t)
	tok := attack8Token(t, e, "openai")
	for _, q := range []string{"_m%65thod=DELETE", "_%6Dethod=DELETE", "%5Fmethod=DELETE", "_METHOD=DELETE"} {
		before := len(e.up["openai"].requests())
		e.do(t, "POST", "/openai/v1/responses/resp_1/cancel?"+q, map[string]string{"Authorization": "Bearer " + tok}, "")
		reqs := e.up["openai"].requests()
		if len(reqs) > before && strings.Contains(strings.ToLower(reqs[len(reqs)-1].RawQuery), "thod") {
			t.Errorf("%s reached the upstream: %q", q, reqs[len(reqs)-1].RawQuery)
		}
	}
}
