package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
)

// Repository access levels of a [RepoGrant].
const (
	// AccessRead admits git fetch and clone (git-upload-pack) and REST
	// GET and HEAD.
	AccessRead = "read"
	// AccessWrite admits everything AccessRead does, git push
	// (git-receive-pack) and REST POST, PUT, PATCH and DELETE.
	AccessWrite = "write"
)

// MaxRepos is the most repositories one token may be granted.
const MaxRepos = 64

// RepoGrant is one repository a token may use through a provider of
// [KindGitHub], as the "repos" claim holds it, e.g.
//
//	{"repo":"octo/hello","access":"read"}
type RepoGrant struct {
	// Repo is "OWNER/NAME" (compared ignoring letter case, as GitHub
	// does): OWNER 1 to 39 of [A-Za-z0-9-] not starting with "-", NAME 1
	// to 100 of [A-Za-z0-9._-], not "." or "..", not ending in ".git".
	Repo string `json:"repo"`
	// Access is [AccessRead] or [AccessWrite]; write implies read.
	Access string `json:"access"`
}

var (
	githubOwner = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}$`)
	githubRepo  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,100}$`)
)

// validRepoName reports whether owner and name are shaped like a GitHub
// repository's (see [RepoGrant.Repo]).
func validRepoName(owner, name string) bool {
	return githubOwner.MatchString(owner) && githubRepo.MatchString(name) &&
		name != "." && name != ".." && !strings.HasSuffix(strings.ToLower(name), ".git")
}

// CheckRepoGrants returns why grants are not a valid repos claim: at most
// [MaxRepos], each an "OWNER/NAME" repository (see [RepoGrant]) with
// access read or write, no repository twice (ignoring letter case); nil if
// they are.
func CheckRepoGrants(grants []RepoGrant) error {
	if len(grants) > MaxRepos {
		return fmt.Errorf("at most %d repos", MaxRepos)
	}
	seen := make(map[string]bool, len(grants))
	for _, g := range grants {
		owner, name, ok := strings.Cut(g.Repo, "/")
		if !ok || !validRepoName(owner, name) {
			return fmt.Errorf("repo %q: want OWNER/NAME as GitHub names repositories", shownRepoText(g.Repo))
		}
		if g.Access != AccessRead && g.Access != AccessWrite {
			return fmt.Errorf("repo %s: access must be %q or %q", g.Repo, AccessRead, AccessWrite)
		}
		k := strings.ToLower(g.Repo)
		if seen[k] {
			return fmt.Errorf("repo %s is granted twice", g.Repo)
		}
		seen[k] = true
	}
	return nil
}

// shownRepoText bounds an invalid repository name for an admin-plane
// error message.
func shownRepoText(s string) string {
	if len(s) > 160 {
		s = s[:160]
	}
	return s
}

// repoAccess is the access grants give to repo ("OWNER/NAME"), compared
// ignoring letter case: read, write, or neither.
func repoAccess(grants []RepoGrant, repo string) (read, write bool) {
	for _, g := range grants {
		if strings.EqualFold(g.Repo, repo) {
			return true, g.Access == AccessWrite
		}
	}
	return false, false
}

// sameRepos reports whether a and b grant the same access to the same
// repositories, ignoring order and the letter case of names.
func sameRepos(a, b []RepoGrant) bool {
	m := func(gs []RepoGrant) map[string]string {
		out := make(map[string]string, len(gs))
		for _, g := range gs {
			out[strings.ToLower(g.Repo)] = g.Access
		}
		return out
	}
	ma, mb := m(a), m(b)
	if len(ma) != len(mb) || len(ma) != len(a) || len(mb) != len(b) {
		return false
	}
	for k, v := range ma {
		if w, ok := mb[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Git smart HTTP services (the "service" query parameter of info/refs and
// the last path segment of the RPC).
const (
	gitUploadPack  = "git-upload-pack"
	gitReceivePack = "git-receive-pack"
)

// githubRoute is what a request to a provider of [KindGitHub] is, from
// its method and path alone.
type githubRoute struct {
	// git: a git smart HTTP request, sent to the git upstream.
	git bool
	// allowed: for git, the method and service fit the endpoint (REST
	// requests are checked against the provider's path rules).
	allowed bool
	// repo is "OWNER/NAME" as the path names it (".git" removed), or ""
	// if the path names no repository.
	repo string
	// validRepo: repo is shaped like a GitHub repository's name.
	validRepo bool
	// write: the request needs write access (push, or a REST method
	// other than GET and HEAD).
	write bool
	// class is the path class a refusal names: "git", the REST
	// endpoint's segment after /repos/OWNER/NAME ("issues", "pulls"),
	// "repos" for the repository itself, or [pathClass] of the path.
	class string
}

// classifyGitHub classifies a request to a provider of [KindGitHub] by
// method, path (after /{provider}, decoded, dot segments resolved) and raw
// query:
//
//	/OWNER/NAME[.git]/info/refs?service=git-upload-pack    git, read  (GET, HEAD)
//	/OWNER/NAME[.git]/info/refs?service=git-receive-pack   git, write (GET, HEAD)
//	/OWNER/NAME[.git]/git-upload-pack                      git, read  (POST)
//	/OWNER/NAME[.git]/git-receive-pack                     git, write (POST)
//	/repos/OWNER/NAME[/...]                                REST, read for GET and HEAD, else write
//	anything else                                          REST, no repository
//
// An OWNER of "repos" is always REST (GitHub reserves the name). A git
// path with a method or service other than listed is not allowed (the
// dumb HTTP protocol, info/refs without a service, is never served).
func classifyGitHub(method, rest, rawQuery string) githubRoute {
	segs := strings.Split(strings.TrimPrefix(rest, "/"), "/")
	if len(segs) >= 3 && segs[0] != "repos" {
		name, _ := strings.CutSuffix(segs[1], ".git")
		r := githubRoute{git: true, class: "git", repo: segs[0] + "/" + name, validRepo: validRepoName(segs[0], name)}
		switch {
		case len(segs) == 4 && segs[2] == "info" && segs[3] == "refs":
			q, err := url.ParseQuery(rawQuery)
			svc := q["service"]
			r.allowed = err == nil && len(svc) == 1 && (svc[0] == gitUploadPack || svc[0] == gitReceivePack) &&
				(method == http.MethodGet || method == http.MethodHead)
			r.write = len(svc) == 1 && svc[0] == gitReceivePack
			return r
		case len(segs) == 3 && (segs[2] == gitUploadPack || segs[2] == gitReceivePack):
			r.allowed = method == http.MethodPost
			r.write = segs[2] == gitReceivePack
			return r
		}
	}
	r := githubRoute{class: pathClass(rest), write: method != http.MethodGet && method != http.MethodHead}
	if len(segs) >= 3 && segs[0] == "repos" {
		r.repo, r.validRepo = segs[1]+"/"+segs[2], validRepoName(segs[1], segs[2])
		r.class = "repos"
		if len(segs) > 3 {
			r.class = pathClass("/" + segs[3])
		}
	}
	return r
}

// shownRepo is a repository name safe to echo in a one-line refusal.
func shownRepo(r githubRoute) string {
	if r.repo == "" {
		return "(none)"
	}
	if !r.validRepo {
		return "(invalid name)"
	}
	return r.repo
}

// checkGitHub applies a [KindGitHub] provider's checks to a request, in
// this order: the endpoint (git by method and service, REST by the
// provider's path rules), then the token's repos: the path must name a
// repository the token holds, with write access if the request writes.
// It returns the route (git or REST) or the refusal: [ErrPathNotAllowed],
// [ErrRepoScope] or [ErrRepoWriteScope].
func (p *provider) checkGitHub(c *Claims, method, rest, rawQuery string) (githubRoute, error) {
	r := classifyGitHub(method, rest, rawQuery)
	if (r.git && !r.allowed) || (!r.git && !p.allowsPath(method, rest)) {
		return r, fmt.Errorf("%w %s: %s", ErrPathNotAllowed, p.name, r.class)
	}
	if !r.validRepo {
		return r, fmt.Errorf("%w %s", ErrRepoScope, shownRepo(r))
	}
	read, write := repoAccess(c.Repos, r.repo)
	switch {
	case !read:
		return r, fmt.Errorf("%w %s", ErrRepoScope, shownRepo(r))
	case r.write && !write:
		return r, fmt.Errorf("%w %s", ErrRepoWriteScope, shownRepo(r))
	}
	return r, nil
}

// githubAllowPaths are the REST endpoints a [KindGitHub] provider admits
// by default, all under one repository (the token's repos decide which):
// reading anything under it, and writing issues, pull requests, comments,
// reviews, labels, file contents, git objects and refs, commit statuses
// and check runs. Not admitted: deleting or changing the repository
// itself, its collaborators, hooks, deploy keys, secrets, branch
// protection, forks, dispatches and releases; and every path outside
// /repos/OWNER/NAME (/user, /orgs, /search, /graphql, ...), which a
// repository-scoped token could not be checked against.
var githubAllowPaths = []string{
	"GET /repos/*/*", "HEAD /repos/*/*",
	"GET /repos/*/*/**", "HEAD /repos/*/*/**",
	"POST /repos/*/*/issues",
	"PATCH /repos/*/*/issues/*",
	"POST /repos/*/*/issues/*/comments",
	"PATCH /repos/*/*/issues/comments/*",
	"DELETE /repos/*/*/issues/comments/*",
	"POST /repos/*/*/issues/*/labels",
	"PUT /repos/*/*/issues/*/labels",
	"DELETE /repos/*/*/issues/*/labels/*",
	"POST /repos/*/*/issues/*/assignees",
	"POST /repos/*/*/pulls",
	"PATCH /repos/*/*/pulls/*",
	"PUT /repos/*/*/pulls/*/merge",
	"POST /repos/*/*/pulls/*/comments",
	"POST /repos/*/*/pulls/*/comments/*/replies",
	"PATCH /repos/*/*/pulls/comments/*",
	"POST /repos/*/*/pulls/*/reviews",
	"POST /repos/*/*/pulls/*/reviews/*/events",
	"POST /repos/*/*/pulls/*/requested_reviewers",
	"PUT /repos/*/*/contents/**",
	"DELETE /repos/*/*/contents/**",
	"POST /repos/*/*/git/blobs",
	"POST /repos/*/*/git/trees",
	"POST /repos/*/*/git/commits",
	"POST /repos/*/*/git/tags",
	"POST /repos/*/*/git/refs",
	"PATCH /repos/*/*/git/refs/**",
	"DELETE /repos/*/*/git/refs/**",
	"POST /repos/*/*/statuses/*",
	"POST /repos/*/*/check-runs",
	"PATCH /repos/*/*/check-runs/*",
}

// checkRepoGrant checks a grant's repos (see [CheckRepoGrants]): valid,
// and only with a provider of [KindGitHub] among its providers. The error
// wraps [ErrBadGrant].
func (g *Gateway) checkRepoGrant(grant Grant) error {
	if len(grant.Repos) == 0 {
		return nil
	}
	if err := CheckRepoGrants(grant.Repos); err != nil {
		return fmt.Errorf("%w: %v", ErrBadGrant, err)
	}
	for _, name := range grant.Providers {
		if p := g.providers[name]; p != nil && p.kind == KindGitHub {
			return nil
		}
	}
	return fmt.Errorf("%w: repos need a provider of kind github", ErrBadGrant)
}
