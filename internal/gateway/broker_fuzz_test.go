package gateway

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzClassifyGitHub: any method, path and query classifies without
// panicking; a git route that is allowed has a git shape; a repository
// is named only as OWNER/NAME; writes are never classified as reads for
// push or a REST method other than GET and HEAD.
func FuzzClassifyGitHub(f *testing.F) {
	for _, s := range [][3]string{
		{"GET", "/octo/hello.git/info/refs", "service=git-upload-pack"},
		{"POST", "/octo/hello/git-receive-pack", ""},
		{"GET", "/repos/octo/hello/issues", "state=open"},
		{"DELETE", "/repos/octo/hello", ""},
		{"GET", "/", ""},
		{"GET", "", "%zz"},
		{"POST", "/a/b/c/d/e", "service=git-receive-pack&service=x"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, method, path, query string) {
		r := classifyGitHub(method, path, query)
		if r.repo != "" && strings.Count(r.repo, "/") < 1 {
			t.Errorf("repo %q is not OWNER/NAME", r.repo)
		}
		if r.validRepo {
			owner, name, _ := strings.Cut(r.repo, "/")
			if !validRepoName(owner, name) {
				t.Errorf("repo %q marked valid", r.repo)
			}
		}
		if r.git && r.allowed {
			if !strings.HasSuffix(path, "/info/refs") && !strings.HasSuffix(path, "/"+gitUploadPack) && !strings.HasSuffix(path, "/"+gitReceivePack) {
				t.Errorf("allowed git route for %q", path)
			}
			if strings.HasSuffix(path, "/"+gitReceivePack) && !r.write {
				t.Errorf("receive-pack %q not a write", path)
			}
		}
		if !r.git && method != http.MethodGet && method != http.MethodHead && !r.write {
			t.Errorf("REST %s %q not a write", method, path)
		}
	})
}

// FuzzParseProviderAuth: an accepted auth has exactly one of a header
// and a basic username, neither holding a control character.
func FuzzParseProviderAuth(f *testing.F) {
	for _, s := range []string{"header:Authorization:Bearer", "header:X-API-Key", "basic:api", "header:Host", "basic:a:b", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseProviderAuth(s)
		if err != nil {
			return
		}
		if (a.Header == "") == (a.BasicUser == "") {
			t.Errorf("ParseProviderAuth(%q) = %+v: want a header or a username", s, a)
		}
		if strings.ContainsAny(a.Header+a.Prefix+a.BasicUser, "\r\n\x00") {
			t.Errorf("ParseProviderAuth(%q) = %+v holds a control character", s, a)
		}
	})
}
