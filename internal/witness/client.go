package witness

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// maxResponseSize bounds a witness's answer, in bytes.
const maxResponseSize = 64 << 10

// Client asks one witness to cosign checkpoints over C2SP tlog-witness.
// The zero value is not usable: URL and Name are required. It is safe for
// concurrent use.
type Client struct {
	// URL is the witness's submission prefix, e.g. "https://w1.example/"
	// or "http://127.0.0.1:8869"; requests go to URL + "/add-checkpoint".
	URL string
	// Name is the witness's key name. Only cosignature lines by this name
	// are returned; others are ignored, as the spec requires of clients.
	Name string
	// HTTPClient sends the requests. Nil means http.DefaultClient. Set a
	// timeout on it or on the context.
	HTTPClient *http.Client
}

// AddCheckpoint submits signedCheckpoint with the consistency proof from
// oldSize (the size of the latest checkpoint the witness cosigned for this
// log, 0 if none) and returns the witness's cosignature lines, each
// "— <Name> <base64>\n", to append to the signed note. It checks their
// syntax only: verify them with the witness's vkey (note.Open).
//
// Errors: a 409 with the witness's size is a [*ConflictError] (its Size
// above the caller's own tree size means the witness cosigned a tree the
// caller no longer holds); other refusals are a [*ResponseError] wrapping
// the matching sentinel (ErrUnknownLog, ErrBadSignature, ErrMalformed,
// ErrBadProof, ErrFork).
func (c *Client) AddCheckpoint(ctx context.Context, oldSize int64, proof tlog.TreeProof, signedCheckpoint []byte) ([]byte, error) {
	if c.URL == "" || c.Name == "" {
		return nil, errors.New("witness client: URL and Name are required")
	}
	body, err := AddCheckpointRequest{OldSize: oldSize, Proof: proof, Checkpoint: signedCheckpoint}.Marshal()
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", c.Name, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", c.Name, err)
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	hc := c.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness %s: add-checkpoint: %w", c.Name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseSize+1))
	if err != nil {
		return nil, fmt.Errorf("witness %s: read answer: %w", c.Name, err)
	}
	if len(data) > maxResponseSize {
		return nil, fmt.Errorf("witness %s: answer larger than %d bytes", c.Name, maxResponseSize)
	}
	if resp.StatusCode == http.StatusConflict {
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == SizeContentType {
			s, ok := bytes.CutSuffix(data, []byte("\n"))
			n, err := strconv.ParseInt(string(s), 10, 64)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("witness %s: malformed %s answer %q", c.Name, SizeContentType, data)
			}
			return nil, &ConflictError{Size: n}
		}
	}
	if resp.StatusCode != http.StatusOK {
		if len(data) > 1024 {
			data = data[:1024]
		}
		return nil, fmt.Errorf("witness %s: %w", c.Name, &ResponseError{StatusCode: resp.StatusCode, Body: string(data)})
	}
	sigs, err := parseCosignatures(data, c.Name)
	if err != nil {
		return nil, fmt.Errorf("witness %s: %w", c.Name, err)
	}
	return sigs, nil
}

// parseCosignatures checks that data is one or more note signature lines
// and returns those by name.
func parseCosignatures(data []byte, name string) ([]byte, error) {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, errors.New("answer is not note signature lines")
	}
	var out []byte
	for rest := data; len(rest) > 0; {
		line, r, _ := bytes.Cut(rest, []byte("\n"))
		rest = r
		sig, ok := bytes.CutPrefix(line, []byte("— "))
		if !ok {
			return nil, errors.New("answer is not note signature lines")
		}
		n, b64, ok := bytes.Cut(sig, []byte(" "))
		raw, err := base64.StdEncoding.DecodeString(string(b64))
		if !ok || err != nil || len(n) == 0 || len(raw) < 5 {
			return nil, errors.New("malformed note signature line")
		}
		if string(n) == name {
			out = append(append(out, line...), '\n')
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cosignature by %q in answer", name)
	}
	return out, nil
}
