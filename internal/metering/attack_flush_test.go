package metering_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/agentcustody/custody/internal/metering"
)

// slowStore commits slowly and keeps the usage committed.
type slowStore struct {
	mu   sync.Mutex
	used metering.Usage
}

func (s *slowStore) Reserve(context.Context, metering.Reservation) error   { return nil }
func (s *slowStore) Extend(context.Context, string, metering.Usage) error  { return nil }
func (s *slowStore) SettleExpired(context.Context, time.Time) (int, error) { return 0, nil }
func (s *slowStore) Budgets(context.Context, metering.BudgetFilter) ([]metering.BudgetState, error) {
	return nil, nil
}
func (s *slowStore) Usage(context.Context, metering.UsageFilter) ([]metering.UsageRow, error) {
	return nil, nil
}
func (s *slowStore) Commit(_ context.Context, _ []metering.Settlement, usage []metering.UsageDelta) error {
	time.Sleep(100 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range usage {
		s.used = s.used.Add(u.Used)
	}
	return nil
}

// FINDING (low): Flush returned at once, with nothing written, while the
// meter's writer was committing what it had taken: a caller that flushes
// and then reads (an operator's check, every metering test) did not see
// usage settled before its call.
func TestAttackFlushWaitsForWriter(t *testing.T) {
	st := &slowStore{}
	m, err := metering.New(metering.Options{Store: st, FlushInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	tk, err := m.Begin(context.Background(), metering.Attribution{JTI: "j", Provider: "p"}, nil, metering.Usage{})
	if err != nil {
		t.Fatal(err)
	}
	tk.Settle(context.Background(), metering.Usage{Requests: 1, OutputTokens: 5}, "m")
	time.Sleep(20 * time.Millisecond) // the writer has taken it and is committing
	if err := m.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.used.Requests != 1 {
		t.Errorf("after Flush the store holds %+v", st.used)
	}
}

// FINDING (low): Close wrote what was pending and returned at once; a
// request still finishing (a stream the server's shutdown cut a moment
// before) settled after it, into a queue no one wrote: its usage was
// lost. Close now waits (bounded by its ctx) for the open tickets.
func TestAttackSettleAfterCloseLost(t *testing.T) {
	st := &slowStore{}
	m, err := metering.New(metering.Options{Store: st, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tk, err := m.Begin(context.Background(), metering.Attribution{JTI: "j", Provider: "p"}, nil, metering.Usage{})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(50 * time.Millisecond)
		tk.Settle(context.Background(), metering.Usage{Requests: 1, OutputTokens: 5}, "m")
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.Close(ctx); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.used.Requests != 1 {
		t.Errorf("after Close the store holds %+v", st.used)
	}
}

// poisonStore refuses every Commit holding the usage of model "poison"
// (a row no store can write), and keeps what it committed.
type poisonStore struct {
	slowStore
}

func (s *poisonStore) Commit(_ context.Context, _ []metering.Settlement, usage []metering.UsageDelta) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range usage {
		if u.Model == "poison" {
			return errors.New("cannot store that")
		}
	}
	for _, u := range usage {
		s.used = s.used.Add(u.Used)
	}
	return nil
}

// FINDING (medium, hardening): the meter writes every pending settlement
// and usage row in one transaction and puts all of it back when that
// fails: one row the store refuses for good (the NUL model name above,
// an overflow) blocked every later write, so that no usage was written
// again and, past MaxPending, every request was refused. A failed batch
// is now written row by row, so only the row the store refuses stays.
func TestAttackOnePoisonRowBlocksFlush(t *testing.T) {
	st := &poisonStore{}
	m, err := metering.New(metering.Options{Store: st, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close(context.Background())
	for i, model := range []string{"poison", "a", "b", "c"} {
		tk, err := m.Begin(context.Background(), metering.Attribution{JTI: "j", Provider: "p"}, nil, metering.Usage{})
		if err != nil {
			t.Fatal(err)
		}
		tk.Settle(context.Background(), metering.Usage{Requests: 1, OutputTokens: int64(i)}, model)
	}
	m.Flush(context.Background()) // fails: the poison row stays
	m.Flush(context.Background())
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.used.Requests != 3 {
		t.Errorf("store holds %+v, want the 3 rows that can be written", st.used)
	}
}
