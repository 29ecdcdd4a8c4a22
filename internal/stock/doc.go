// Package stock keeps flash-sale and group-buy stock in Redis while a sale
// runs: atomic reserve and release scripts, per-user limits, and the local
// sold-out flag. It arrives with the activities issue.
package stock
