package cli

import (
	"testing"
	"time"
)

// TestExchangeAddressLimitDefault measures the default per-address
// exchange limit on a simulated clock: a real burst of pods behind one
// node address is never limited, a flood from one address is.
func TestExchangeAddressLimitDefault(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	lim := exchangeLimits(Defaults(), func() time.Time { return now }).ByAddress

	// A node's 110 pods (kubelet's default max-pods) behind one SNAT
	// address all start at once and exchange twice each (the first try
	// and one retry), then re-exchange as their 15-minute keys expire.
	const pods = 110
	refused := 0
	for i := 0; i < 2*pods; i++ {
		if ok, _ := lim.Allow("10.0.0.1"); !ok {
			refused++
		}
	}
	for step := 0; step < 60; step++ { // an hour: each pod every 15 min
		now = now.Add(time.Minute)
		for i := 0; i < pods/15+1; i++ {
			if ok, _ := lim.Allow("10.0.0.1"); !ok {
				refused++
			}
		}
	}
	if refused != 0 {
		t.Errorf("burst of %d pods behind one address: %d exchanges refused, want 0", pods, refused)
	}

	// A flood from one address: 1,000 attempts a second for 10 s.
	reached := 0
	const perSecond, seconds = 1000, 10
	for i := 0; i < perSecond*seconds; i++ {
		now = now.Add(time.Second / perSecond)
		if ok, _ := lim.Allow("192.0.2.7"); ok {
			reached++
		}
	}
	burst, rate := int(5*Defaults().ExchangeAddressRate), int(Defaults().ExchangeAddressRate)
	t.Logf("flood of %d attempts in %d s from one address: %d reach TokenReview (burst %d + %d/s)", perSecond*seconds, seconds, reached, burst, rate)
	if want := burst + rate*seconds; reached > want || reached < want-1 {
		t.Errorf("flood: %d of %d attempts reached TokenReview, want %d", reached, perSecond*seconds, want)
	}
	if reached*10 > perSecond*seconds {
		t.Errorf("flood: %d of %d attempts reached TokenReview: the default limits nothing", reached, perSecond*seconds)
	}
}
