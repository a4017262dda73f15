// Command probe is the "agent" process of the gateway scenario: it runs
// inside the sandbox (started by `custody exec` through sandboxd) and calls
// the model API the way an SDK does, with the key and base URL from its
// environment (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL). It prints
// "STATUS BODY". With -copy-token-to it also writes its key to a file,
// playing a process that leaks its credential. With -web-fetch URL it
// asks the model to have the provider fetch URL (the web fetch tool).
//
// With -exchange-every D it is instead the sandbox's long-running agent
// process (the container of deploy/base/sandbox/sandboxtemplate.yaml on
// the real node): every D it reads the projected token at
// $CUSTODY_TOKEN_FILE, exchanges it at $CUSTODY_URL/v1/auth/kubernetes and
// prints a line whenever the outcome changes, e.g.
// "exchange 401 warm_pool" then "exchange 200 agents/run-1". It never
// prints the key it gets.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"
)

func main() {
	copyTo := flag.String("copy-token-to", "", "write the token found in ANTHROPIC_API_KEY to this file")
	every := flag.Duration("exchange-every", 0, "run as the sandbox's agent: exchange the projected token this often, forever")
	model := flag.String("model", "claude-sonnet-4-5", "the model to ask")
	fetch := flag.String("fetch", "", "instead of calling the model, GET this URL (through HTTP_PROXY if set) and print the status and body")
	webFetch := flag.String("web-fetch", "", "call the model with the provider's web fetch tool, asking it to fetch this URL (the provider would connect to it)")
	flag.Parse()
	if *fetch != "" {
		// Like curl, and unlike Go's ProxyFromEnvironment, loopback
		// destinations go through HTTP_PROXY too (the stand-in's provider
		// is on 127.0.0.1).
		tr := &http.Transport{}
		if p := os.Getenv("HTTP_PROXY"); p != "" {
			u, err := url.Parse(p)
			if err != nil {
				fmt.Fprintln(os.Stderr, "probe: HTTP_PROXY:", err)
				os.Exit(3)
			}
			tr.Proxy = http.ProxyURL(u)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get(*fetch)
		if err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(4)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		fmt.Printf("%d %s\n", resp.StatusCode, bytes.TrimSpace(b))
		return
	}
	if *every > 0 {
		exchangeLoop(os.Getenv("CUSTODY_URL"), os.Getenv("CUSTODY_TOKEN_FILE"), *every)
		return
	}
	key, base := os.Getenv("ANTHROPIC_API_KEY"), os.Getenv("ANTHROPIC_BASE_URL")
	if key == "" || base == "" {
		fmt.Fprintln(os.Stderr, "probe: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL must be set")
		os.Exit(3)
	}
	if *copyTo != "" {
		if err := os.WriteFile(*copyTo, []byte(key), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, "probe:", err)
			os.Exit(3)
		}
	}
	body := []byte(`{"model":` + strconv.Quote(*model) + `,"max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`)
	if *webFetch != "" {
		body = []byte(`{"model":` + strconv.Quote(*model) + `,"max_tokens":16,"messages":[{"role":"user","content":` +
			strconv.Quote("fetch "+*webFetch) + `}],"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`)
	}
	req, _ := http.NewRequest("POST", base+"/v1/messages", bytes.NewReader(body))
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("content-type", "application/json")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(4)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s\n", resp.StatusCode, bytes.TrimSpace(b))
}
