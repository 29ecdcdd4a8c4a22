package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/admin"
	"github.com/flashsale/flashsale/internal/apitest"
	"github.com/flashsale/flashsale/internal/connect"
	"github.com/flashsale/flashsale/internal/httpapi"
	"github.com/flashsale/flashsale/internal/mysqlstore"
	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/ordertest"
	"github.com/flashsale/flashsale/internal/rediskeys"
	"github.com/flashsale/flashsale/internal/stock"
	"github.com/flashsale/flashsale/internal/testenv"
	"github.com/flashsale/flashsale/migrations"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const token = "s3cret-admin-token-0123456789abcdef" // 34 bytes: config wants 32 at least

type adminEnv struct {
	url    string
	db     *gorm.DB
	rdb    *redis.Client
	orders *order.Service // to sell through the real order path
	client *http.Client   // checks every exchange against the OpenAPI document
}

func newAdminEnv(t *testing.T, adminToken string, cfg ...admin.Config) *adminEnv {
	t.Helper()
	db, err := connect.MySQL(testenv.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	sqlDB, _ := db.DB()
	t.Cleanup(func() { sqlDB.Close() })
	if err := migrations.Up(context.Background(), sqlDB, nil); err != nil {
		t.Fatal(err)
	}
	rdb := testenv.StartRedis(t).Client(t)
	st := stock.New(rdb, stock.Config{})
	shop := ordertest.On(t, rdb)
	svc := admin.New(mysqlstore.NewActivities(db), st, nil, shop.Store, append(cfg, admin.Config{})[0])
	srv := httptest.NewServer(httpapi.NewRouter(httpapi.Deps{
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Admin: svc, AdminToken: adminToken,
	}))
	t.Cleanup(srv.Close)
	return &adminEnv{url: srv.URL, db: db, rdb: rdb, orders: shop.Service(ordertest.NoTasks{}), client: apitest.Client(t)}
}

// call sends a request with the admin token (auth "" sends no header) and
// decodes the JSON answer.
func (e *adminEnv) call(t *testing.T, method, path, auth, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d, body %q is not a JSON object", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, out
}

func (e *adminEnv) admin(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	return e.call(t, method, path, "Bearer "+token, body)
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (e *adminEnv) count(t *testing.T) int64 {
	t.Helper()
	var n int64
	if err := e.db.Model(&mysqlstore.ActivityRow{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func validBody(extra ...string) string {
	start := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	fields := map[string]string{
		"type": `"seckill"`, "name": `"Phone"`, "sku": `"PH-1"`, "price_cents": "99900", "total_stock": "10",
		"per_user_limit": "2", "starts_at": `"` + start + `"`, "ends_at": `"` + end + `"`,
	}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == "" {
			delete(fields, extra[i])
		} else {
			fields[extra[i]] = extra[i+1]
		}
	}
	parts := []string{}
	for k, v := range fields {
		parts = append(parts, `"`+k+`":`+v)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestAdmin_auth_refusesWithoutTheTokenAndChangesNothing(t *testing.T) {
	e := newAdminEnv(t, token)
	for name, auth := range map[string]string{
		"no header":     "",
		"basic scheme":  "Basic " + token,
		"wrong token":   "Bearer nope",
		"token prefix":  "Bearer " + token[:5],
		"token plus":    "Bearer " + token + "x",
		"lowercase bad": "bearer nope",
	} {
		code, body := e.call(t, "POST", "/admin/v1/activities", auth, validBody())
		if code != 401 || errCode(body) != "UNAUTHENTICATED" {
			t.Errorf("%s: %d %v", name, code, body)
		}
	}
	if n := e.count(t); n != 0 {
		t.Fatalf("refused requests created %d activities", n)
	}

	closed := newAdminEnv(t, "")
	if code, body := closed.call(t, "GET", "/admin/v1/activities", "Bearer ", ""); code != 401 || errCode(body) != "UNAUTHENTICATED" {
		t.Fatalf("admin API without ADMIN_TOKEN: %d %v", code, body)
	}
}

// The scheme of "Authorization: Bearer <token>" is case-insensitive (RFC
// 9110 11.1): "bearer" and "BEARER" are admitted like "Bearer".
func TestAdmin_auth_bearerSchemeInAnyCase_isAdmitted(t *testing.T) {
	e := newAdminEnv(t, token)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		if code, body := e.call(t, "GET", "/admin/v1/activities", scheme+" "+token, ""); code != 200 {
			t.Errorf("%s: %d %v", scheme, code, body)
		}
	}
}

func TestAdmin_create_badInput_isInvalidArgumentAndChangesNothing(t *testing.T) {
	e := newAdminEnv(t, token)
	now := time.Now().UTC().Format(time.RFC3339)
	cases := map[string]string{
		"unknown type":          validBody("type", `"auction"`),
		"zero stock":            validBody("total_stock", "0"),
		"negative stock":        validBody("total_stock", "-3"),
		"absurd stock":          validBody("total_stock", "100000000"),
		"stock beyond int":      validBody("total_stock", "99999999999999999999999"),
		"zero limit":            validBody("per_user_limit", "0"),
		"ends at start":         validBody("starts_at", `"`+now+`"`, "ends_at", `"`+now+`"`),
		"group buy, no group":   validBody("type", `"groupbuy"`),
		"group fields, seckill": validBody("group_size", "3", "group_ttl_seconds", "600"),
		"unknown field":         validBody("discount", "10"),
		"string for a number":   validBody("total_stock", `"10"`),
		"time not RFC 3339":     validBody("starts_at", `"tomorrow"`),
		"missing name":          validBody("name", ""),
		"malformed JSON":        `{"type": "seckill",`,
		"not an object":         `[1, 2]`,
		"two objects":           validBody() + validBody(),
		"empty body":            ``,
		"huge body":             `{"name": "` + strings.Repeat("x", 70<<10) + `"}`,
	}
	for name, body := range cases {
		code, resp := e.admin(t, "POST", "/admin/v1/activities", body)
		msg, _ := resp["error"].(map[string]any)["message"].(string)
		if code != 400 || errCode(resp) != "INVALID_ARGUMENT" || msg == "" {
			t.Errorf("%s: %d %v", name, code, resp)
		}
	}
	if n := e.count(t); n != 0 {
		t.Fatalf("bad requests created %d activities", n)
	}
}

// A validation error names the field at fault as data ("field"), so a form
// can show the message beside it without parsing the message — a member
// the request does not have too; an error of the body as a whole names
// none.
func TestAdmin_badInput_namesTheFieldAtFault(t *testing.T) {
	e := newAdminEnv(t, token)
	now := time.Now().UTC().Format(time.RFC3339)
	for name, tc := range map[string]struct{ body, field string }{
		"zero stock":             {validBody("total_stock", "0"), "total_stock"},
		"zero limit":             {validBody("per_user_limit", "0"), "per_user_limit"},
		"bad sku":                {validBody("sku", `"a b"`), "sku"},
		"ends at start":          {validBody("starts_at", `"`+now+`"`, "ends_at", `"`+now+`"`), "ends_at"},
		"group buy, no group":    {validBody("type", `"groupbuy"`), "group_size"},
		"string for a number":    {validBody("price_cents", `"10"`), "price_cents"},
		"time not RFC 3339":      {validBody("starts_at", `"tomorrow"`), "starts_at"},
		"malformed JSON":         {`{"type": "seckill",`, ""},
		"unknown field":          {validBody("discount", "10"), "discount"},
		"not an object":          {`[1, 2]`, ""},
		"65 shards":              {validBody("shards", "65"), "shards"},
		"more shards than units": {validBody("shards", "11"), "shards"},
		"a group buy in shards":  {validBody("type", `"groupbuy"`, "group_size", "2", "group_ttl_seconds", "60", "shards", "2"), "shards"},
	} {
		code, resp := e.admin(t, "POST", "/admin/v1/activities", tc.body)
		errBody, _ := resp["error"].(map[string]any)
		field, _ := errBody["field"].(string)
		if code != 400 || errCode(resp) != "INVALID_ARGUMENT" || field != tc.field {
			t.Errorf("%s: %d %v; want field %q", name, code, resp, tc.field)
		}
	}
	code, created := e.admin(t, "POST", "/admin/v1/activities", validBody())
	if code != 201 {
		t.Fatalf("create: %d %v", code, created)
	}
	path := fmt.Sprintf("/admin/v1/activities/%d", int64(created["id"].(float64)))
	code, resp := e.admin(t, "PATCH", path, `{"per_user_limit": 0}`)
	if errBody, _ := resp["error"].(map[string]any); code != 400 || errBody["field"] != "per_user_limit" {
		t.Fatalf("a bad patch: %d %v", code, resp)
	}
}

func TestAdmin_lifecycle_createPublishPatchClose(t *testing.T) {
	e := newAdminEnv(t, token)
	ctx := context.Background()
	code, created := e.admin(t, "POST", "/admin/v1/activities", validBody())
	if code != 201 || created["status"] != "draft" || created["payment_ttl_seconds"] != float64(900) {
		t.Fatalf("create: %d %v", code, created)
	}
	id := int64(created["id"].(float64))
	path := "/admin/v1/activities/" + jsonNum(id)

	_, d := e.admin(t, "GET", path, "")
	if d["stock_remaining"] != nil || d["reconciliation"].(map[string]any)["in_sync"] != true {
		t.Fatalf("draft detail: %v", d)
	}

	for range 2 { // publishing twice is the same as once
		if code, p := e.admin(t, "POST", path+"/publish", ""); code != 200 || p["status"] != "published" {
			t.Fatalf("publish: %d %v", code, p)
		}
	}
	if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 1, Quantity: 2}); err != nil {
		t.Fatal(err)
	}
	e.admin(t, "POST", path+"/publish", "")
	_, d = e.admin(t, "GET", path, "")
	if d["stock_remaining"] != float64(8) || d["orders_accepted"] != float64(1) {
		t.Fatalf("after a sale and a re-publish: %v", d)
	}

	before := e.count(t)
	if code, resp := e.admin(t, "PATCH", path, `{"price_cents": 1}`); code != 409 || errCode(resp) != "CONFLICT" {
		t.Fatalf("price change after publish: %d %v", code, resp)
	}
	later := time.Now().Add(3 * time.Hour).UTC().Format(time.RFC3339)
	if code, resp := e.admin(t, "PATCH", path, `{"name": "Phone X", "ends_at": "`+later+`"}`); code != 200 || resp["name"] != "Phone X" {
		t.Fatalf("safe patch after publish: %d %v", code, resp)
	}
	if code, resp := e.admin(t, "PATCH", path, `{"status": "draft"}`); code != 400 || errCode(resp) != "INVALID_ARGUMENT" {
		t.Fatalf("patching status: %d %v", code, resp)
	}
	_, d = e.admin(t, "GET", path, "")
	if d["price_cents"] != float64(99900) || e.count(t) != before {
		t.Fatalf("a refused patch changed something: %v", d)
	}

	if code, c := e.admin(t, "POST", path+"/close", ""); code != 200 || c["status"] != "closed" {
		t.Fatalf("close: %d %v", code, c)
	}
	if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: id, UserID: 2, Quantity: 1}); !errors.Is(err, activity.ErrEnded) {
		t.Fatalf("an order after close: %v", err)
	}
	// A refusal's message is the domain's own, with no Go prefix to cut off.
	code, resp := e.admin(t, "POST", path+"/publish", "")
	if msg, _ := resp["error"].(map[string]any)["message"].(string); code != 409 || errCode(resp) != "CONFLICT" ||
		msg != "a closed activity cannot be published again" {
		t.Fatalf("publish after close: %d %v", code, resp)
	}
	if code, _ := e.admin(t, "POST", path+"/close", ""); code != 200 {
		t.Fatalf("closing twice: %d", code)
	}
	// The order placed above never reached MySQL (no worker here): on
	// its way, not a problem.
	_, d = e.admin(t, "GET", path, "")
	rec := d["reconciliation"].(map[string]any)
	if pending, _ := rec["pending"].(map[string]any); d["status"] != "closed" || rec["state"] != "pending_persistence" || rec["in_sync"] != false ||
		len(rec["problems"].([]any)) != 0 || pending["orders"] != float64(1) || pending["units"] != float64(2) {
		t.Fatalf("closed detail: %v", d)
	}
}

// The list says what is left of each sale beside its total: a sold-out
// sale 0 of its total (not the total), a closed one what it closed with,
// a draft, not on sale, nothing.
func TestAdmin_list_showsWhatIsLeftOfEachSale_soldOutAsZero(t *testing.T) {
	e := newAdminEnv(t, token)
	ctx := context.Background()
	ids := map[string]int64{}
	for _, name := range []string{"sold out", "closed", "draft"} {
		_, a := e.admin(t, "POST", "/admin/v1/activities", validBody("name", `"`+name+`"`, "total_stock", "4"))
		ids[name] = int64(a["id"].(float64))
	}
	for _, name := range []string{"sold out", "closed"} {
		if code, p := e.admin(t, "POST", "/admin/v1/activities/"+jsonNum(ids[name])+"/publish", ""); code != 200 {
			t.Fatalf("publish: %d %v", code, p)
		}
	}
	for user := int64(1); user <= 2; user++ {
		if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: ids["sold out"], UserID: user, Quantity: 2}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.orders.Place(ctx, order.PlaceRequest{ActivityID: ids["closed"], UserID: 1, Quantity: 1}); err != nil {
		t.Fatal(err)
	}
	e.admin(t, "POST", "/admin/v1/activities/"+jsonNum(ids["closed"])+"/close", "")

	_, page := e.admin(t, "GET", "/admin/v1/activities", "")
	want := map[string]any{"sold out": float64(0), "closed": float64(3), "draft": nil}
	for _, it := range page["items"].([]any) {
		a := it.(map[string]any)
		name := a["name"].(string)
		if left, ok := a["stock_remaining"]; !ok || left != want[name] || a["total_stock"] != float64(4) {
			t.Errorf("%s listed with stock_remaining %v (present: %v) of total_stock %v, want %v of 4", name, left, ok, a["total_stock"], want[name])
		}
		delete(want, name)
	}
	if len(want) != 0 {
		t.Fatalf("not listed: %v", want)
	}
}

func TestAdmin_list_pagesAndFilters_andBadIDs(t *testing.T) {
	e := newAdminEnv(t, token)
	for range 5 {
		e.admin(t, "POST", "/admin/v1/activities", validBody())
	}
	e.admin(t, "POST", "/admin/v1/activities/1/publish", "")
	_, page := e.admin(t, "GET", "/admin/v1/activities?page=3&page_size=2", "")
	if items := page["items"].([]any); len(items) != 1 || page["total"] != float64(5) {
		t.Fatalf("page 3 of 2: %v", page)
	}
	_, pub := e.admin(t, "GET", "/admin/v1/activities?status=published", "")
	if pub["total"] != float64(1) {
		t.Fatalf("published filter: %v", pub)
	}
	for path, want := range map[string]int{
		"/admin/v1/activities?page_size=0":                            400,
		"/admin/v1/activities?page_size=1000":                         400,
		"/admin/v1/activities?page=x":                                 400,
		"/admin/v1/activities?page=10001":                             400, // deep offsets cost a scan
		"/admin/v1/activities?page=4611686018427387904&page_size=100": 400, // the offset overflowed
		"/admin/v1/activities?status=sold":                            400,
		"/admin/v1/activities/abc":                                    400,
		"/admin/v1/activities/-1":                                     400,
		"/admin/v1/activities/999":                                    404,
		"/admin/v1/activities/0099999999999999":                       400,
	} {
		if code, resp := e.admin(t, "GET", path, ""); code != want || errCode(resp) == "" {
			t.Errorf("%s: %d %v, want %d", path, code, resp, want)
		}
	}
}

func jsonNum(n int64) string { b, _ := json.Marshal(n); return string(b) }

// A sale in shards: the shards asked for are kept and answered, each shard
// loaded into Redis with its share at publishing, and fixed from then on.
func TestAdmin_shards_keptLoadedAndFixedAfterPublishing(t *testing.T) {
	e := newAdminEnv(t, token)
	code, created := e.admin(t, "POST", "/admin/v1/activities", validBody("shards", "3"))
	if code != 201 || created["shards"] != float64(3) {
		t.Fatalf("create in 3 shards: %d %v", code, created)
	}
	id := int64(created["id"].(float64))
	path := fmt.Sprintf("/admin/v1/activities/%d", id)
	if code, resp := e.admin(t, "PATCH", path, `{"shards": 2}`); code != 200 || resp["shards"] != float64(2) {
		t.Fatalf("a draft's shards changed: %d %v", code, resp)
	}
	if code, resp := e.admin(t, "POST", path+"/publish", ""); code != 200 {
		t.Fatalf("publish: %d %v", code, resp)
	}
	ctx := context.Background()
	for sh, want := range []int64{5, 5} {
		if n, err := e.rdb.Get(ctx, rediskeys.ForShard(id, sh, 2).Stock).Int64(); err != nil || n != want {
			t.Fatalf("shard %d holds %d (%v), want %d", sh, n, err, want)
		}
	}
	if n := e.rdb.Exists(ctx, rediskeys.ForShard(id, 2, 3).Meta).Val(); n != 0 {
		t.Fatal("a third shard was loaded")
	}
	if code, resp := e.admin(t, "PATCH", path, `{"shards": 4}`); code != 409 {
		t.Fatalf("shards changed after publishing: %d %v", code, resp)
	}
	code, plain := e.admin(t, "POST", "/admin/v1/activities", validBody())
	if code != 201 || plain["shards"] != float64(1) {
		t.Fatalf("a sale naming no shards: %d %v, want shards 1", code, plain)
	}
}
