package app_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flashsale/flashsale/internal/testenv"
)

// The console's items, restock and pause, in a real browser on a real
// stack: a sale of three items made in the form (an item's bad stock shown
// beside that item's field), published, its stock item by item on the live
// page as shoppers buy, an item restocked from the page, and the sale
// paused and resumed from it — the shop refusing PAUSED meanwhile.
func TestConsole_items_restockAndPause(t *testing.T) {
	chromium := testenv.Chromium(t)
	s := newStack(t, "")
	s.worker()
	b := newBrowser(t, chromium, s.base)
	b.open("/admin")
	b.waitVisible("#token")
	b.signIn(adminToken)
	b.waitText("#list-total", contains("activit"))

	b.click("#new-link")
	b.waitVisible("#activity-form")
	b.fill("#f-name", "Phone X in three colours")
	b.fill("#f-per_user_limit", "2")
	b.set("#f-starts_at", time.Now().UTC().Add(-2*time.Minute).Truncate(time.Minute).Format("2006-01-02T15:04"))
	b.set("#f-ends_at", time.Now().UTC().Add(time.Hour).Truncate(time.Minute).Format("2006-01-02T15:04"))
	row := func(i int, field string) string {
		return fmt.Sprintf("#item-rows .item-row:nth-child(%d) .i-%s", i+1, field)
	}
	for i, it := range [][]string{{"RED", "Red", "99900", "2"}, {"BLUE", "Blue", "89900", "0"}, {"GOLD", "Gold", "129900", "1"}} {
		b.click("#add-item")
		for j, f := range []string{"sku", "label", "price_cents", "stock"} {
			b.fill(row(i, f), it[j])
		}
	}
	if b.visible("#f-sku") || b.visible("#f-total_stock") {
		t.Fatal("with items, the one item's fields still show")
	}
	b.click("#form-submit")
	b.waitText(`#item-rows .item-row:nth-child(2) .e-stock`, contains("must be between 1 and 10000000"))
	if b.attr(row(1, "stock"), "aria-invalid") != "true" || b.text("#form-error") != "" {
		t.Fatalf("the error is not beside items[1].stock: form %q", b.text("#form-error"))
	}
	b.fill(row(1, "stock"), "3")
	b.click("#form-submit")
	b.waitText("#live-status", is("draft"))
	id, err := strconv.ParseInt(strings.TrimPrefix(b.hash(), "#/activities/"), 10, 64)
	if err != nil {
		t.Fatalf("after creating, the page is %q", b.hash())
	}
	b.click("#live-publish")
	b.waitVisible("#confirm")
	b.click("#confirm-ok")
	b.waitText("#live-status", is("published"))
	b.waitText("#stock-remaining", is("6"))
	b.waitFor("three items listed", func() string { return strconv.Itoa(b.count("#items-live-rows tr")) }, is("3"))

	order := func(user int64, item string) reply {
		return s.call("POST", fmt.Sprintf("/v1/activities/%d/orders", id), s.bearer(user), fmt.Sprintf(`{"item":%q,"quantity":1}`, item))
	}
	for u := int64(1); u <= 2; u++ {
		if r := order(u, "RED"); r.code != 202 {
			t.Fatalf("a red: %d %v", r.code, r.body)
		}
	}
	b.waitText(`#items-live-rows tr[data-sku="RED"] .item-left`, is("0"))
	b.waitText(`#items-live-rows tr[data-sku="RED"] .item-sold`, is("2"))
	if r := order(3, "RED"); r.code != 409 || r.errCode() != "SOLD_OUT" {
		t.Fatalf("a red, none left: %d %v", r.code, r.body)
	}

	// Restocked from the page: sells again.
	b.set("#restock-item", "RED")
	b.fill("#restock-add", "5")
	b.click("#restock-form button[type=submit]")
	b.waitText("#restock-message", contains("its stock is 7"))
	b.waitText(`#items-live-rows tr[data-sku="RED"] .item-left`, is("5"))
	b.waitText(`#items-live-rows tr[data-sku="RED"] .item-stock`, is("7"))
	if r := order(3, "RED"); r.code != 202 {
		t.Fatalf("a red after the restock: %d %v", r.code, r.body)
	}

	// Paused from the page: the shop refuses; resumed, it sells.
	b.click("#live-pause")
	b.waitVisible("#live-paused")
	b.waitVisible("#live-resume")
	if r := order(4, "GOLD"); r.code != 409 || r.errCode() != "PAUSED" {
		t.Fatalf("an order while paused: %d %v", r.code, r.body)
	}
	b.click("#live-resume")
	b.waitVisible("#live-pause")
	if b.visible("#live-paused") {
		t.Fatal("resumed, the page still says paused")
	}
	if r := order(4, "GOLD"); r.code != 202 {
		t.Fatalf("an order once resumed: %d %v", r.code, r.body)
	}
	atPhoneWidth(b, "the live page of a sale of items")
}
