package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// exchangeLoop exchanges the token file's content at base every period
// and prints each change of outcome with the time. It returns only if
// base or tokenFile is empty.
func exchangeLoop(base, tokenFile string, period time.Duration) {
	if base == "" || tokenFile == "" {
		fmt.Fprintln(os.Stderr, "probe: CUSTODY_URL and CUSTODY_TOKEN_FILE must be set")
		os.Exit(3)
	}
	// An https CUSTODY_URL is trusted with CUSTODY_CA_FILE, as the
	// custody SDKs do.
	tc, err := tlsfile.ClientConfig(os.Getenv("CUSTODY_CA_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe: CUSTODY_CA_FILE:", err)
		os.Exit(3)
	}
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	last := ""
	for {
		out := exchangeOnce(client, base, tokenFile)
		if out != last {
			fmt.Printf("%s exchange %s\n", time.Now().UTC().Format(time.RFC3339Nano), out)
			last = out
		}
		time.Sleep(period)
	}
}

// exchangeOnce returns "STATUS CODE" for a refusal, "200 TENANT/AGENT"
// for a key (the key itself is dropped), or "error: ..." when no answer
// came.
func exchangeOnce(client *http.Client, base, tokenFile string) string {
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		return "error: " + err.Error()
	}
	body, _ := json.Marshal(map[string]string{"token": string(bytes.TrimSpace(tok))})
	resp, err := client.Post(base+"/v1/auth/kubernetes", "application/json", bytes.NewReader(body))
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var r struct{ Error, Tenant, Agent string }
	_ = json.Unmarshal(b, &r)
	if resp.StatusCode == http.StatusOK {
		return fmt.Sprintf("200 %s/%s", r.Tenant, r.Agent)
	}
	return fmt.Sprintf("%d %s", resp.StatusCode, r.Error)
}
