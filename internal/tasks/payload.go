package tasks

import (
	"encoding/json"
	"strconv"

	"github.com/flashsale/flashsale/internal/jsonw"
)

// A batch task's payload, {"orders":[{"no":…,"fence":…,"tp":…},…]}, is
// written by appendBatchPayload and read by parseBatchPayload by hand, not
// by encoding/json: the worker decodes one for every batch of orders it
// records or expires, and json.Unmarshal's reflection over a hundred small
// objects was 7.5% of its CPU at a launch (docs/benchmarks.md, issue 43).
// Both speak exactly encoding/json's form: appendBatchPayload writes the
// bytes json.Marshal wrote (TestBatchPayload_sameBytesAsEncodingJSON), and
// parseBatchPayload reads only that form — plain strings, integers, the
// members in that order — and hands anything else to json.Unmarshal, so a
// task queued by any earlier version, or written by hand, reads as before
// (FuzzParseBatchPayload checks they agree).

// appendBatchPayload appends batchPayload{orders} as json.Marshal writes it.
func appendBatchPayload(b []byte, orders []syncPayload) []byte {
	if orders == nil {
		return append(b, `{"orders":null}`...)
	}
	b = append(b, `{"orders":[`...)
	for i, o := range orders {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"no":`...)
		b = jsonw.AppendString(b, o.No)
		b = append(b, `,"fence":`...)
		b = strconv.AppendInt(b, o.Fence, 10)
		if o.Trace != "" {
			b = append(b, `,"tp":`...)
			b = jsonw.AppendString(b, o.Trace)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// parseBatchPayload reads a batch task's payload as json.Unmarshal would.
func parseBatchPayload(data []byte) (batchPayload, error) {
	if p, ok := parseBatchFast(data); ok {
		return p, nil
	}
	var p batchPayload
	err := json.Unmarshal(data, &p)
	return p, err
}

// parseBatchFast reads appendBatchPayload's form of a non-empty batch; ok
// is false for anything else.
func parseBatchFast(data []byte) (p batchPayload, ok bool) {
	r := batchReader{b: data}
	if !r.lit(`{"orders":[`) {
		return p, false
	}
	p.Orders = make([]syncPayload, 0, 1+len(data)/64)
	for {
		var o syncPayload
		if !r.lit(`{"no":`) || !r.str(&o.No) || !r.lit(`,"fence":`) || !r.int(&o.Fence) {
			return p, false
		}
		if r.lit(`,"tp":`) && !r.str(&o.Trace) {
			return p, false
		}
		if !r.lit("}") {
			return p, false
		}
		p.Orders = append(p.Orders, o)
		if r.lit(",") {
			continue
		}
		return p, r.lit("]}") && r.i == len(r.b)
	}
}

// batchReader reads the fast form from b, at i.
type batchReader struct {
	b []byte
	i int
}

// lit consumes s if the input goes on with it.
func (r *batchReader) lit(s string) bool {
	if !jsonw.At(r.b, r.i, s) {
		return false
	}
	r.i += len(s)
	return true
}

// str reads a plain string (jsonw.PlainString) into dst.
func (r *batchReader) str(dst *string) bool {
	s, next, ok := jsonw.PlainString(r.b, r.i)
	if ok {
		*dst, r.i = s, next
	}
	return ok
}

// int reads an integer as JSON writes one (an optional minus, no leading
// zero), within int64.
func (r *batchReader) int(dst *int64) bool {
	j := r.i
	if j < len(r.b) && r.b[j] == '-' {
		j++
	}
	start := j
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	if j == start || (r.b[start] == '0' && j-start > 1) {
		return false
	}
	n, err := strconv.ParseInt(string(r.b[r.i:j]), 10, 64)
	if err != nil {
		return false
	}
	*dst, r.i = n, j
	return true
}
