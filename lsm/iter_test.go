package lsm

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/strata-db/strata/internal/base"
)

// checkIter compares DB.NewIter over a few order ranges with what the current version's tables
// hold inside their clip ranges, read table by table: the same entries (every version), in
// entry order, none outside a table's clip or the range asked for. One Iter is reused across
// the ranges (Release between them, as a key scan does between its steps), and the version's
// refcount is back where it was after Close.
func checkIter(d *DB, rng *rand.Rand) error {
	refs := d.current.refs
	it := d.NewIter()
	defer it.Close()
	ranges := [][2]uint64{{0, ^uint64(0)}}
	for range 3 {
		a, b := rng.Uint64(), rng.Uint64()
		ranges = append(ranges, [2]uint64{min(a, b), max(a, b)})
	}
	for _, r := range ranges {
		var want []string
		for _, files := range d.current.levels {
			for _, t := range files {
				ti := t.r.NewIter()
				for ti.Next() {
					e := ti.Entry()
					if e.Order >= max(r[0], t.meta.MinOrder) && e.Order <= min(r[1], t.meta.MaxOrder) {
						want = append(want, entryString(e))
					}
				}
				if err := ti.Err(); err != nil {
					return err
				}
				ti.Close()
			}
		}
		if err := it.Reset(r[0], r[1]); err != nil {
			return err
		}
		if d.current.refs != refs+1 {
			return fmt.Errorf("Iter.Reset: version refs %d, want %d", d.current.refs, refs+1)
		}
		var got []string
		var prev base.Entry
		for it.Next() {
			e := it.Entry()
			if len(got) > 0 && base.Compare(&prev, e) > 0 {
				return fmt.Errorf("Iter [%#x, %#x]: %s after %s", r[0], r[1], entryString(e), got[len(got)-1])
			}
			prev = copyEntry(e)
			got = append(got, entryString(e))
		}
		if err := it.Err(); err != nil {
			return err
		}
		it.Release()
		if d.current.refs != refs {
			return fmt.Errorf("Iter.Release: version refs %d, want %d", d.current.refs, refs)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("Iter [%#x, %#x]: %d entries, want %d", r[0], r[1], len(got), len(want))
		}
	}
	return nil
}

func entryString(e *base.Entry) string {
	return fmt.Sprintf("%016x/%s/%s/%d/%v/%x", e.Order, e.Key, e.UserKey, e.Seq, e.Kind, e.Value)
}
