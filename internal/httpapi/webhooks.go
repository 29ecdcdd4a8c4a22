package httpapi

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/payment"
)

// maxWebhookBody bounds a webhook's body: Stripe's events are a few KB.
const maxWebhookBody = 256 << 10

// registerWebhooks serves POST /webhooks/{provider}: the payment
// provider's events, outside /v1's token and rate limits — the signature is
// their authentication (payment.Service.HandleEvent verifies it), and a
// provider sends from its own addresses, in bursts.
func registerWebhooks(r *gin.Engine, deadline gin.HandlerFunc, svc *payment.Service) {
	r.POST("/webhooks/:provider", deadline, func(c *gin.Context) {
		if c.Param("provider") != svc.Provider() {
			httperr.Write(c, httperr.New(httperr.NotFound, "no payment provider %q here", c.Param("provider")))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, maxWebhookBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				httperr.Write(c, httperr.New(httperr.InvalidArgument, "a webhook's body is at most %d bytes", maxWebhookBody))
				return
			}
			fail(c, err)
			return
		}
		if err := svc.HandleEvent(c.Request.Context(), body, c.Request.Header); err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"received": true})
	})
}
