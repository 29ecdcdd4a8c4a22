package webhook

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flashsale/flashsale/internal/refusal"
)

// The package's errors; a refusal (internal/refusal) of one of them carries
// the message for the caller.
var (
	ErrInvalid     = errors.New("webhook: invalid")
	ErrNotFound    = errors.New("webhook: not found")
	ErrConflict    = errors.New("webhook: conflict")
	ErrUnavailable = errors.New("webhook: unavailable") // the store or the queue failed: try again
)

// Endpoint is a shop's receiver of events: where they are sent, which, and
// the secrets they are signed with.
type Endpoint struct {
	ID          int64
	URL         string
	Description string
	// Events are the types it receives; ["*"] is every type, present and
	// future.
	Events  []string
	Enabled bool
	// DisabledReason says why a disabled endpoint is: DisabledFailing when
	// the worker disabled it, "" when an admin did (or it is enabled).
	DisabledReason string
	// Secret signs every delivery; PreviousSecret signs them too until
	// PreviousUntil (a rotation's window), so receivers switch at their pace.
	Secret         string
	PreviousSecret string
	PreviousUntil  time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// DisabledFailing is the DisabledReason of an endpoint the worker disabled:
// a delivery's whole retry schedule failed and the endpoint answered no
// 2xx to anything meanwhile.
const DisabledFailing = "failing"

// Subscribes reports whether e receives events of type t.
func (e Endpoint) Subscribes(t Type) bool {
	return slices.Contains(e.Events, allTypesWildcard) || slices.Contains(e.Events, string(t))
}

// Secrets are the secrets that sign a delivery at now: the current one,
// and the previous one during a rotation's window.
func (e Endpoint) Secrets(now time.Time) []string {
	if e.PreviousSecret != "" && now.Before(e.PreviousUntil) {
		return []string{e.Secret, e.PreviousSecret}
	}
	return []string{e.Secret}
}

// secretPrefix marks a Standard Webhooks secret; the rest is base64.
const secretPrefix = "whsec_"

// NewSecret returns a new signing secret: "whsec_" and 32 random bytes in
// base64, the form the spec's libraries take.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux (Go 1.24+ crashes instead)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Limits of an endpoint's fields.
const (
	MaxURLLen         = 2048
	MaxDescriptionLen = 255
)

// checkURL says what is wrong with raw as an endpoint's URL, or nil: an
// absolute http or https URL with a host, no credentials, no fragment.
// Whether its host is a public address is the Guard's to say.
func checkURL(raw string) error {
	bad := func(format string, args ...any) error {
		return refusal.OfField(ErrInvalid, "url", "url: "+format, args...)
	}
	if raw == "" {
		return bad("is required")
	}
	if len(raw) > MaxURLLen {
		return bad("is %d bytes; at most %d", len(raw), MaxURLLen)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return bad("is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return bad("must be http or https, not %q", u.Scheme)
	case u.Hostname() == "":
		return bad("has no host")
	case u.User != nil:
		return bad("must not carry credentials: each delivery is signed with the endpoint's secret")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return bad("must not have a fragment")
	}
	return nil
}

// checkEvents returns the event types of a request, sorted and without
// repeats, or why they are not: some, each a known type, or "*" alone.
func checkEvents(events []string) ([]string, error) {
	bad := func(format string, args ...any) error {
		return refusal.OfField(ErrInvalid, "events", "events: "+format, args...)
	}
	if len(events) == 0 {
		return nil, bad(`list at least one event type, or "*" for all`)
	}
	out := make([]string, 0, len(events))
	for _, e := range events {
		if e != allTypesWildcard && !Known(Type(e)) {
			return nil, bad("%q is not an event type", e)
		}
		out = append(out, e)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 1 && slices.Contains(out, allTypesWildcard) {
		return nil, bad(`"*" is every type: list it alone`)
	}
	return out, nil
}

// checkDescription says what is wrong with an endpoint's description.
func checkDescription(d string) error {
	if n := utf8.RuneCountInString(d); n > MaxDescriptionLen || !utf8.ValidString(d) {
		return refusal.OfField(ErrInvalid, "description", "description: at most %d characters of UTF-8", MaxDescriptionLen)
	}
	return nil
}
