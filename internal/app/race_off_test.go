//go:build !race

package app_test

const raceOn = false
