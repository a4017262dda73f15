package memory_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/apikey"
	"github.com/agentcustody/custody/internal/memory"
)

func TestNewOptions(t *testing.T) {
	store := &refusingStore{t: t}
	tests := []struct {
		name    string
		opts    memory.Options
		wantErr bool
	}{
		{"defaults", memory.Options{Store: store}, false},
		{"no store", memory.Options{}, true},
		{"negative text limit", memory.Options{Store: store, MaxTextBytes: -1}, true},
		{"negative state limit", memory.Options{Store: store, MaxStateBytes: -1}, true},
		{"negative ttl", memory.Options{Store: store, DefaultLeaseTTL: -time.Second}, true},
		{"default over max", memory.Options{Store: store, DefaultLeaseTTL: 2 * time.Hour}, true},
		{"explicit", memory.Options{Store: store, MaxTextBytes: 10, MaxStateBytes: 10, DefaultLeaseTTL: time.Second, MaxLeaseTTL: time.Minute}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := memory.New(tt.opts)
			if (err != nil) != tt.wantErr {
				t.Errorf("New(%+v) = %v, want error %v", tt.opts, err, tt.wantErr)
			}
		})
	}
}

func TestParseIfMatch(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  error
	}{
		{"3", 3, nil},
		{`"3"`, 3, nil},
		{" 0 ", 0, nil},
		{"*", memory.AnyVersion, nil},
		{"", 0, memory.ErrPreconditionRequired},
		{"-1", 0, memory.ErrInvalid},
		{`W/"3"`, 0, memory.ErrInvalid},
		{`"3`, 0, memory.ErrInvalid},
		{"3, 4", 0, memory.ErrInvalid},
		{"99999999999999999999", 0, memory.ErrInvalid},
		{"+3", 0, memory.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := memory.ParseIfMatch(tt.in)
			if !errors.Is(err, tt.err) || (err == nil && got != tt.want) {
				t.Errorf("ParseIfMatch(%q) = %d, %v, want %d, %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func TestParseEpoch(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1", 1, true},
		{" 42", 42, true},
		{"0", 0, false},
		{"", 0, false},
		{"-2", 0, false},
		{`"2"`, 0, false},
		{"1e3", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := memory.ParseEpoch(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseEpoch(%q) = %d, %v, want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
			}
			if err != nil && !errors.Is(err, memory.ErrInvalid) {
				t.Errorf("ParseEpoch(%q) = %v, want ErrInvalid", tt.in, err)
			}
		})
	}
}

func TestHTTPStatusFor(t *testing.T) {
	tests := []struct {
		err    error
		status int
		code   string
	}{
		{memory.ErrNamespaceMismatch, http.StatusForbidden, "namespace_mismatch"},
		{fmt.Errorf("memory: get: %w", memory.ErrNotFound), http.StatusNotFound, "not_found"},
		{&memory.LeaseHeldError{}, http.StatusConflict, "lease_held"},
		{memory.ErrLeaseLost, http.StatusConflict, "lease_lost"},
		{&memory.VersionConflictError{Current: 2}, http.StatusPreconditionFailed, "version_conflict"},
		{&memory.TooLargeError{What: "text", Limit: 1}, http.StatusRequestEntityTooLarge, "too_large"},
		{memory.ErrPreconditionRequired, http.StatusPreconditionRequired, "precondition_required"},
		{memory.ErrInvalid, http.StatusBadRequest, "bad_request"},
		{errors.New("disk on fire"), http.StatusInternalServerError, "internal"},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			if got := memory.HTTPStatusFor(tt.err); got != tt.status {
				t.Errorf("HTTPStatusFor(%v) = %d, want %d", tt.err, got, tt.status)
			}
			if got := memory.ErrorCode(tt.err); got != tt.code {
				t.Errorf("ErrorCode(%v) = %q, want %q", tt.err, got, tt.code)
			}
		})
	}
}

// refusingStore fails the test on any call: the namespace check must come
// before the store.
type refusingStore struct{ t *testing.T }

func (s *refusingStore) fail(op string) error {
	s.t.Errorf("store.%s called for a refused namespace", op)
	return errors.New("must not be called")
}

func (s *refusingStore) RememberMemory(context.Context, memory.Namespace, memory.Memory) (memory.Remembered, error) {
	return memory.Remembered{}, s.fail("RememberMemory")
}

func (s *refusingStore) RecallMemories(context.Context, memory.Namespace, memory.Query) ([]memory.Memory, error) {
	return nil, s.fail("RecallMemories")
}

func (s *refusingStore) ForgetMemory(context.Context, memory.Namespace, string) error {
	return s.fail("ForgetMemory")
}

func (s *refusingStore) GetWorkingState(context.Context, memory.Namespace, string) (memory.State, error) {
	return memory.State{}, s.fail("GetWorkingState")
}

func (s *refusingStore) AcquireStateLease(context.Context, memory.Namespace, string, memory.LeaseRequest) (memory.Grant, error) {
	return memory.Grant{}, s.fail("AcquireStateLease")
}

func (s *refusingStore) PutWorkingState(context.Context, memory.Namespace, string, memory.PutRequest) (memory.State, error) {
	return memory.State{}, s.fail("PutWorkingState")
}

func (s *refusingStore) ReleaseStateLease(context.Context, memory.Namespace, string, apikey.Identity, int64) error {
	return s.fail("ReleaseStateLease")
}

func TestNamespaceCheckedBeforeStore(t *testing.T) {
	svc, err := memory.New(memory.Options{Store: &refusingStore{t: t}, Log: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	caller := apikey.Identity{Tenant: "agents", Agent: "run-2", Session: "pod-2"}
	for _, ns := range []memory.Namespace{
		{Tenant: "agents", Agent: "run-1"},
		{Tenant: "other", Agent: "run-2"},
		{},
	} {
		ops := map[string]func() error{
			"Remember": func() error {
				_, err := svc.Remember(ctx, caller, ns, memory.RememberRequest{Kind: "fact", Text: "x"})
				return err
			},
			"Recall": func() error { _, err := svc.Recall(ctx, caller, ns, memory.Query{}); return err },
			"Forget": func() error { return svc.Forget(ctx, caller, ns, "0000000000000001") },
			"State":  func() error { _, err := svc.State(ctx, caller, ns, "plan"); return err },
			"Lease":  func() error { _, err := svc.Lease(ctx, caller, ns, "plan", 0); return err },
			"PutState": func() error {
				_, err := svc.PutState(ctx, caller, ns, "plan", 1, 0, []byte(`{}`))
				return err
			},
			"Release": func() error { return svc.Release(ctx, caller, ns, "plan", 1) },
		}
		for name, op := range ops {
			t.Run(name+"/"+ns.Tenant+"/"+ns.Agent, func(t *testing.T) {
				if err := op(); !errors.Is(err, memory.ErrNamespaceMismatch) {
					t.Errorf("%s(%+v) = %v, want ErrNamespaceMismatch", name, ns, err)
				}
			})
		}
	}
}
