package loadtest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"
)

// HeartbeatRun is shoppers' apps saying "I am here, watching this sale"
// (POST /v1/presence) while the sale runs: every user of TokensFile once
// per Every, spread evenly, so the rate is users/Every — 20,000 users
// every 30 s is 667 heartbeats a second. wrk cannot pace requests, so
// these come from Conns goroutines of this process.
type HeartbeatRun struct {
	URL        string
	Activity   int64
	TokensFile string
	Every      time.Duration
	Conns      int // concurrent requests at most (default 32)
	Start      int // the first user's index in TokensFile (default 0: the first line)
}

// RunHeartbeats sends heartbeats until ctx ends and reports them like a
// load generator: requests, latency, answers by status. A pool that cannot
// keep up sends fewer (Requests/Seconds shows the rate reached).
func RunHeartbeats(ctx context.Context, h HeartbeatRun) (Result, error) {
	tokens, err := readTokens(h.TokensFile)
	if err != nil {
		return Result{}, err
	}
	if len(tokens) == 0 || h.Every <= 0 {
		return Result{}, fmt.Errorf("loadtest: heartbeats need tokens and an interval")
	}
	if h.Conns <= 0 {
		h.Conns = 32
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: h.Conns}}
	body := []byte(`{"activity_id":` + strconv.FormatInt(h.Activity, 10) + `}`)
	gap := h.Every / time.Duration(len(tokens))

	var mu sync.Mutex
	res := Result{Tool: "heartbeats", Codes: map[string]int64{}}
	var lat []time.Duration
	work := make(chan string)
	var wg sync.WaitGroup
	for range h.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok := range work {
				req, _ := http.NewRequest(http.MethodPost, h.URL+"/v1/presence", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tok)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := client.Do(req)
				took := time.Since(start)
				mu.Lock()
				res.Requests++
				if err != nil {
					res.Errors++
				} else {
					res.Codes[strconv.Itoa(resp.StatusCode)]++
					lat = append(lat, took)
				}
				mu.Unlock()
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		}()
	}
	start := time.Now()
	next := start
	for i := 0; ctx.Err() == nil; i++ {
		if d := time.Until(next); d > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(d):
			}
		}
		select {
		case work <- tokens[(h.Start+i)%len(tokens)]:
		case <-ctx.Done():
		}
		next = next.Add(gap)
	}
	close(work)
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	slices.Sort(lat)
	at := func(q float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(q*float64(len(lat))))]
	}
	res.P50, res.P90, res.P99 = at(0.50), at(0.90), at(0.99)
	if len(lat) > 0 {
		res.Max = lat[len(lat)-1]
	}
	return res, nil
}

// readTokens reads WriteTokens' file: "user_id<TAB>token" lines.
func readTokens(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		_, tok, ok := bytes.Cut(bytes.TrimSpace(sc.Bytes()), []byte("\t"))
		if ok && len(tok) > 0 {
			out = append(out, string(tok))
		}
	}
	return out, sc.Err()
}
