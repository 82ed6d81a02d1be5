//go:build race

package strata

const raceEnabled = true
