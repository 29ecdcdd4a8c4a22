package embedded_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/flashsale/flashsale/internal/connect"
)

// The worker writes orders from many connections while the API and the
// reconciler read them: the embedded SQL server must neither race (run with
// -race) nor lose a row.
func TestStack_concurrentWritersAndReaders_loseNothing(t *testing.T) {
	s := start(t)
	db, err := connect.MySQL(s.MySQLDSN)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("CREATE TABLE o (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, no VARCHAR(20) NOT NULL, " +
		"a BIGINT NOT NULL, UNIQUE KEY uno (no), KEY ka (a))").Error; err != nil {
		t.Fatal(err)
	}
	const writers, rows = 16, 40
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range rows {
				if err := db.WithContext(ctx).Exec("INSERT IGNORE INTO o (no, a) VALUES (?, ?)",
					fmt.Sprintf("%d-%d", w, i), w%3).Error; err != nil {
					t.Error(err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range rows {
				var n int64
				if err := db.WithContext(ctx).Raw("SELECT COUNT(*) FROM o WHERE a = ?", w%3).Scan(&n).Error; err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	var n int64
	if err := db.Raw("SELECT COUNT(*) FROM o").Scan(&n).Error; err != nil || n != writers*rows {
		t.Fatalf("%d rows (err %v), want %d", n, err, writers*rows)
	}
}
