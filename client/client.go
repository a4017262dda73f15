// Package client is the Go client an agent inside a sandbox uses to reach
// custody: it exchanges the pod's projected service-account token for a
// short-lived key, re-exchanges when the key expires or is refused, and
// calls the memory API in the agent's own namespace and the signer (runs,
// decisions, approvals).
//
// Configuration comes from the environment the SandboxTemplate in
// deploy/ sets:
//
//	CUSTODY_URL         custody's API, e.g. http://custody.custody-system.svc:8865
//	CUSTODY_TOKEN_FILE  the projected token, e.g. /var/run/secrets/custody/token
//	CUSTODY_AUTH        "kubernetes" (default) or "static"
//	CUSTODY_CA_FILE     PEM CA bundle trusted for an https CUSTODY_URL instead
//	                    of the system roots, e.g. /var/run/secrets/custody/ca.crt
//
// The token file is read again at every exchange, because the kubelet
// rotates projected tokens. The key is kept in memory only.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentcustody/custody/internal/tlsfile"
)

// Config configures a [Client].
type Config struct {
	// URL is custody's API base URL. Required.
	URL string
	// TokenFile is the file holding the token to exchange. Required.
	TokenFile string
	// Method is the auth method: "kubernetes" (default) or "static".
	Method string
	// CAFile is a PEM bundle of CA certificates trusted for an https URL
	// instead of the system roots (TLS 1.2 or later, the name checked).
	// Ignored when HTTPClient is set. Empty: the system roots.
	CAFile string
	// HTTPClient defaults to a client that trusts CAFile. A client of
	// your own should leave its Timeout zero: Timeout bounds requests.
	HTTPClient *http.Client
	// Timeout bounds each request, reading the answer included. Default
	// 30 s; WaitApproval's request gets its wait on top.
	Timeout time.Duration
	// RefreshBefore re-exchanges this long before the key's expiry.
	// Default 1 minute.
	RefreshBefore time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// StandbyWait is how long a signer call keeps retrying while custody
	// answers 503 signer_standby (with several replicas, one holds the
	// signer's writer lease; during a hand-over none does), each retry
	// after the answer's Retry-After. Default 30 s; negative: no retry.
	StandbyWait time.Duration
}

// FromEnv builds a Config from CUSTODY_URL, CUSTODY_TOKEN_FILE,
// CUSTODY_AUTH and CUSTODY_CA_FILE read with lookup (os.LookupEnv if nil).
func FromEnv(lookup func(string) (string, bool)) (Config, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	var c Config
	c.URL, _ = lookup("CUSTODY_URL")
	c.TokenFile, _ = lookup("CUSTODY_TOKEN_FILE")
	c.Method, _ = lookup("CUSTODY_AUTH")
	c.CAFile, _ = lookup("CUSTODY_CA_FILE")
	if c.URL == "" || c.TokenFile == "" {
		return c, errors.New("client: CUSTODY_URL and CUSTODY_TOKEN_FILE must be set")
	}
	return c, nil
}

// Client talks to custody. It is safe for concurrent use.
type Client struct {
	cfg Config

	mu  sync.Mutex
	key Key
}

// Key is an exchanged key and the identity it speaks for.
type Key struct {
	Key       string    `json:"key"`
	KeyID     string    `json:"key_id"`
	ExpiresAt time.Time `json:"expires_at"`
	Tenant    string    `json:"tenant"`
	Agent     string    `json:"agent"`
	Session   string    `json:"session"`
}

// Error is a refusal from custody: the HTTP status and the body's
// "error" code and "message".
type Error struct {
	Status  int
	Code    string `json:"error"`
	Message string `json:"message"`
	// Body is the whole response body.
	Body []byte
	// RetryAfter is the response's Retry-After (whole seconds), 0 if none.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("custody answered %d %s (not a custody error body: is the URL or auth method right?)", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("custody: %d %s: %s", e.Status, e.Code, e.Message)
}

// New validates cfg and returns a Client. It does not exchange yet.
// Errors: a missing URL or token file, an unknown method, a CAFile that
// cannot be read or holds no certificate, or a CAFile with a URL that is
// not https.
func New(cfg Config) (*Client, error) {
	if cfg.URL == "" || cfg.TokenFile == "" {
		return nil, errors.New("client: URL and TokenFile are required")
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	if cfg.CAFile != "" && !strings.HasPrefix(strings.ToLower(cfg.URL), "https://") {
		// A CA file says TLS was meant: the token must not go in clear.
		return nil, errors.New("client: CUSTODY_CA_FILE is set but CUSTODY_URL is not https://")
	}
	switch cfg.Method {
	case "":
		cfg.Method = "kubernetes"
	case "kubernetes", "static":
	default:
		return nil, fmt.Errorf("client: unknown auth method %q", cfg.Method)
	}
	if cfg.HTTPClient == nil {
		t, err := tlsfile.ClientTransport(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: CUSTODY_CA_FILE: %w", err)
		}
		cfg.HTTPClient = &http.Client{Transport: t}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.RefreshBefore <= 0 {
		cfg.RefreshBefore = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.StandbyWait == 0 {
		cfg.StandbyWait = 30 * time.Second
	}
	return &Client{cfg: cfg}, nil
}

// Exchange exchanges the token file's current token for a new key and
// keeps it.
func (c *Client) Exchange(ctx context.Context) (Key, error) {
	tok, err := os.ReadFile(c.cfg.TokenFile)
	if err != nil {
		return Key{}, fmt.Errorf("client: read token: %w", err)
	}
	var k Key
	body := map[string]string{"token": strings.TrimSpace(string(tok))}
	if err := c.do(ctx, http.MethodPost, "/v1/auth/"+c.cfg.Method, "", body, nil, &k); err != nil {
		return Key{}, err
	}
	c.mu.Lock()
	c.key = k
	c.mu.Unlock()
	return k, nil
}

// CurrentKey returns a live key, exchanging if there is none or it
// expires within RefreshBefore.
func (c *Client) CurrentKey(ctx context.Context) (Key, error) {
	c.mu.Lock()
	k := c.key
	c.mu.Unlock()
	if k.Key != "" && c.cfg.Now().Add(c.cfg.RefreshBefore).Before(k.ExpiresAt) {
		return k, nil
	}
	return c.Exchange(ctx)
}

// Revoke revokes the current key (if any) and forgets it.
func (c *Client) Revoke(ctx context.Context) error {
	c.mu.Lock()
	k := c.key
	c.key = Key{}
	c.mu.Unlock()
	if k.Key == "" {
		return nil
	}
	return c.do(ctx, http.MethodPost, "/v1/auth/revoke", k.Key, nil, nil, nil)
}

// call sends an authenticated request in the agent's namespace (path is
// relative to /v1/memory/{tenant}/{agent}).
func (c *Client) call(ctx context.Context, method, path string, body any, hdr http.Header, out any) error {
	return c.authed(ctx, method, func(k Key) string { return "/v1/memory/" + k.Tenant + "/" + k.Agent + path }, body, hdr, out)
}

// authed sends an authenticated request to the path path(key) gives. A
// 401 with a key that looked live (revoked, or custody restarted its
// cache) triggers one re-exchange and retry.
func (c *Client) authed(ctx context.Context, method string, path func(Key) string, body any, hdr http.Header, out any) error {
	k, err := c.CurrentKey(ctx)
	if err != nil {
		return err
	}
	err = c.do(ctx, method, path(k), k.Key, body, hdr, out)
	var ce *Error
	if errors.As(err, &ce) && ce.Status == http.StatusUnauthorized {
		if k, err = c.Exchange(ctx); err != nil {
			return err
		}
		return c.do(ctx, method, path(k), k.Key, body, hdr, out)
	}
	return err
}

// longerRequest is the context key of a request's time on top of
// Config.Timeout (a WaitApproval's wait).
type longerRequest struct{}

func (c *Client) do(ctx context.Context, method, path, key string, body any, hdr http.Header, out any) error {
	extra, _ := ctx.Value(longerRequest{}).(time.Duration)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout+extra)
	defer cancel()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case json.RawMessage:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		if err != nil {
			return fmt.Errorf("client: encode request: %w", err)
		}
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.URL+path, rd)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for name, v := range hdr {
		req.Header[name] = v
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("client: read response: %w", err)
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Body: data}
		_ = json.Unmarshal(data, e)
		if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
		return e
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("client: decode response: %w", err)
		}
	}
	return nil
}
