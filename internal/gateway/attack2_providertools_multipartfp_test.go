package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// FINDING (low-medium, false positive once the files or audio endpoints
// are added): the multipart reader takes any part that begins with "{"
// or "[" for JSON or JSON Lines and refuses the whole upload (400 "a
// multipart part is neither JSON nor JSON Lines") when it is neither. Plenty
// of ordinary uploads begin so: a README.md opening with its badges
// ("[![CI](https://...)](...)", the first line of most GitHub READMEs),
// a TOML or INI file ("[project]"), a JavaScript or JSON5 file, and free
// text fields such as the prompt of an audio transcription ("[Speakers:
// Alice, Bob] ..."). OpenAI's Files API takes .md, .txt and code files
// for file_search and code_interpreter (purpose "assistants" or
// "user_data"), and it fetches nothing they name. Only a part the
// provider reads as JSON Lines (a batch, fine-tuning or evals file) needs
// reading; a part that is not JSON should pass as the other non-JSON parts
// do, or be told apart by its field and the form's purpose.
func TestAttackProviderToolsFalsePositiveMultipartBracket(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/files", "POST /v1/audio/transcriptions"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	h := bearer(tok)
	h["Content-Type"] = "multipart/form-data; boundary=x"
	for _, c := range []struct{ path, form string }{
		{"/v1/files", "--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nassistants\r\n" +
			"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"README.md\"\r\nContent-Type: text/markdown\r\n\r\n" +
			"[![CI](https://github.com/acme/widget/actions/workflows/ci.yml/badge.svg)](https://github.com/acme/widget/actions)\n\n# Widget\n\nWidget does things.\n\r\n--x--\r\n"},
		{"/v1/files", "--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nuser_data\r\n" +
			"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"pyproject.txt\"\r\nContent-Type: text/plain\r\n\r\n" +
			"[project]\nname = \"widget\"\nversion = \"1.0\"\n\r\n--x--\r\n"},
		{"/v1/audio/transcriptions", "--x\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-4o-transcribe\r\n" +
			"--x\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\n[Speakers: Alice, Bob] Weekly sync about the Widget launch.\r\n" +
			"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF....WAVEfmt \r\n--x--\r\n"},
	} {
		before := len(e.up["openai"].requests())
		code, _, resp := e.do(t, "POST", "/openai"+c.path, h, c.form)
		if code != http.StatusOK || len(e.up["openai"].requests()) == before {
			t.Errorf("%s %s: = %d %q; want forwarded", c.path, attackShort(c.form), code, strings.TrimSpace(resp))
		}
	}
}
