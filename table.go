package strata

import (
	"github.com/strata-db/strata/fresh"
	"github.com/strata-db/strata/memory"
)

// The tier the states read and write today: one FreshTable per Store. Names are aliased so
// that the state code reads the same when slices and the LSM store join the read path.
type (
	table   = fresh.Table
	status  = fresh.Status
	mapIter = fresh.MapIter
)

const found = fresh.Found

func newTable(pool *memory.Pool) (*table, error) { return fresh.New(fresh.Options{Pool: pool}) }
