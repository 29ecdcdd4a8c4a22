package tasks

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/flashsale/flashsale/internal/jsonw"
	"github.com/flashsale/flashsale/internal/jsonw/jsonwtest"
)

func randomBatch(r *rand.Rand) []syncPayload {
	if r.IntN(20) == 0 {
		return nil
	}
	fences := []int64{0, 1, -1, 7, math.MaxInt64, math.MinInt64}
	orders := make([]syncPayload, r.IntN(5))
	for i := range orders {
		orders[i] = syncPayload{No: jsonwtest.OddStrings[r.IntN(len(jsonwtest.OddStrings))], Fence: fences[r.IntN(len(fences))]}
		if r.IntN(2) == 0 {
			orders[i].Trace = jsonwtest.OddStrings[r.IntN(len(jsonwtest.OddStrings))]
		}
	}
	return orders
}

// What the relay writes is what json.Marshal wrote, and the worker reads it
// back as json.Unmarshal did.
func TestBatchPayload_sameBytesAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	fast := 0
	for n := range 20000 {
		orders := randomBatch(r)
		want, err := json.Marshal(batchPayload{Orders: orders})
		if err != nil {
			t.Fatal(err)
		}
		got := appendBatchPayload(nil, orders)
		if !bytes.Equal(got, want) {
			t.Fatalf("batch %d:\n got %s\nwant %s", n, got, want)
		}
		var viaJSON batchPayload
		if err := json.Unmarshal(got, &viaJSON); err != nil {
			t.Fatal(err)
		}
		read, err := parseBatchPayload(got)
		if err != nil || !reflect.DeepEqual(read, viaJSON) {
			t.Fatalf("batch %d %s: read %+v, %v; json.Unmarshal %+v", n, got, read, err, viaJSON)
		}
		// The fast path takes every batch of plain strings, and only those.
		plain := len(orders) > 0
		for _, o := range orders {
			plain = plain && jsonw.Plain(o.No) && jsonw.Plain(o.Trace)
		}
		if _, ok := parseBatchFast(got); ok != plain {
			t.Fatalf("batch %d %s: fast path %v, want %v", n, got, ok, plain)
		} else if ok {
			fast++
		}
	}
	if fast < 1000 {
		t.Fatalf("only %d of 20000 batches took the fast path", fast)
	}
}

// Which payloads the fast path takes: the relay's plain form only.
func TestParseBatchFast_takesOnlyThePlainForm(t *testing.T) {
	for _, c := range []struct {
		in   string
		fast bool
	}{
		{`{"orders":[{"no":"A","fence":0}]}`, true},
		{`{"orders":[{"no":"A","fence":-3,"tp":"00-x"},{"no":"B","fence":12}]}`, true},
		{`{"orders":[]}`, false},
		{`{"orders":null}`, false},
		{`{"orders":[{"no":"A","fence":0}]} `, false},
		{`{ "orders":[{"no":"A","fence":0}]}`, false},
		{`{"orders":[{"fence":0,"no":"A"}]}`, false},
		{`{"orders":[{"no":"A\u0042","fence":0}]}`, false},
		{`{"orders":[{"no":"A","fence":01}]}`, false},
		{`{"orders":[{"no":"A","fence":1.0}]}`, false},
		{`{"orders":[{"no":"A","fence":99999999999999999999}]}`, false},
		{`{"orders":[{"no":"A","fence":0,"extra":1}]}`, false},
		{`{"orders":[{"no":"A","fence":0}],"orders":[]}`, false},
	} {
		if _, ok := parseBatchFast([]byte(c.in)); ok != c.fast {
			t.Errorf("%s: fast %v, want %v", c.in, ok, c.fast)
		}
	}
}

// FuzzParseBatchPayload: whatever the fast path accepts, json.Unmarshal
// reads the same; and parseBatchPayload agrees with json.Unmarshal on
// everything.
func FuzzParseBatchPayload(f *testing.F) {
	for _, s := range []string{
		`{"orders":[{"no":"A","fence":0}]}`, `{"orders":[{"no":"A","fence":-3,"tp":"00-x"},{"no":"B","fence":12}]}`,
		`{"orders":[{"no":"A\u0042","fence":0}]}`, `{"orders":[{"no":"A","fence":1e3}]}`, `{"orders":null}`, `[]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var want batchPayload
		wantErr := json.Unmarshal(in, &want)
		if fast, ok := parseBatchFast(in); ok && (wantErr != nil || !reflect.DeepEqual(fast, want)) {
			t.Fatalf("%q: fast %+v; json.Unmarshal %+v, %v", in, fast, want, wantErr)
		}
		got, err := parseBatchPayload(in)
		if (err != nil) != (wantErr != nil) || (err == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("%q: got %+v, %v; json.Unmarshal %+v, %v", in, got, err, want, wantErr)
		}
	})
}

// go test -run '^$' -bench BatchPayload -benchmem ./internal/tasks/
func BenchmarkBatchPayload(b *testing.B) {
	orders := make([]syncPayload, 100)
	for i := range orders {
		orders[i] = syncPayload{No: "42-06H0J68TSYHN2J2MDXSS60AGDR", Fence: int64(i)}
	}
	data, _ := json.Marshal(batchPayload{Orders: orders})
	b.Run("write/json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(batchPayload{Orders: orders})
		}
	})
	b.Run("write/appendBatchPayload", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = appendBatchPayload(make([]byte, 0, 16+64*len(orders)), orders)
		}
	})
	b.Run("read/json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p batchPayload
			_ = json.Unmarshal(data, &p)
		}
	})
	b.Run("read/parseBatchPayload", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = parseBatchPayload(data)
		}
	})
}
