// Package mcpdocs is the demo's upstream MCP server, kept apart from
// the fixture so that netprobe's static image stays small.
package mcpdocs

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Upstream is the demo's upstream MCP server (a real go-sdk server,
// streamable HTTP at /mcp): a documentation service with the tools
// "search" {query} and "delete_page" {page}. It demands the credential
// custody injects (Authorization: Bearer CREDENTIAL) and keeps its own
// call log, served at GET /calls as
//
//	{"calls":["search",...],"unauthorized":N}
//
// so that a check can prove what reached it. netprobe's mcp-serve mode
// serves it on the real node; the stand-in demo runs it on loopback.
type Upstream struct {
	mu           sync.Mutex
	Calls        []string `json:"calls"`
	Unauthorized int      `json:"unauthorized"`
}

type mcpQuery struct {
	Query string `json:"query"`
}

type mcpPage struct {
	Page string `json:"page"`
}

// Handler serves the upstream for credential.
func (u *Upstream) Handler(credential string) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "docs", Version: "1"}, nil)
	logged := func(name string) {
		u.mu.Lock()
		u.Calls = append(u.Calls, name)
		u.mu.Unlock()
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "search", Description: "search the documentation"}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpQuery) (*mcp.CallToolResult, any, error) {
		logged("search")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "3 pages match " + a.Query}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "delete_page", Description: "delete a documentation page"}, func(_ context.Context, _ *mcp.CallToolRequest, a mcpPage) (*mcp.CallToolResult, any, error) {
		logged("delete_page")
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted " + a.Page}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	mux := http.NewServeMux()
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		defer u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(u)
	})
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+credential {
			u.mu.Lock()
			u.Unauthorized++
			u.mu.Unlock()
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	return mux
}
