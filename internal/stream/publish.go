// Package stream carries events from the process that commits them (the
// worker) to the Server-Sent Events streams the api processes serve
// (issue 42, docs/streams.md): a Publisher that sends a batch of committed
// events as one message per pub/sub shard, and a Hub in each api process
// that holds one Redis subscription per shard (never one per client) and
// fans the events out to its local subscribers by topic.
//
// The hub is generic over topics: an order's stream subscribes to
// OrderTopic(no); the waiting room's queue stream will subscribe to a topic
// of its own and publish with PublishItems. Pub/sub delivers at most once:
// a subscriber is told to catch up (Subscription.Resync) whenever its shard's
// subscription was re-established, and reads what it missed from the
// durable record (for orders, the webhooks' outbox in MySQL).
package stream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/webhook"
)

// Item is one event as a stream shows it, and the topics it is for.
type Item struct {
	// Topics are the streams it goes to (OrderTopic, …).
	Topics []string `json:"t"`
	// Subject and Seq say where it stands: the Seq'th event of Subject (an
	// order number, a group id). A stream skips what it has sent.
	Subject string `json:"s"`
	Seq     int64  `json:"q"`
	// ID is the event's stable id (webhook.ID).
	ID string `json:"i"`
	// Name is the SSE event name: the event type (order.paid, …).
	Name string `json:"n"`
	// Data is the SSE data: one line of JSON (for an order event, the
	// webhook's body, byte for byte).
	Data json.RawMessage `json:"d"`
	// durable: read from the outbox, not received live (a gap in a live
	// item's sequence sends its stream to the outbox; the outbox's own
	// never do).
	durable bool
}

// OrderTopic is the topic of order no's stream.
func OrderTopic(no string) string { return "order:" + no }

// ItemOf is event e as a stream item for topics.
func ItemOf(e webhook.Event, topics ...string) Item {
	data := e.Body
	if bytes.ContainsAny(data, "\r\n") { // SSE data is one line: compact it (json.Marshal's never has one)
		var b bytes.Buffer
		if json.Compact(&b, data) == nil {
			data = b.Bytes()
		}
	}
	return Item{Topics: topics, Subject: e.Subject, Seq: e.Sequence, ID: e.ID, Name: string(e.Type), Data: data}
}

// OrderItems are the items of events for the order streams: an order's
// events to its order's stream, a group's outcome to each member order's.
// Other events (an activity's, a payment's) have no stream yet and are
// left out.
func OrderItems(events []webhook.Event) []Item {
	out := make([]Item, 0, len(events))
	for _, e := range events {
		switch {
		case strings.HasPrefix(string(e.Type), "order."):
			out = append(out, ItemOf(e, OrderTopic(e.Subject)))
		case e.Type == webhook.GroupSucceeded || e.Type == webhook.GroupFailed:
			var b struct {
				Data struct {
					Members []string `json:"members"`
				} `json:"data"`
			}
			if json.Unmarshal(e.Body, &b) != nil || len(b.Data.Members) == 0 {
				continue
			}
			topics := make([]string, len(b.Data.Members))
			for i, no := range b.Data.Members {
				topics[i] = OrderTopic(no)
			}
			out = append(out, ItemOf(e, topics...))
		}
	}
	return out
}

// ShardOf is the pub/sub shard that carries topic's items.
func ShardOf(topic string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(topic))
	return int(h.Sum32() % rediskeys.StreamShards)
}

// Publisher sends committed events to the api processes' hubs.
type Publisher struct {
	rdb redis.UniversalClient
	// sharded: a Redis Cluster client, which publishes with SPUBLISH (to the
	// shard channel's slot owner only) rather than PUBLISH (which a cluster
	// broadcasts over its bus to every node).
	sharded bool
}

// NewPublisher returns a publisher on rdb.
func NewPublisher(rdb redis.UniversalClient) *Publisher {
	_, sharded := rdb.(*redis.ClusterClient)
	return &Publisher{rdb: rdb, sharded: sharded}
}

// Publish sends events — committed: in MySQL's outbox already, so that a
// stream that misses the message finds them there — to the order streams:
// one message per shard that has any (a batch of a hundred orders is at
// most rediskeys.StreamShards PUBLISHes, in one pipeline). The worker calls
// it after a batch's transaction commits. An error loses nothing durable:
// the streams read the outbox when they connect and after their hub
// resubscribes.
func (p *Publisher) Publish(ctx context.Context, events []webhook.Event) error {
	return p.PublishItems(ctx, OrderItems(events))
}

// PublishItems sends items, each to the shards of its topics.
func (p *Publisher) PublishItems(ctx context.Context, items []Item) error {
	if len(items) == 0 {
		return nil
	}
	var shards [rediskeys.StreamShards][]Item
	for _, it := range items {
		var by [rediskeys.StreamShards][]string
		for _, t := range it.Topics {
			s := ShardOf(t)
			by[s] = append(by[s], t)
		}
		for s, topics := range by {
			if len(topics) > 0 {
				c := it
				c.Topics = topics
				shards[s] = append(shards[s], c)
			}
		}
	}
	pipe := p.rdb.Pipeline()
	for s, its := range shards {
		if len(its) == 0 {
			continue
		}
		msg := appendItems(make([]byte, 0, itemsSize(its)), its)
		if p.sharded {
			pipe.SPublish(ctx, rediskeys.StreamChannel(s), msg)
		} else {
			pipe.Publish(ctx, rediskeys.StreamChannel(s), msg)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("%w: publish: %w", ErrUnavailable, err)
	}
	return nil
}

// appendItems appends items as the JSON array json.Marshal would make of
// them, for the hub's json.Unmarshal, without json.Marshal's reflection and
// its validation and compaction of each item's Data: a worker publishes
// every order's events, and that was 9% of its CPU at a launch (profile,
// issue 43). Data goes in as it is, so it must be JSON (ItemOf's are: an
// event's body, compacted; null when empty).
func appendItems(b []byte, items []Item) []byte {
	b = append(b, '[')
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"t":`...)
		if it.Topics == nil {
			b = append(b, "null"...)
		} else {
			b = append(b, '[')
			for j, t := range it.Topics {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendString(b, t)
			}
			b = append(b, ']')
		}
		b = append(b, `,"s":`...)
		b = appendString(b, it.Subject)
		b = append(b, `,"q":`...)
		b = strconv.AppendInt(b, it.Seq, 10)
		b = append(b, `,"i":`...)
		b = appendString(b, it.ID)
		b = append(b, `,"n":`...)
		b = appendString(b, it.Name)
		b = append(b, `,"d":`...)
		if len(it.Data) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, it.Data...)
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// itemsSize is about the length of appendItems's message of items (more
// when a string needs escapes): one allocation a message.
func itemsSize(items []Item) int {
	size := 2
	for _, it := range items {
		size += len(it.Data) + len(it.Subject) + len(it.ID) + len(it.Name) + 64
		for _, t := range it.Topics {
			size += len(t) + 3
		}
	}
	return size
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, the rest as it is (JSON allows UTF-8 as is; bytes
// that are not UTF-8 read back as U+FFFD, as json.Marshal writes them).
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
