package metering

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentcustody/custody/internal/apierror"
)

// UsageResponse is the body of GET /v1/gateway/usage.
type UsageResponse struct {
	Usage []UsageRow `json:"usage"`
}

// BudgetsResponse is the body of GET /v1/gateway/budgets.
type BudgetsResponse struct {
	Budgets []BudgetState `json:"budgets"`
}

// AdminHandler serves the operator's reads of what the store holds; the
// caller mounts it on the admin listener and authenticates every
// request first:
//
//	GET /v1/gateway/usage?tenant=&agent=&run_id=&jti=&provider=&model=&since=&until=&group_by=
//	    -> 200 UsageResponse: usage summed over the rows matching every
//	       given filter, one row per distinct value of the group_by
//	       fields (comma-separated, from GroupFields; default "tenant");
//	       since and until are UTC days (2006-01-02), inclusive
//	GET /v1/gateway/budgets?scope=&key=&period=
//	    -> 200 BudgetsResponse: each budget's limit, reserved and spent
//
// Errors are JSON bodies from internal/apierror: 400 bad_request (an
// unknown parameter, group_by field or malformed day), 503 unavailable
// (the store did not answer). Usage is written within the meter's flush
// interval (200 ms by default), so a read may lag the last requests.
func AdminHandler(st Store) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/gateway/usage", func(w http.ResponseWriter, r *http.Request) {
		f, err := usageFilter(r)
		if err != nil {
			apierror.Write(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		rows, err := st.Usage(r.Context(), f)
		if err != nil {
			apierror.Unavailable(w, time.Second, "unavailable", "usage store unavailable")
			return
		}
		writeJSON(w, UsageResponse{Usage: nonNil(rows)})
	})
	mux.HandleFunc("GET /v1/gateway/budgets", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if err := onlyParams(q, "scope", "key", "period"); err != nil {
			apierror.Write(w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		bs, err := st.Budgets(r.Context(), BudgetFilter{Scope: q.Get("scope"), Key: q.Get("key"), Period: q.Get("period")})
		if err != nil {
			apierror.Unavailable(w, time.Second, "unavailable", "budget store unavailable")
			return
		}
		writeJSON(w, BudgetsResponse{Budgets: nonNil(bs)})
	})
	return mux
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

var dayShape = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

type badParam string

func (e badParam) Error() string { return string(e) }

func onlyParams(q map[string][]string, names ...string) error {
	for k, v := range q {
		if !slices.Contains(names, k) {
			return badParam("unknown parameter " + k + "; known: " + strings.Join(names, ", "))
		}
		if len(v) > 1 {
			return badParam("parameter " + k + " given twice")
		}
	}
	return nil
}

func usageFilter(r *http.Request) (UsageFilter, error) {
	q := r.URL.Query()
	if err := onlyParams(q, "tenant", "agent", "run_id", "jti", "provider", "model", "since", "until", "group_by"); err != nil {
		return UsageFilter{}, err
	}
	f := UsageFilter{
		Tenant: q.Get("tenant"), Agent: q.Get("agent"), RunID: q.Get("run_id"), JTI: q.Get("jti"),
		Provider: q.Get("provider"), Model: q.Get("model"), Since: q.Get("since"), Until: q.Get("until"),
		GroupBy: []string{"tenant"},
	}
	for _, d := range []string{f.Since, f.Until} {
		if d == "" {
			continue
		}
		if _, err := time.Parse(time.DateOnly, d); err != nil || !dayShape.MatchString(d) {
			return UsageFilter{}, badParam("since and until are UTC days, 2006-01-02")
		}
	}
	if g := q.Get("group_by"); g != "" {
		f.GroupBy = strings.Split(g, ",")
		for _, x := range f.GroupBy {
			if !slices.Contains(GroupFields, x) {
				return UsageFilter{}, badParam("group_by field " + x + " unknown; known: " + strings.Join(GroupFields, ", "))
			}
		}
	}
	return f, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}
