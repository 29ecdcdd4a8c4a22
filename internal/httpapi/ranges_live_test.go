package httpapi_test

import (
	"fmt"
	"strings"
	"testing"
)

// A number out of its field's range — huge, fractional, negative, with an
// exponent — and an id too large or not a number, in a body, a path or a
// query, is 400 INVALID_ARGUMENT naming the field, in a message that states
// the field's own range (1 to 1000 for a quantity), not Go's int64's, and
// calls a plain number past int64 too large, not "not a positive integer".
func TestContract_liveAPI_numbersOutOfRange_are400WithTheFieldsOwnRange(t *testing.T) {
	l := startLiveAPI(t)
	sale, gb := l.sale(t, 10, 0), l.sale(t, 30, 3)
	u := []string{"Authorization", l.bearer(t, 1)}
	admin := []string{"Authorization", "Bearer " + token}
	orders, groups := fmt.Sprintf("/v1/activities/%d/orders", sale), fmt.Sprintf("/v1/activities/%d/groups", gb)
	activity := fmt.Sprintf("/admin/v1/activities/%d", sale)
	const (
		quantity = "quantity: must be a whole number between 1 and 1000"
		written  = ", written without a fraction or exponent"
		anID     = "want an integer from 1 to 9223372036854775807"
	)
	created := func(member string) string {
		return `{"type":"seckill","name":"Phone","sku":"P1","price_cents":500,"total_stock":10,"per_user_limit":1,
			"starts_at":"2026-12-01T10:00:00Z","ends_at":"2026-12-01T11:00:00Z",` + member + `}`
	}
	for _, tc := range []struct {
		name, path, body string // path: "METHOD /path", or a POST's path
		headers          []string
		field, message   string // the message exactly
	}{
		{"a huge quantity", orders, `{"quantity":99999999999999999999}`, u, "quantity", quantity},
		{"a huge negative quantity", orders, `{"quantity":-99999999999999999999}`, u, "quantity", quantity},
		{"a fractional quantity", orders, `{"quantity":1.5}`, u, "quantity", quantity + written},
		{"a quantity with an exponent", orders, `{"quantity":1e3}`, u, "quantity", quantity + written},
		{"a negative quantity", orders, `{"quantity":-1}`, u, "quantity", "quantity must be between 1 and 1000"},
		{"a quantity past the range", orders, `{"quantity":1001}`, u, "quantity", "quantity must be between 1 and 1000"},
		{"a fractional quantity, a group opened", groups, `{"quantity":2.5}`, u, "quantity", quantity + written},
		{"a huge quantity, a group joined", "/v1/groups/g1/join", `{"quantity":1e400}`, u, "quantity", quantity + written},
		{"a fractional total_stock", "/admin/v1/activities", `{"total_stock":1.5}`, admin, "total_stock",
			"total_stock: must be a whole number between 1 and 10000000" + written},
		{"a huge price_cents", "PATCH " + activity, `{"price_cents":99999999999999999999}`, admin, "price_cents",
			"price_cents: must be a whole number between 1 and 100000000000"},
		{"shards with an exponent", "PATCH " + activity, `{"shards":1e1}`, admin, "shards",
			"shards: must be a whole number between 1 and 64" + written},
		{"a negative per_user_limit", "/admin/v1/activities", created(`"per_user_limit":-1`), admin, "per_user_limit",
			"per_user_limit: must be between 1 and 10000"},
		{"a fractional activity_id, a heartbeat", "/v1/presence", `{"activity_id":4.2}`, u, "activity_id",
			"activity_id: must be a whole number between 1 and 9223372036854775807" + written},
		{"an id too large", "GET /v1/activities/99999999999999999999999", "", nil, "id",
			`id "99999999999999999999999" is too large: ` + anID},
		{"an id not a number", "GET /v1/activities/abc", "", nil, "id", `id "abc": ` + anID},
		{"a negative id, an order", "POST /v1/activities/-1/orders", `{"quantity":1}`, u, "id", `id "-1": ` + anID},
		{"an admin id too large", "GET /admin/v1/activities/9223372036854775808", "", admin, "id",
			`id "9223372036854775808" is too large: ` + anID},
		{"a user_id too large", "GET /admin/v1/presence?user_id=99999999999999999999", "", admin, "user_id",
			`user_id "99999999999999999999" is too large: ` + anID},
		{"a huge page", "GET /v1/orders?page=99999999999999999999", "", u, "page",
			`page "99999999999999999999" is too large: want an integer from 1 to 10000`},
		{"a page_size not a number", "GET /admin/v1/activities?page_size=ten", "", admin, "page_size",
			`page_size "ten": want an integer from 1 to 100`},
		{"minutes with an exponent", "GET " + activity + "/series?minutes=1e1", "", admin, "minutes",
			`minutes "1e1": want an integer from 1 to 10`},
	} {
		method, path, found := strings.Cut(tc.path, " ")
		if !found {
			method, path = "POST", tc.path
		}
		a := l.do(t, method, path, tc.body, tc.headers...)
		if a.code != 400 || a.errCode() != "INVALID_ARGUMENT" || a.errorOf("field") != tc.field || a.errorOf("message") != tc.message {
			t.Errorf("%s: %d %v, want 400 INVALID_ARGUMENT, field %q, message %q", tc.name, a.code, a.body, tc.field, tc.message)
		}
	}
}
