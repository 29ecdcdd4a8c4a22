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
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc}}
	next := make(chan string)
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for tok := range next {
				if _, err := (Shopper{Base: base, Token: tok, HTTP: client}).Join(ctx, sale); err != nil {
					errs <- fmt.Errorf("loadtest: join the queue of sale %d: %w", sale, err)
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
