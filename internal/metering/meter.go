package metering

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentcustody/custody/internal/tooluse"
)

// ErrUnavailable: a budget could not be checked (the store did not
// answer, or usage waiting to be written is over Options.MaxPending); the
// request is refused, fail closed.
var ErrUnavailable = errors.New("budget cannot be checked now")

// Options configure a [Meter]. The zero value of each field means its
// default.
type Options struct {
	// Store keeps budgets, reservations and usage. Required.
	Store Store
	// Policy is the operator's budgets (see [Policy]).
	Policy Policy
	// DefaultOutputReserve is the output, in tokens, reserved for a
	// request that declares no maximum while an output limit applies
	// (the gateway also sets it as the request's maximum, see
	// [SetMaxOutput]). Default 4096.
	DefaultOutputReserve int64
	// FlushInterval is how often settlements and usage are written to the
	// store, in one transaction. Default 200 ms. What was not written is
	// lost if the process dies (usage of requests without a budget; a
	// budgeted request's reservation is then settled at its amount when
	// it expires).
	FlushInterval time.Duration
	// ReservationTTL bounds how long a reservation holds its budgets when
	// its replica dies before settling it; it is then settled at its
	// amount. It must outlast the longest request. Default 1 h.
	ReservationTTL time.Duration
	// MaxPending bounds the settlements and usage rows waiting to be
	// written; past it new requests are refused with [ErrUnavailable].
	// Default 100000.
	MaxPending int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Log receives refusals (Info, naming the budget) and store failures
	// (Warn). Default slog.Default().
	Log *slog.Logger
	// Metrics, if set, receives the meter's counters (see [Metrics]).
	Metrics *Metrics
}

// Meter meters requests and holds them to budgets. It is safe for
// concurrent use; [Meter.Close] writes what is pending.
type Meter struct {
	store   Store
	policy  Policy
	reserve int64
	flush   time.Duration
	ttl     time.Duration
	maxPend int
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics

	// flushing is held by a Flush for its whole write, so that a Flush
	// returns only after what was pending at its call (taken by another
	// Flush or not) is written or put back.
	flushing sync.Mutex

	mu      sync.Mutex
	settles []Settlement
	usage   map[Attribution]Usage

	dayCache atomic.Pointer[dayString]

	// open counts the tickets not yet settled; Close waits for them.
	open sync.WaitGroup

	kick      chan struct{}
	stop      context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// New validates opts and starts the meter's writer.
func New(opts Options) (*Meter, error) {
	if opts.Store == nil {
		return nil, errors.New("metering: Store is required")
	}
	if err := opts.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("metering: %w", err)
	}
	if opts.DefaultOutputReserve < 0 || opts.FlushInterval < 0 || opts.ReservationTTL < 0 || opts.MaxPending < 0 {
		return nil, errors.New("metering: negative option")
	}
	if opts.DefaultOutputReserve == 0 {
		opts.DefaultOutputReserve = 4096
	}
	if opts.FlushInterval == 0 {
		opts.FlushInterval = 200 * time.Millisecond
	}
	if opts.ReservationTTL == 0 {
		opts.ReservationTTL = time.Hour
	}
	if opts.MaxPending == 0 {
		opts.MaxPending = 100000
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	ctx, stop := context.WithCancel(context.Background())
	m := &Meter{
		store: opts.Store, policy: opts.Policy, reserve: opts.DefaultOutputReserve,
		flush: opts.FlushInterval, ttl: opts.ReservationTTL, maxPend: opts.MaxPending,
		now: opts.Now, log: opts.Log.With("service", "metering"), metrics: opts.Metrics,
		usage: make(map[Attribution]Usage),
		kick:  make(chan struct{}, 1),
		stop:  stop, done: make(chan struct{}),
	}
	go m.run(ctx)
	return m, nil
}

// DefaultOutputReserve is Options.DefaultOutputReserve as in force.
func (m *Meter) DefaultOutputReserve() int64 { return m.reserve }

// Budgets are the budgets a request of a token with claims c must fit in
// now (see [Policy.Budgets]).
func (m *Meter) Budgets(c Claims) []Budget { return m.policy.Budgets(c, m.now()) }

// Begin starts metering one request that is about to be forwarded, to be
// counted under att (its Day is set here). With budgets, est (at least one
// request) is reserved on all of them at once, or the request is refused:
// an [*ExceededError] (wrapping [ErrBudgetExceeded]) if it does not fit,
// [ErrUnavailable] if the store cannot tell. Without budgets nothing is
// written now. Exactly one [Ticket.Settle] must follow.
func (m *Meter) Begin(ctx context.Context, att Attribution, budgets []Budget, est Usage) (*Ticket, error) {
	now := m.now()
	att = att.clean()
	att.Day = m.day(now)
	est.Requests = max(est.Requests, 1)
	est = bounded(est, budgets)
	if m.pending() >= m.maxPend {
		m.metrics.refused("unavailable")
		return nil, ErrUnavailable
	}
	t := &Ticket{m: m, att: att, amount: est}
	if len(budgets) == 0 {
		m.open.Add(1)
		return t, nil
	}
	t.id = newID()
	t.budgeted = true
	err := m.store.Reserve(ctx, Reservation{
		ID: t.id, Budgets: budgets, Amount: est, Attribution: att,
		CreatedAt: now, ExpiresAt: now.Add(m.ttl),
	})
	var ee *ExceededError
	switch {
	case err == nil:
		m.open.Add(1)
		return t, nil
	case errors.As(err, &ee):
		m.metrics.refused(ee.Budget.Scope)
		m.log.InfoContext(ctx, "gateway request refused", "reason", ee.Detail(), "jti", att.JTI, "provider", att.Provider)
		return nil, ee
	default:
		m.metrics.refused("unavailable")
		m.log.WarnContext(ctx, "budget reservation failed", "jti", att.JTI, "error", err)
		return nil, ErrUnavailable
	}
}

// bounded is est with each counter at most MaxReported where no budget
// limits it, and at most one more than the smallest limit where one does
// (a reservation that still does not fit): a declared maximum of 2^62
// tokens is not added to a budget's counters (nor charged when the
// request is cut), where it would overflow them.
func bounded(est Usage, budgets []Budget) Usage {
	c := func(v int64, limit func(Budget) int64) int64 {
		least := int64(0)
		for _, b := range budgets {
			if l := limit(b); l > 0 && (least == 0 || l < least) {
				least = l
			}
		}
		switch {
		case least == 0:
			return min(v, MaxReported)
		case least < math.MaxInt64:
			return min(v, least+1)
		}
		return v
	}
	return Usage{
		Requests:     c(est.Requests, func(b Budget) int64 { return b.Limit.Requests }),
		InputTokens:  c(est.InputTokens, func(b Budget) int64 { return b.Limit.InputTokens }),
		OutputTokens: c(est.OutputTokens, func(b Budget) int64 { return b.Limit.OutputTokens }),
	}
}

// Ticket is one metered request. Observe and Settle are called from the
// goroutine that passes the response on.
type Ticket struct {
	m        *Meter
	id       string // the reservation, "" without budgets
	budgeted bool
	att      Attribution
	amount   Usage // reserved (or estimated, without budgets)
	once     sync.Once
}

// Budgeted reports whether the request holds a reservation.
func (t *Ticket) Budgeted() bool { return t.budgeted }

// extendChunk is the least a reservation is extended by, so that a
// stream crossing its reservation does not write on every event.
const extendChunk = 1024

// Observe is told the usage the response has reported so far. When it is
// over what is reserved, the reservation is extended (by at least
// [extendChunk] tokens); if that does not fit, the error wraps
// [ErrBudgetExceeded] and the response must be cut. [ErrUnavailable]:
// the store did not answer (cut too, fail closed).
func (t *Ticket) Observe(ctx context.Context, soFar Usage) error {
	if !t.budgeted {
		return nil
	}
	var more Usage
	if d := soFar.InputTokens - t.amount.InputTokens; d > 0 {
		more.InputTokens = max(d, extendChunk)
	}
	if d := soFar.OutputTokens - t.amount.OutputTokens; d > 0 {
		more.OutputTokens = max(d, extendChunk)
	}
	if more.IsZero() {
		return nil
	}
	err := t.m.store.Extend(ctx, t.id, more)
	var ee *ExceededError
	switch {
	case err == nil:
		t.amount = t.amount.Add(more)
		return nil
	case errors.As(err, &ee):
		t.m.metrics.refused(ee.Budget.Scope)
		t.m.log.InfoContext(ctx, "gateway response cut", "reason", ee.Detail(), "jti", t.att.JTI, "provider", t.att.Provider)
		return ee
	default:
		t.m.log.WarnContext(ctx, "budget extension failed", "jti", t.att.JTI, "error", err)
		return ErrUnavailable
	}
}

// Settle counts the request as actual, with the model the response
// named (or the request, or ""). A budgeted request is settled in the
// store at once (ctx bounds it), so that the next request of the same
// budget sees its spend and not its reservation; if that write fails it
// is queued like the usage of a request without budgets, which the
// meter's writer writes within Options.FlushInterval. Only the first
// call counts.
func (t *Ticket) Settle(ctx context.Context, actual Usage, model string) {
	t.once.Do(func() {
		defer t.m.open.Done()
		att := t.att
		att.Model = cleanText(model)
		t.m.metrics.used(att.Provider, actual)
		if t.budgeted {
			s := Settlement{ID: t.id, Actual: actual, Attribution: att}
			err := t.m.store.Commit(ctx, []Settlement{s}, nil)
			if err == nil {
				return
			}
			t.m.log.WarnContext(ctx, "settling a reservation failed; retrying", "jti", att.JTI, "error", err)
			t.m.mu.Lock()
			t.m.settles = append(t.m.settles, s)
			t.m.mu.Unlock()
			return
		}
		t.m.mu.Lock()
		t.m.usage[att] = t.m.usage[att].Add(actual)
		t.m.mu.Unlock()
	})
}

// Reserved is what the ticket holds: est at Begin plus extensions.
func (t *Ticket) Reserved() Usage { return t.amount }

// Charge is what a request is counted as, from what was reserved for it
// and the response the client got: a response other than 2xx counts one
// request and whatever usage it reported (the provider bills no
// generation it refused); a 2xx that reported usage and reached its end
// counts that usage; any other (cut, aborted, a stream without usage, a
// background response still running) counts, counter by counter, the
// larger of the reservation and what was reported, since the provider
// may bill what it generated.
//
// A reported count that is negative makes the report unreadable (as if
// none came): a provider's nonsense must neither refund a budget nor
// break the store's writes.
func Charge(reserved Usage, status int, f tooluse.Format, res tooluse.Result) Usage {
	if u := res.Usage; u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadTokens < 0 || u.CacheWriteTokens < 0 {
		res.HasUsage = false
	}
	used := FromResult(f, res)
	used.Requests = 1
	switch {
	case status < 200 || status > 299:
		return used
	case res.HasUsage && res.Complete:
		return used
	}
	return Usage{1, max(reserved.InputTokens, used.InputTokens), max(reserved.OutputTokens, used.OutputTokens)}
}

// MaxReported bounds each count of one request's usage as reported by a
// provider (about 10^12 tokens, far past any real request): a larger one
// is taken as this, so that sums of counts cannot overflow.
const MaxReported = 1 << 40

// FromResult is the usage a scanned response reported (Requests zero):
// Anthropic's input counts cache reads and writes too. Each count is
// taken between 0 and [MaxReported].
func FromResult(f tooluse.Format, res tooluse.Result) Usage {
	if !res.HasUsage {
		return Usage{}
	}
	u := res.Usage
	in := reported(u.InputTokens)
	if f == tooluse.Anthropic {
		in = min(in+reported(u.CacheReadTokens)+reported(u.CacheWriteTokens), MaxReported)
	}
	return Usage{InputTokens: in, OutputTokens: reported(u.OutputTokens)}
}

// reported is n between 0 and MaxReported.
func reported(n int64) int64 { return min(max(n, 0), MaxReported) }

// cleanText is s as a store can hold it: valid UTF-8 without NUL bytes
// (PostgreSQL text refuses both), each replaced by U+FFFD. A model name
// comes from the response: a value no store can write would fail the
// transaction every pending settlement and usage row is written in.
func cleanText(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// clean is a with every field cleanText.
func (a Attribution) clean() Attribution {
	for _, f := range []*string{&a.JTI, &a.RunID, &a.Tenant, &a.Agent, &a.Provider, &a.Model, &a.Day} {
		*f = cleanText(*f)
	}
	return a
}

// day is the UTC day of t, "2006-01-02", formatted once per day.
func (m *Meter) day(t time.Time) string {
	t = t.UTC()
	y, mo, d := t.Date()
	key := y*10000 + int(mo)*100 + d
	if c := m.dayCache.Load(); c != nil && c.key == key {
		return c.s
	}
	c := &dayString{key: key, s: t.Format(time.DateOnly)}
	m.dayCache.Store(c)
	return c.s
}

type dayString struct {
	key int
	s   string
}

func (m *Meter) pending() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.settles) + len(m.usage)
}

// Flush writes what is pending now.
func (m *Meter) Flush(ctx context.Context) error {
	m.flushing.Lock()
	defer m.flushing.Unlock()
	m.mu.Lock()
	settles, usage := m.settles, m.usage
	m.settles, m.usage = nil, make(map[Attribution]Usage)
	m.mu.Unlock()
	if len(settles) == 0 && len(usage) == 0 {
		return nil
	}
	deltas := make([]UsageDelta, 0, len(usage))
	for a, u := range usage {
		deltas = append(deltas, UsageDelta{Attribution: a, Used: u})
	}
	err := m.store.Commit(ctx, settles, deltas)
	if err != nil && len(settles)+len(deltas) > 1 {
		// One row the store refuses for good must not hold back the
		// others: write them one by one, keeping those that fail.
		settles, deltas, err = m.commitEach(ctx, settles, deltas)
	}
	if err == nil {
		m.metrics.setPending(m.pending())
		return nil
	}
	// Put back what was not written: it is written with the next flush
	// (settling twice counts once, and usage rows are only added to
	// after a commit).
	usage = make(map[Attribution]Usage, len(deltas))
	for _, d := range deltas {
		usage[d.Attribution] = usage[d.Attribution].Add(d.Used)
	}
	m.mu.Lock()
	m.settles = append(settles, m.settles...)
	for a, u := range usage {
		m.usage[a] = m.usage[a].Add(u)
	}
	n := len(m.settles) + len(m.usage)
	m.mu.Unlock()
	m.metrics.flushFailed()
	m.metrics.setPending(n)
	return err
}

// commitEach writes each settlement and usage row in its own
// transaction and returns those that failed, with the last error. After
// two failures in a row with nothing written it stops (the store is
// down, not refusing one row) and returns all that is left.
func (m *Meter) commitEach(ctx context.Context, settles []Settlement, deltas []UsageDelta) ([]Settlement, []UsageDelta, error) {
	var (
		failedS   []Settlement
		failedD   []UsageDelta
		lastErr   error
		streak    int
		anyWrote  bool
		giveUpAll = func() bool { return !anyWrote && streak >= 2 }
	)
	for i, s := range settles {
		if giveUpAll() {
			return append(failedS, settles[i:]...), append(failedD, deltas...), lastErr
		}
		if err := m.store.Commit(ctx, []Settlement{s}, nil); err != nil {
			failedS, lastErr = append(failedS, s), err
			streak++
			continue
		}
		anyWrote, streak = true, 0
	}
	for i, d := range deltas {
		if giveUpAll() {
			return failedS, append(failedD, deltas[i:]...), lastErr
		}
		if err := m.store.Commit(ctx, nil, []UsageDelta{d}); err != nil {
			failedD, lastErr = append(failedD, d), err
			streak++
			continue
		}
		anyWrote, streak = true, 0
	}
	if len(failedS) == 0 && len(failedD) == 0 {
		return nil, nil, nil
	}
	if anyWrote {
		m.log.Warn("usage rows the store refuses are kept pending", "settlements", len(failedS), "usage_rows", len(failedD), "error", lastErr)
	}
	return failedS, failedD, lastErr
}

func (m *Meter) run(ctx context.Context) {
	defer close(m.done)
	tick := time.NewTicker(m.flush)
	defer tick.Stop()
	sweepEvery := min(m.ttl/4, time.Minute)
	lastSweep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-m.kick:
		}
		if err := m.Flush(ctx); err != nil && ctx.Err() == nil {
			m.log.Warn("writing usage failed; retrying", "error", err)
		}
		if time.Since(lastSweep) >= sweepEvery {
			lastSweep = time.Now()
			if n, err := m.store.SettleExpired(ctx, m.now()); err != nil {
				m.log.Warn("settling expired reservations failed", "error", err)
			} else if n > 0 {
				m.log.Warn("settled expired reservations at their amount", "count", n)
			}
		}
	}
}

// Close waits for the requests begun to be settled, stops the writer
// and writes what is pending (all bounded by ctx: a request settled
// after it is not written).
func (m *Meter) Close(ctx context.Context) error {
	var err error
	m.closeOnce.Do(func() {
		settled := make(chan struct{})
		go func() {
			m.open.Wait()
			close(settled)
		}()
		select {
		case <-settled:
		case <-ctx.Done():
			m.log.Warn("closing the meter before every request was settled")
		}
		m.stop()
		<-m.done
		err = m.Flush(ctx)
	})
	return err
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}
