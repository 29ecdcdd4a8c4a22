package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/jsonw/jsonwtest"
	"github.com/flashsale/flashsale/internal/order"
)

// randomOrderJSON is an order answer with its fields drawn from edges
// and odd strings, each optional member present or not.
func randomOrderJSON(r *rand.Rand) orderJSON {
	ints := []int64{0, 1, -1, 42, math.MaxInt64, math.MinInt64, 1 << 53}
	times := []time.Time{
		{}, time.Unix(0, 0).UTC(), time.Date(2026, 11, 29, 17, 4, 5, 0, time.UTC),
		time.Date(2026, 11, 29, 17, 4, 5, 120000000, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(2026, 6, 1, 8, 0, 0, 0, time.FixedZone("CST", 8*3600)),
	}
	s := func() string { return jsonwtest.OddStrings[r.IntN(len(jsonwtest.OddStrings))] }
	i := func() int64 { return ints[r.IntN(len(ints))] }
	t := func() time.Time { return times[r.IntN(len(times))] }
	pt := func() *time.Time {
		if r.IntN(2) == 0 {
			return nil
		}
		x := t()
		return &x
	}
	return orderJSON{
		OrderNo: s(), ActivityID: i(), Quantity: int(i()), PriceCents: i(), AmountCents: i(), Status: s(),
		CreatedAt: t(), PayBy: pt(), PaidAt: pt(), CancelledAt: pt(), Persisted: r.IntN(2) == 0,
		GroupID: s(), Item: s(),
	}
}

func TestAppendOrderJSON_sameBytesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 1))
	for n := range 20000 {
		o := randomOrderJSON(r)
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendOrderJSON(nil, &o); !bytes.Equal(got, want) {
			t.Fatalf("order %d:\n got %s\nwant %s", n, got, want)
		}
	}
	// orderOut's answers, from real orders
	o := orderOut(order.Order{No: "FS1", ActivityID: 7, UserID: 9, Quantity: 2, PriceCents: 500, AmountCents: 1000,
		Status: order.PendingPayment, CreatedAt: time.Now(), PayBy: time.Now().Add(15 * time.Minute), Item: "RED-M"})
	want, _ := json.Marshal(o)
	if got := appendOrderJSON(nil, &o); !bytes.Equal(got, want) {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// The answer through gin: the status, gin's Content-Type for JSON, and
// the body; a second answer from the pool's reused buffer is not mixed
// with the first's.
func TestRenderOrder_answersAsGinsJSONDid(t *testing.T) {
	gin.SetMode(gin.TestMode)
	r := rand.New(rand.NewPCG(7, 7))
	for range 3 {
		o := randomOrderJSON(r)
		viaGin, viaUs := httptest.NewRecorder(), httptest.NewRecorder()
		c1, _ := gin.CreateTestContext(viaGin)
		c1.JSON(http.StatusAccepted, o)
		c2, _ := gin.CreateTestContext(viaUs)
		renderOrder(c2, http.StatusAccepted, o)
		if viaUs.Code != http.StatusAccepted || viaUs.Header().Get("Content-Type") != viaGin.Header().Get("Content-Type") {
			t.Fatalf("status %d, Content-Type %q; gin: %d %q", viaUs.Code, viaUs.Header().Get("Content-Type"),
				viaGin.Code, viaGin.Header().Get("Content-Type"))
		}
		if !bytes.Equal(viaUs.Body.Bytes(), viaGin.Body.Bytes()) {
			t.Fatalf("body\n got %s\nwant %s", viaUs.Body.Bytes(), viaGin.Body.Bytes())
		}
	}
}

func BenchmarkRenderOrder(b *testing.B) {
	gin.SetMode(gin.TestMode)
	now := time.Now()
	o := orderOut(order.Order{No: "FS20261129170405000000012345", ActivityID: 7, Quantity: 1, PriceCents: 990,
		AmountCents: 990, Status: order.PendingPayment, CreatedAt: now, PayBy: now.Add(15 * time.Minute)})
	w := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(w)
	for _, bc := range []struct {
		name   string
		render func()
	}{
		{"gin-JSON", func() { c.JSON(http.StatusAccepted, o) }},
		{"appendOrderJSON", func() { renderOrder(c, http.StatusAccepted, o) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				w.Body.Reset()
				bc.render()
			}
		})
	}
}
