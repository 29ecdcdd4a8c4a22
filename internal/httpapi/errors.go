package httpapi

import (
	"errors"

	"github.com/flashsale/flashsale/internal/activity"
	"github.com/flashsale/flashsale/internal/httperr"
	"github.com/flashsale/flashsale/internal/stock"
)

// apiError translates a domain or adapter error into what the client sees;
// the one place where errors cross into HTTP. Anything unknown stays an
// internal error (logged with its detail by httperr.Write).
func apiError(err error) error {
	var fe *activity.FieldError
	switch {
	case errors.As(err, &fe):
		return httperr.New(httperr.InvalidArgument, "%s", fe.Error())
	case errors.Is(err, activity.ErrNotFound):
		return httperr.New(httperr.NotFound, "activity not found")
	case errors.Is(err, activity.ErrInvalid), errors.Is(err, stock.ErrInvalid):
		return httperr.New(httperr.InvalidArgument, "%s", err.Error())
	case errors.Is(err, activity.ErrConflict):
		return httperr.New(httperr.Conflict, "%s", err.Error())
	case errors.Is(err, activity.ErrSoldOut):
		return httperr.New(httperr.SoldOut, "sold out")
	case errors.Is(err, activity.ErrLimitExceeded):
		return httperr.New(httperr.LimitExceeded, "over the per-user limit")
	case errors.Is(err, activity.ErrNotStarted):
		return httperr.New(httperr.NotStarted, "the sale has not started")
	case errors.Is(err, activity.ErrEnded):
		return httperr.New(httperr.Ended, "the sale has ended")
	case errors.Is(err, stock.ErrUnavailable):
		return &httperr.Error{Code: httperr.Unavailable, Message: "stock is unavailable, try again", Cause: err}
	}
	return err
}
