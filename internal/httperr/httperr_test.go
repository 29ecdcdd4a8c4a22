package httperr_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
)

// answer runs write in a gin handler and returns what the client got.
func answer(t *testing.T, write func(*gin.Context)) *httptest.ResponseRecorder {
	t.Helper()
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	after := false
	r.GET("/", write, func(*gin.Context) { after = true })
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
	if after {
		t.Fatal("the handler after the answer ran: the request was not aborted")
	}
	return w
}

// A canned answer is, byte for byte, what Write answers for the same error.
func TestCan_answersWhatWriteAnswers(t *testing.T) {
	for _, e := range []*httperr.Error{
		httperr.New(httperr.SoldOut, "sold out"),
		{Code: httperr.InvalidArgument, Message: `quantity "x" is not a number`, Field: "quantity"},
		httperr.New(httperr.LimitExceeded, "at most %d per user <&>", 2),
	} {
		want := answer(t, func(c *gin.Context) { httperr.Write(c, e) })
		got := answer(t, httperr.Can(e).Write)
		if got.Code != want.Code || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) ||
			got.Header().Get("Content-Type") != want.Header().Get("Content-Type") {
			t.Errorf("%v: canned %d %q %q, Write %d %q %q", e, got.Code, got.Header().Get("Content-Type"), got.Body,
				want.Code, want.Header().Get("Content-Type"), want.Body)
		}
		if got.Code != httperr.Status(e.Code) || got.Body.Len() == 0 {
			t.Errorf("%v: canned answer %d %q", e, got.Code, got.Body)
		}
	}
}
