// Command provider-standin is the model provider stand-in as an image for
// the real node: fixture.StandInHandler (401 authentication_error to every
// request, as Anthropic answers an invalid key) on ADDR, plus
//
//	GET /_seen  ->  {"api_keys_sha256":["hex",...],"authorization":[bool,...]}
//
// one entry per request received, in order: the SHA-256 of its x-api-key
// and whether it carried an Authorization header. Only digests leave the
// pod, so a test can check which key the gateway injected without the
// key appearing in a response or a log.
//
//	provider-standin ADDR   # e.g. :8080
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"sync"

	"github.com/agentcustody/custody/test/e2e/fixture"
)

type seen struct {
	mu    sync.Mutex
	Keys  []string `json:"api_keys_sha256"`
	Auths []bool   `json:"authorization"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: provider-standin ADDR")
		os.Exit(2)
	}
	s := &seen{Keys: []string{}, Auths: []bool{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_seen", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s)
	})
	mux.Handle("/", fixture.StandInHandler(func(apiKey, auth string) {
		sum := sha256.Sum256([]byte(apiKey))
		s.mu.Lock()
		s.Keys = append(s.Keys, hex.EncodeToString(sum[:]))
		s.Auths = append(s.Auths, auth != "")
		s.mu.Unlock()
	}))
	fmt.Println("provider stand-in on", os.Args[1])
	if err := http.ListenAndServe(os.Args[1], mux); err != nil {
		fmt.Fprintln(os.Stderr, "provider-standin:", err)
		os.Exit(1)
	}
}
