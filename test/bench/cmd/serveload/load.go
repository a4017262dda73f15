package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// level is what one concurrency level measured.
type level struct {
	clients  int
	decides  int
	elapsed  time.Duration
	p50, p99 time.Duration
	cpu      time.Duration // server user+system CPU over the level
	commits  float64       // group commits over the level (-1: not exposed)
	errs     int
	firstErr string
}

func (l level) rate() float64 { return float64(l.decides) / l.elapsed.Seconds() }

// runLevel registers one signer run per client (each client its own
// agent token) and has every client decide calls on its run back to back
// for d; every reply must be 200 with an effect.
func runLevel(ctx context.Context, s *server, hc *http.Client, clients int, d time.Duration) (level, error) {
	runs := make([]string, clients)
	for i := range runs {
		var info struct {
			Run string `json:"run"`
		}
		if err := post(ctx, hc, s.api+"/v1/signer/runs", s.tokens[i], []byte(`{}`), http.StatusCreated, &info); err != nil {
			return level{}, fmt.Errorf("register run: %w", err)
		}
		runs[i] = info.Run
	}
	commits0 := s.commits(ctx, hc)
	cpu0 := procCPU(s.cmd.Process.Pid)
	var mu sync.Mutex
	lv := level{clients: clients}
	var all []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var lat []time.Duration
			errs, first := 0, ""
			dc, err := newDecider(s.api, "/v1/signer/runs/"+runs[i]+"/decide", s.tokens[i])
			if err != nil {
				mu.Lock()
				lv.errs++
				lv.firstErr = err.Error()
				mu.Unlock()
				return
			}
			defer func() { dc.close() }()
			var body []byte
			for n := 0; time.Now().Before(stop); n++ {
				body = fmt.Appendf(body[:0], `{"call_id":"c%d","tool":"Bash","args":{"command":"ls -la /tmp/%d"}}`, n, n)
				t0 := time.Now()
				if err := dc.decide(body); err != nil {
					if errs == 0 {
						first = err.Error()
					}
					errs++
					// The reply may not have been read: start over on a
					// new connection.
					dc.close()
					if dc, err = newDecider(s.api, "/v1/signer/runs/"+runs[i]+"/decide", s.tokens[i]); err != nil {
						errs++
						break
					}
					continue
				}
				lat = append(lat, time.Since(t0))
			}
			mu.Lock()
			all = append(all, lat...)
			lv.errs += errs
			if lv.firstErr == "" {
				lv.firstErr = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	lv.elapsed = time.Since(start)
	lv.cpu = procCPU(s.cmd.Process.Pid) - cpu0
	lv.commits = -1
	if c1 := s.commits(ctx, hc); c1 >= 0 && commits0 >= 0 {
		lv.commits = c1 - commits0
	}
	lv.decides = len(all)
	slices.Sort(all)
	if len(all) > 0 {
		lv.p50 = all[len(all)/2]
		lv.p99 = all[len(all)*99/100]
	}
	return lv, nil
}

func post(ctx context.Context, hc *http.Client, url, token string, body []byte, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s: %d %s", url, resp.StatusCode, tail(b, 300))
	}
	return json.Unmarshal(b, out)
}

// commits reads custody_signer_commits_total from the server's /metrics;
// -1 if it is not there.
func (s *server) commits(ctx context.Context, hc *http.Client) float64 {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.metrics, nil)
	resp, err := hc.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "custody_signer_commits_total "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// procCPU is the user+system CPU time of process pid so far, from
// /proc/PID/stat (clock ticks, 100 per second on Linux).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}
