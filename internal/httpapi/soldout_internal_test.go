package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/activity"
)

// The sold-out gate's canned refusal is what a handler's fail answers for
// activity.ErrSoldOut (the order path's own sold-out), byte for byte.
func TestSoldOut_isWhatFailAnswers(t *testing.T) {
	serve := func(h gin.HandlerFunc) *httptest.ResponseRecorder {
		r := gin.New()
		r.POST("/", h)
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
		return w
	}
	want := serve(func(c *gin.Context) { fail(c, activity.ErrSoldOut) })
	got := serve(soldOut.Write)
	if got.Code != http.StatusConflict || got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) ||
		got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
		t.Fatalf("gate %d %q %q, fail %d %q %q", got.Code, got.Header().Get("Content-Type"), got.Body,
			want.Code, want.Header().Get("Content-Type"), want.Body)
	}
	if !bytes.Contains(got.Body.Bytes(), []byte(`"code":"SOLD_OUT"`)) {
		t.Fatalf("body %q", got.Body)
	}
}
