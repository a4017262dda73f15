package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"
)

// stepReader returns its data a few bytes per read, so that events
// are split across reads.
type stepReader struct {
	b []byte
	n int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := min(r.n, len(p), len(r.b))
	copy(p, r.b[:n])
	r.b = r.b[n:]
	return n, nil
}
func (r *stepReader) Close() error { return nil }

// The usage-only chunk is taken out whatever the line endings, the
// "data:" spacing and the read boundaries, and nothing else is: a
// content delta naming "usage" stays.
func TestAttackUsageChunkFilterShapes(t *testing.T) {
	content := `data: {"choices":[{"index":0,"delta":{"content":"{\"usage\":1} \"usage\""}}],"usage":null}`
	usage := `data:{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
	for _, eol := range []string{"\n", "\r\n", "\r"} {
		for _, step := range []int{1, 3, 7, 1 << 20} {
			stream := content + eol + eol + usage + eol + eol + "data: [DONE]" + eol + eol
			var got [][]byte
			rb := &responseBody{
				src: &stepReader{b: []byte(stream), n: step}, res: &http.Response{}, ctx: context.Background(),
				secrets:   [][]byte{[]byte("sk-secret-0123456789")},
				endEvent:  streamErrorEvent(KindOpenAI, "/v1/chat/completions"),
				dropUsage: func(d []byte) { got = append(got, bytes.Clone(d)) },
			}
			out, err := io.ReadAll(rb)
			if err != nil {
				t.Fatal(err)
			}
			want := content + eol + eol + "data: [DONE]" + eol + eol
			if string(out) != want || len(got) != 1 {
				t.Errorf("eol %q step %d: got %q (dropped %d chunks), want %q", eol, step, out, len(got), want)
			}
		}
	}
}
