package ratelimit

import (
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func TestBurstThenRefill(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	k := New(0.5, 3, 0, c.now) // one token every 2 s, 3 deep
	for i := range 3 {
		if ok, _ := k.Allow("pod-a"); !ok {
			t.Fatalf("call %d of the burst refused", i)
		}
	}
	ok, wait := k.Allow("pod-a")
	if ok || wait <= 0 || wait > 2*time.Second {
		t.Fatalf("fourth call = %v, wait %v; want refused with a wait of at most 2 s", ok, wait)
	}
	if ok, _ := k.Allow("pod-b"); !ok {
		t.Fatal("another key is limited by pod-a's bucket")
	}
	c.add(2 * time.Second)
	if ok, _ := k.Allow("pod-a"); !ok {
		t.Fatal("no token after the refill interval")
	}
	if ok, _ := k.Allow("pod-a"); ok {
		t.Fatal("two tokens after one refill interval")
	}
}

func TestBoundedKeys(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	k := New(1, 2, 2, c.now)
	k.Allow("a")
	k.Allow("b")
	if ok, _ := k.Allow("c"); ok {
		t.Fatal("a third key was admitted while two busy buckets fill the table")
	}
	c.add(3 * time.Second) // a and b are full again: forgettable
	if ok, _ := k.Allow("c"); !ok {
		t.Fatal("a new key refused although idle buckets could be forgotten")
	}
}

func TestDisabled(t *testing.T) {
	k := New(0, 1, 1, nil)
	for range 100 {
		if ok, _ := k.Allow("x"); !ok {
			t.Fatal("a disabled limiter refused")
		}
	}
}

// TestFullTableSweepsRarely: while no bucket can be forgotten yet, new
// keys into a full table are refused without sweeping it again; once the
// oldest bucket is idle long enough, room is made.
func TestFullTableSweepsRarely(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	k := New(1, 2, 3, c.now) // idle after 2 s
	k.Allow("a")
	c.add(time.Second)
	k.Allow("b")
	k.Allow("c")
	if ok, _ := k.Allow("d"); ok {
		t.Fatal("a fourth key admitted into a full table")
	}
	if k.noSweepUntil != time.Unix(1002, 0) {
		t.Fatalf("next useful sweep at %v, want when a is idle (1002)", k.noSweepUntil)
	}
	c.add(500 * time.Millisecond)
	if ok, _ := k.Allow("e"); ok || len(k.buckets) != 3 {
		t.Fatal("admitted or swept before any bucket was idle")
	}
	c.add(500 * time.Millisecond) // a is idle now
	if ok, _ := k.Allow("f"); !ok {
		t.Fatal("no room once the oldest bucket could be forgotten")
	}
}
