package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"
	"unicode/utf8"
)

// Memory is one remembered item.
type Memory struct {
	ID           string    `json:"id"`
	Kind         string    `json:"kind"`
	Key          string    `json:"key,omitempty"`
	Text         string    `json:"text"`
	Tags         []string  `json:"tags,omitempty"`
	Session      string    `json:"session"`
	CreatedAt    time.Time `json:"created_at"`
	SupersededBy string    `json:"superseded_by,omitempty"`
	SupersededAt time.Time `json:"superseded_at,omitzero"`
}

// Remembered is the outcome of Remember. Status is "created",
// "unchanged" (the same memory was already stored) or "superseded" (a
// keyed memory replaced its old value; Supersedes is the old ID).
type Remembered struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	Memory     Memory `json:"memory"`
	Supersedes string `json:"supersedes,omitempty"`
}

// Remember stores text of kind (e.g. "preference", "fact") under an
// optional key (a keyed memory supersedes its previous value).
func (c *Client) Remember(ctx context.Context, kind, key, text string, tags ...string) (Remembered, error) {
	var out Remembered
	// encoding/json would send invalid UTF-8 as U+FFFD: a changed memory.
	for _, s := range append([]string{kind, key, text}, tags...) {
		if !utf8.ValidString(s) {
			return out, errors.New("client: remember: kind, key, text and tags must be valid UTF-8")
		}
	}
	body := map[string]any{"kind": kind, "text": text}
	if key != "" {
		body["key"] = key
	}
	if len(tags) > 0 {
		body["tags"] = tags
	}
	err := c.call(ctx, http.MethodPost, "/memories", body, nil, &out)
	return out, err
}

// RecallOptions narrow Recall. Zero values mean no filter, limit 10, and
// active memories only.
type RecallOptions struct {
	Kind    string
	Limit   int
	History bool
}

// Recall searches memories by keywords (empty q lists the newest).
func (c *Client) Recall(ctx context.Context, q string, opts RecallOptions) ([]Memory, error) {
	v := url.Values{}
	if q != "" {
		v.Set("q", q)
	}
	if opts.Kind != "" {
		v.Set("kind", opts.Kind)
	}
	if opts.Limit > 0 {
		v.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.History {
		v.Set("history", "true")
	}
	var out struct {
		Memories []Memory `json:"memories"`
	}
	path := "/memories"
	if len(v) > 0 {
		path += "?" + v.Encode()
	}
	err := c.call(ctx, http.MethodGet, path, nil, nil, &out)
	return out.Memories, err
}

// Forget deletes a memory by ID.
func (c *Client) Forget(ctx context.Context, id string) error {
	return c.call(ctx, http.MethodDelete, "/memories/"+url.PathEscape(id), nil, nil, nil)
}

// Lease is a working-state lease: Epoch fences writes.
type Lease struct {
	Name      string          `json:"name"`
	Epoch     int64           `json:"epoch"`
	ExpiresAt time.Time       `json:"expires_at"`
	Version   int64           `json:"version"`
	State     json.RawMessage `json:"state"`
}

// State is a working-state slot.
type State struct {
	Name      string          `json:"name"`
	Version   int64           `json:"version"`
	State     json.RawMessage `json:"state"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
	UpdatedBy string          `json:"updated_by,omitempty"`
	Lease     *struct {
		Epoch     int64     `json:"epoch"`
		Holder    string    `json:"holder"`
		ExpiresAt time.Time `json:"expires_at"`
	} `json:"lease,omitempty"`
}

// GetState reads a working-state slot.
func (c *Client) GetState(ctx context.Context, name string) (State, error) {
	var out State
	err := c.call(ctx, http.MethodGet, "/state/"+url.PathEscape(name), nil, nil, &out)
	return out, err
}

// AcquireLease takes (or renews) the lease on a slot; ttl 0 uses the
// server default, any other is rounded up to whole seconds (the server's
// ttl_seconds: a ttl under a second asks for 1 s, not the default), and a
// negative ttl is an error. It returns the slot's current state to resume
// from.
func (c *Client) AcquireLease(ctx context.Context, name string, ttl time.Duration) (Lease, error) {
	if ttl < 0 {
		return Lease{}, fmt.Errorf("client: negative lease ttl %v", ttl)
	}
	var body any
	if ttl > 0 {
		secs := int64(ttl / time.Second)
		if ttl%time.Second != 0 {
			secs++
		}
		body = map[string]int64{"ttl_seconds": secs}
	}
	var out Lease
	err := c.call(ctx, http.MethodPost, "/state/"+url.PathEscape(name)+"/lease", body, nil, &out)
	return out, err
}

// PutState writes value under the lease epoch if the slot is still at
// version (0: does not exist yet).
func (c *Client) PutState(ctx context.Context, name string, epoch, version int64, value json.RawMessage) (State, error) {
	hdr := http.Header{}
	hdr.Set("Lease-Epoch", strconv.FormatInt(epoch, 10))
	hdr.Set("If-Match", strconv.FormatInt(version, 10))
	var out State
	err := c.call(ctx, http.MethodPut, "/state/"+url.PathEscape(name), value, hdr, &out)
	return out, err
}

// ReleaseLease gives up the lease held with epoch.
func (c *Client) ReleaseLease(ctx context.Context, name string, epoch int64) error {
	hdr := http.Header{}
	hdr.Set("Lease-Epoch", strconv.FormatInt(epoch, 10))
	return c.call(ctx, http.MethodDelete, "/state/"+url.PathEscape(name)+"/lease", nil, hdr, nil)
}
