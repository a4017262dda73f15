package netcheck

import "testing"

// parse maps results by address, in the targets' order, and refuses a
// message that lacks a target (a probe that died early is no verdict).
func TestParse(t *testing.T) {
	targets := []Target{{"custody", "custody.custody-system.svc:8865"}, {"store", "10.0.0.20:5432"}}
	msg := "10.0.0.20:5432 timeout after 5s\ncustody.custody-system.svc:8865 connected to 10.0.0.12:8865 in 3ms\n"
	out, err := parse(msg, targets)
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Connected || out[0].Name != "custody" || out[1].Connected || out[1].Observed != "timeout after 5s" {
		t.Errorf("got %+v", out)
	}
	if _, err := parse("10.0.0.20:5432 connected to x\n", targets); err == nil {
		t.Error("a missing target was not refused")
	}
	if o, _ := parse("10.0.0.20:5432 refused after 1ms\ncustody.custody-system.svc:8865 error lookup: no such host\n", targets); o[0].Connected || o[1].Connected {
		t.Errorf("refused/error counted as connected: %+v", o)
	}
}
