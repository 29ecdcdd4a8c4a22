package loadtest

import (
	"context"
	"fmt"
	"net/http"
	"sync"
)

// JoinQueue joins every user of tokensFile (WriteTokens') to sale's waiting room at
// base (POST /v1/activities/<sale>/queue), conc at a time: a crowd that
// waits, for a bench of the waiting room's polls. It stops at the first
// answer that is not 200.
func JoinQueue(ctx context.Context, base string, sale int64, tokensFile string, conc int) error {
	tokens, err := readTokens(tokensFile)
	if err != nil {
		return err
	}
	url := fmt.Sprintf("%s/v1/activities/%d/queue", base, sale)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	next := make(chan string)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok := range next {
				req, _ := http.NewRequestWithContext(ctx, "POST", url, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("loadtest: join the queue of sale %d: %d", sale, resp.StatusCode)
					return
				}
			}
		}()
	}
	var first error
feed:
	for _, tok := range tokens {
		select {
		case next <- tok:
		case first = <-errs:
			break feed
		}
	}
	close(next)
	wg.Wait()
	close(errs)
	if first == nil {
		first = <-errs
	}
	return first
}
