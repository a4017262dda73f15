package runlease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MintRequest is what the runner asks the admin API for.
type MintRequest struct {
	// Providers the token is valid for, e.g. ["anthropic"].
	Providers []string `json:"providers"`
	// TTLSeconds is the token's lifetime in whole seconds.
	TTLSeconds int64 `json:"ttl_seconds"`
	// RunID, Tenant and Agent are recorded with the token (and in the
	// gateway's logs); they grant nothing.
	RunID  string `json:"run_id,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	Agent  string `json:"agent,omitempty"`
	// Repos are, for a github provider, the repositories the token may
	// use.
	Repos []RepoGrant `json:"repos,omitempty"`
}

// Token is a minted gateway token. Token is the secret: it goes into the
// process's environment and nowhere else. String, GoString and LogValue
// leave it out, so printing or logging a Token shows only its jti.
type Token struct {
	Token     string    `json:"token"`
	JTI       string    `json:"jti"`
	ExpiresAt time.Time `json:"expires_at"`
	Providers []string  `json:"providers"`
}

// String describes t without the secret.
func (t Token) String() string {
	return fmt.Sprintf("gateway token jti=%s expires_at=%s providers=%v", t.JTI, t.ExpiresAt.UTC().Format(time.RFC3339), t.Providers)
}

// GoString is String, so %#v does not print the secret either.
func (t Token) GoString() string { return t.String() }

// LogValue logs t without the secret.
func (t Token) LogValue() slog.Value {
	return slog.GroupValue(slog.String("jti", t.JTI), slog.Time("expires_at", t.ExpiresAt), slog.Any("providers", t.Providers))
}

// Minter mints gateway tokens.
type Minter interface {
	// Mint returns a fresh token. It never returns a token together with
	// an error.
	Mint(ctx context.Context, req MintRequest) (Token, error)
}

// Revoker revokes gateway tokens.
type Revoker interface {
	// Revoke revokes the token with this jti. It returns nil only once
	// the admin API has confirmed the revocation; an unknown jti is an
	// error.
	Revoke(ctx context.Context, jti string) error
}

// Admin is the gateway's admin API as the runner uses it.
type Admin interface {
	Minter
	Revoker
}

// AdminOptions configure an [AdminClient].
type AdminOptions struct {
	// URL is the base URL of the gateway's admin listener, e.g.
	// "http://127.0.0.1:8867". Required.
	URL string
	// Token is the admin bearer token; never logged. Empty sends none
	// (HTTPClient then presents a client certificate the admin listener
	// accepts).
	Token string
	// HTTPClient sends the requests. Default: a client with a 30 s
	// timeout per request.
	HTTPClient *http.Client
	// RevokeAttempts is how many times Revoke tries before it gives up on
	// a network error or a 5xx answer (4xx answers are not retried). The
	// default, 0, keeps trying until Revoke's context is done (the
	// runner's --revoke-timeout), so a gateway that restarts during the
	// window still gets the revocation.
	RevokeAttempts int
	// RevokeBackoff is the wait before the second attempt; it doubles
	// for each further one, up to 2 s. Default 200 ms.
	RevokeBackoff time.Duration
}

// AdminClient calls the gateway's admin API over HTTP:
//
//	POST {URL}/v1/gateway/tokens               -> 201 {"token","jti","expires_at","providers"}
//	POST {URL}/v1/gateway/tokens/{jti}/revoke  -> 204
//
// It is safe for concurrent use.
type AdminClient struct {
	base     string // without a trailing slash
	token    string
	hc       *http.Client
	attempts int
	backoff  time.Duration
}

var _ Admin = (*AdminClient)(nil)

// NewAdminClient validates opts and returns an AdminClient.
func NewAdminClient(opts AdminOptions) (*AdminClient, error) {
	if opts.URL == "" {
		return nil, errors.New("runlease: admin URL is required")
	}
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("runlease: admin URL %q is not an http(s) URL", opts.URL)
	}
	if opts.RevokeAttempts < 0 {
		return nil, fmt.Errorf("runlease: negative RevokeAttempts %d", opts.RevokeAttempts)
	}
	if opts.RevokeAttempts == 0 {
		opts.RevokeAttempts = math.MaxInt
	}
	if opts.RevokeBackoff < 0 {
		return nil, fmt.Errorf("runlease: negative RevokeBackoff %v", opts.RevokeBackoff)
	}
	if opts.RevokeBackoff == 0 {
		opts.RevokeBackoff = 200 * time.Millisecond
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	u.RawQuery, u.Fragment = "", ""
	return &AdminClient{base: strings.TrimRight(u.String(), "/"), token: opts.Token, hc: opts.HTTPClient, attempts: opts.RevokeAttempts, backoff: opts.RevokeBackoff}, nil
}

// StatusError is an unexpected answer from the admin API. Code and
// Message come from its JSON error body when it has one.
type StatusError struct {
	Op         string // "mint" or "revoke"
	StatusCode int
	Code       string
	Message    string
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("admin API %s: HTTP %d", e.Op, e.StatusCode)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// temporary reports whether retrying may help.
func (e *StatusError) temporary() bool { return e.StatusCode >= 500 }

// Mint asks for a token; anything but 201 with a token and a jti is an
// error.
func (c *AdminClient) Mint(ctx context.Context, req MintRequest) (Token, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Token{}, err
	}
	resp, err := c.post(ctx, "/v1/gateway/tokens", body)
	if err != nil {
		return Token{}, fmt.Errorf("admin API mint: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return Token{}, statusError("mint", resp)
	}
	var t Token
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil {
		// The body may hold a token we cannot read: say so, do not echo it.
		return Token{}, fmt.Errorf("admin API mint: unreadable 201 response: %w", errors.New(jsonErrorKind(err)))
	}
	if t.Token == "" || t.JTI == "" {
		return Token{}, errors.New("admin API mint: 201 response lacks token or jti (a token without a jti could not be revoked)")
	}
	return t, nil
}

// Revoke revokes jti, retrying network errors and 5xx answers.
func (c *AdminClient) Revoke(ctx context.Context, jti string) error {
	if jti == "" {
		return errors.New("admin API revoke: empty jti")
	}
	wait := c.backoff
	var err error
	for attempt := 1; ; attempt++ {
		err = c.revokeOnce(ctx, jti)
		var se *StatusError
		if err == nil || (errors.As(err, &se) && !se.temporary()) || attempt >= c.attempts || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up after %d attempts: %w)", err, attempt, ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 2*time.Second)
	}
}

func (c *AdminClient) revokeOnce(ctx context.Context, jti string) error {
	resp, err := c.post(ctx, "/v1/gateway/tokens/"+url.PathEscape(jti)+"/revoke", nil)
	if err != nil {
		return fmt.Errorf("admin API revoke: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return statusError("revoke", resp)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return nil
}

func (c *AdminClient) post(ctx context.Context, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	return c.hc.Do(req)
}

// statusError reads a {"error","message"} body if there is one. Only
// these two fields are kept, each cut to 200 bytes.
func statusError(op string, resp *http.Response) error {
	se := &StatusError{Op: op, StatusCode: resp.StatusCode}
	var b struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&b) == nil {
		se.Code, se.Message = clip(b.Error), clip(b.Message)
	}
	return se
}

func clip(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// jsonErrorKind names a decoding failure without quoting the input.
func jsonErrorKind(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at offset %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated body"
	default:
		return "malformed body"
	}
}
