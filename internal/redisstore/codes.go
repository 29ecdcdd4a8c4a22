package redisstore

import (
	"fmt"

	"github.com/flashsale/flashsale/internal/order"
	"github.com/flashsale/flashsale/internal/refusal"
	"github.com/flashsale/flashsale/internal/stock"
)

// The scripts' return codes beyond the sale's 1-5 (stock.SaleRefusal),
// turned into the order domain's errors here and nowhere else.

// enterCodes are accept.lua's, open_group.lua's and join_group.lua's.
var enterCodes = map[int64]error{
	9:  order.ErrGroupNotFound,
	10: order.ErrGroupClosed,
	11: order.ErrAlreadyMember,
	12: order.ErrGroupFull,
	13: order.ErrNumberTaken,
}

// enterRefusal is the error of an accepting script's code.
func enterRefusal(script string, code int64) error {
	if err, ok := stock.SaleRefusal(code); ok {
		return err
	}
	if code == 8 && script == "accept" {
		return refusal.New(order.ErrWrongType, "a group buy's orders are placed by opening or joining a group")
	}
	if code == 8 {
		return refusal.New(order.ErrWrongType, "groups are for group buys")
	}
	if err, ok := enterCodes[code]; ok {
		return err
	}
	return fmt.Errorf("redisstore: %s returned code %d", script, code)
}

// transitionRefusal is the error of transition.lua's code; status is the
// order's status it returned.
func transitionRefusal(code int64, status string) error {
	switch code {
	case 1:
		return order.ErrNotFound
	case 2:
		return refusal.New(order.ErrConflict, "the order is %s", status)
	case 3:
		return refusal.New(order.ErrConflict, "the payment time is over")
	case 4:
		return refusal.New(order.ErrNotDue, "the payment time is not over yet")
	case 5:
		return refusal.New(order.ErrStale, "a newer change was applied; try again")
	case 6:
		return refusal.New(order.ErrConflict, "the group has not failed")
	case 7:
		return refusal.New(order.ErrGroupClosed, "the group failed or its deadline passed")
	}
	return fmt.Errorf("redisstore: transition.lua returned code %d", code)
}
