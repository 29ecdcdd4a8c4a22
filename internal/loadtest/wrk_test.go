package loadtest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/auth"
	"github.com/flashsale/flashsale/internal/waitingroom"
)

// usersSeen is a server that answers 202 after a millisecond (so two
// connections send at most about 2,000 requests a second) and records
// which user each request came as.
type usersSeen struct {
	tokens   *auth.Tokens
	admit    *waitingroom.Signer // if set, each request's Admission-Token must be its user's to sale 7
	mu       sync.Mutex
	requests int
	users    map[int64]int
}

func (u *usersSeen) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(time.Millisecond)
	id, err := u.tokens.Verify(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	if err != nil {
		http.Error(w, `{"error":{"code":"UNAUTHENTICATED"}}`, http.StatusUnauthorized)
		return
	}
	if u.admit != nil {
		if err := u.admit.Verify(r.Header.Get("Admission-Token"), id, 7); err != nil {
			http.Error(w, `{"error":{"code":"NOT_ADMITTED"}}`, http.StatusForbidden)
			return
		}
	}
	u.mu.Lock()
	u.requests++
	u.users[id]++
	u.mu.Unlock()
	w.WriteHeader(http.StatusAccepted)
	_, _ = w.Write([]byte(`{"order_no":"x"}`))
}

// The orders script's "once" mode, a launch's shoppers: every request a
// user not sent before, each wrk thread from a file of its own; when the
// files run out, the requests that sent a user again are counted, so a
// run that was meant to be fresh cannot pass for one.
func TestRunWrk_once_sendsEveryUserOnce_andCountsTheReusedWhenTokensRunOut(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	tokens, err := auth.NewWithCache(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		users int
	}{
		{"enough users for the run", 6000},
		{"ten users for the run", 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			seen := &usersSeen{tokens: tokens, users: map[int64]int{}}
			srv := httptest.NewServer(seen)
			defer srv.Close()
			dir := t.TempDir()
			const from = 1_000_000
			if err := WriteUserTokenFiles(dir+"/fresh", secret, consecutive(from, tc.users), 2, time.Hour, 0); err != nil {
				t.Fatal(err)
			}
			res, err := RunWrk(context.Background(), WrkRun{URL: srv.URL, Activity: 7, TokensFile: dir + "/fresh",
				Threads: 2, Conns: 2, Duration: time.Second, Dir: dir, Once: true})
			if err != nil {
				t.Fatal(err)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			even, odd := 0, 0
			again := 0
			for id, n := range seen.users {
				if id < from || id >= from+int64(tc.users) {
					t.Fatalf("user %d is none of the files'", id)
				}
				if (id-from)%2 == 0 {
					even++
				} else {
					odd++
				}
				again += n - 1
			}
			if res.Codes["202"] == 0 || res.Requests < 100 || res.CPU <= 0 {
				t.Fatalf("wrk: %d requests, answers %v, its CPU %v", res.Requests, res.Codes, res.CPU)
			}
			if even == 0 || odd == 0 {
				t.Fatalf("users of file 0: %d, of file 1: %d; each thread sends its own file's", even, odd)
			}
			if tc.users > seen.requests {
				if again != 0 || res.Reused != 0 {
					t.Fatalf("%d requests, %d of them a user again, %d counted reused: want none", seen.requests, again, res.Reused)
				}
				return
			}
			if again == 0 || res.Reused < int64(again) {
				t.Fatalf("%d requests for %d users: %d sent a user again, %d counted reused", seen.requests, tc.users, again, res.Reused)
			}
		})
	}
}

// Token files with admissions (a waiting room's shoppers in the launch
// bench): every order carries its user's admission to the sale, signed as
// the api signs them with ADMISSION_SECRET unset.
func TestRunWrk_admittedTokenFiles_sendEachUsersAdmission(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	tokens, err := auth.NewWithCache(secret, 0)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := waitingroom.NewSigner(waitingroom.DeriveSecret(secret))
	if err != nil {
		t.Fatal(err)
	}
	seen := &usersSeen{tokens: tokens, admit: signer, users: map[int64]int{}}
	srv := httptest.NewServer(seen)
	defer srv.Close()
	dir := t.TempDir()
	if err := WriteUserTokenFiles(dir+"/fresh", secret, consecutive(1_000_000, 4000), 2, time.Hour, 7); err != nil {
		t.Fatal(err)
	}
	res, err := RunWrk(context.Background(), WrkRun{URL: srv.URL, Activity: 7, TokensFile: dir + "/fresh",
		Threads: 2, Conns: 2, Duration: time.Second, Dir: dir, Once: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Codes["202"] < 100 || len(res.Codes) != 1 {
		t.Fatalf("answers %v: want only 202s, every order admitted", res.Codes)
	}
	// Files without admissions, to the same server: every order refused.
	if err := WriteUserTokenFiles(dir+"/plain", secret, consecutive(2_000_000, 4000), 2, time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	res, err = RunWrk(context.Background(), WrkRun{URL: srv.URL, Activity: 7, TokensFile: dir + "/plain",
		Threads: 2, Conns: 2, Duration: 500 * time.Millisecond, Dir: dir, Once: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Codes["403 NOT_ADMITTED"] < 100 || len(res.Codes) != 1 {
		t.Fatalf("without admissions, answers %v: want only 403 NOT_ADMITTED", res.Codes)
	}
}
