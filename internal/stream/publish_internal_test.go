package stream

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/webhook"
)

// The publisher's hand-written message reads back, through the hub's
// json.Unmarshal, as json.Marshal's of the same items does: quotes,
// backslashes, control characters, HTML's characters, bytes that are not
// UTF-8, empty and nil fields, real order events.
func TestAppendItems_readsBackAsJSONMarshal(t *testing.T) {
	o := order.Order{No: "42-0CF3YH0AB7J8Q2RS5DW1K9X3TG", ActivityID: 42, UserID: 7, Quantity: 1, AmountCents: 990,
		Status: order.Paid, CreatedAt: time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC), PaidAt: time.Date(2026, 11, 29, 10, 1, 0, 0, time.UTC)}
	items := OrderItems(webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: "S\"<&>", Currency: "cny"}))
	items = append(items,
		Item{Topics: []string{"a\"b\\c", "line\nbreak\r\ttab\x01\x1f", "<script>&", "bad \xff\xfe utf8", "日本語 \u2028"},
			Subject: "s\"", Seq: -5, ID: "", Name: "n\\", Data: json.RawMessage(`{"k":"v\\n","x":[1,2,{"y":null}]}`)},
		Item{},
		Item{Topics: []string{}, Data: json.RawMessage(`"str"`)},
	)
	var got, want []Item
	if err := json.Unmarshal(appendItems(nil, items), &got); err != nil {
		t.Fatalf("the message does not read: %v\n%s", err, appendItems(nil, items))
	}
	marshalled, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(marshalled, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back:\n%+v\nwant:\n%+v", got, want)
	}
}

// BenchmarkPublishEncode: a batch of 100 orders' events encoded as the
// publisher sends them, by json.Marshal before and by appendItems now.
//
//	go test -run XXX -bench PublishEncode -benchmem ./internal/stream/
func BenchmarkPublishEncode(b *testing.B) {
	var events []webhook.Event
	for i := range 100 {
		o := order.Order{No: order.NewNo(42), ActivityID: 42, UserID: int64(i + 1), Quantity: 1, AmountCents: 990,
			Status: order.PendingPayment, CreatedAt: time.Now()}
		events = append(events, webhook.OrderEvents(webhook.OrderChange{Order: o, SKU: "LOAD-1", Currency: "cny"})...)
	}
	items := OrderItems(events)
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(items); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendItems", func(b *testing.B) {
		for b.Loop() {
			_ = appendItems(nil, items)
		}
	})
	b.Run("appendItems, sized", func(b *testing.B) {
		for b.Loop() {
			_ = appendItems(make([]byte, 0, itemsSize(items)), items)
		}
	})
}
