package httpapi

import (
	"reflect"
	"testing"
)

var orderBodies = []struct {
	body string
	fast bool // parseOrderBody takes it
}{
	{`{"quantity":1}`, true},
	{`{"item":"RED-M","quantity":2}`, true},
	{`{"quantity":2,"item":"RED-M"}`, true},
	{" {\n\t\"quantity\" : 1 ,\r\n \"item\" : \"A b\" } \n", true},
	{`{"item":"RED-M"}`, true}, // no quantity: the decoder's answer, required, follows
	{`{}`, true},
	{`{"quantity":0}`, true},
	{`{"quantity":999999999}`, true},
	{`{"quantity":1234567890}`, false}, // ten digits
	{`{"quantity":01}`, false},
	{`{"quantity":-1}`, false},
	{`{"quantity":1.0}`, false},
	{`{"quantity":1e2}`, false},
	{`{"quantity":null}`, false},
	{`{"quantity":"1"}`, false},
	{`{"Quantity":1}`, false}, // encoding/json matches keys in any case
	{`{"quantity":1,"quantity":2}`, false},
	{`{"item":"a\"b","quantity":1}`, false},
	{`{"item":"é","quantity":1}`, false},
	{`{"quantity":1,}`, false},
	{`{"quantity":1}{}`, false},
	{`{"quantity":1} x`, false},
	{`{"quantity":1,"extra":true}`, false},
	{`{"quantity":1x}`, false},
	{`[]`, false},
	{``, false},
	{`{`, false},
	{`{"quantity":`, false},
	{`{"item":"abc`, false},
}

// The fast path takes the bodies clients send and leaves the rest to the
// decoder; what it takes, it reads as the decoder does.
func TestParseOrderBody_plainBodiesFast_restToTheDecoder(t *testing.T) {
	for _, tc := range orderBodies {
		got, ok := parseOrderBody([]byte(tc.body))
		if ok != tc.fast {
			t.Errorf("%q: fast %v, want %v", tc.body, ok, tc.fast)
			continue
		}
		if ok {
			sameAsDecoder(t, tc.body, got)
		}
	}
}

func sameAsDecoder(t *testing.T, body string, got orderBody) {
	t.Helper()
	var want orderBody
	if err := decodeRaw([]byte(body), &want); err != nil {
		t.Fatalf("%q: the fast path took it, the decoder refuses it: %v", body, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q: fast %+v (quantity %v), decoder %+v (quantity %v)", body, got, deref(got.Quantity), want, deref(want.Quantity))
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func FuzzParseOrderBody(f *testing.F) {
	for _, tc := range orderBodies {
		f.Add(tc.body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if got, ok := parseOrderBody([]byte(body)); ok {
			sameAsDecoder(t, body, got)
		}
	})
}

func BenchmarkOrderBody(b *testing.B) {
	raw := []byte(`{"item":"RED-M","quantity":1}`)
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var req orderBody
			if err := decodeRaw(raw, &req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parseOrderBody", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := parseOrderBody(raw); !ok {
				b.Fatal("not taken")
			}
		}
	})
}
