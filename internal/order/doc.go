// Package order is the order domain: placing an order under the per-user lock,
// accepting it atomically in Redis, and its lifecycle (pending payment, paid,
// cancelled, refunded) through to MySQL. It arrives with the orders issue.
package order
