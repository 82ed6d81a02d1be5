package lsm

import (
	"context"
	"fmt"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// ttlEntries returns n KindValue entries of state 1 stamped ts, orders from..from+n-1.
func ttlEntries(from uint64, n int, seq uint64, ts int64) []base.Entry {
	var es []base.Entry
	for i := range n {
		o := from + uint64(i)
		es = append(es, base.Entry{Order: o, Hash: o, Seq: seq, Kind: base.KindValue,
			Key: fmt.Appendf([]byte{0, 0, 0, 1}, "k%d", o), Value: base.AppendTS(nil, ts)})
	}
	return es
}

// levelEntries counts the entries of the files of level l.
func levelEntries(d *DB, l int) (n int64) {
	for _, t := range d.current.levels[l] {
		n += t.meta.Entries
	}
	return n
}

// TestPickExpired: a due L0 file gets the L0 compaction; a due file below L0 is rewritten in
// place, alone, at its level; nothing is picked before data expires or again after the
// sweep; files found at Open are due at the caller's bound.
func TestPickExpired(t *testing.T) {
	now := int64(0)
	tab := base.NewTTLTable(func() int64 { return now }, map[uint16]base.TTLState{
		1: {TTL: 10, Layout: base.TTLValue, Compaction: true, ReclaimWithin: 20}})
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	opts.NumLevels = 3
	opts.Expiry = tab.Note
	opts.NewFilter = func(sweep bool) CompactionFilter {
		f := &base.TTLFilter{Table: tab}
		return func(e *base.Entry, bottom bool) (base.Decision, *base.Entry) {
			if d, ne := DefaultFilter(e, bottom); d != base.FilterKeep {
				return d, ne
			}
			f.Bottom = bottom
			return f.Filter(e)
		}
	}
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	installBatch(t, d, ttlEntries(1, 20, 1, 0), 1)    // expires at 10
	installBatch(t, d, ttlEntries(100, 20, 2, 50), 2) // expires at 60
	if j := d.PickExpired(9, 1<<62); j != nil {
		t.Fatalf("picked %v before anything expired", j)
	}
	now = 10
	if _, due, exp := d.ExpiryStats(now, 1<<62); due == 0 || exp != 20*base.TSLen {
		t.Fatalf("ExpiryStats: %d due bytes, %d expired bytes", due, exp)
	}
	j := d.PickExpired(now, 1<<62)
	if j == nil || !j.Sweep() || j.Level() != 0 || j.OutputLevel() != 1 {
		t.Fatalf("L0 sweep job: %v", j)
	}
	if d.PickExpired(now, 1<<62) != nil {
		t.Fatal("a second job while L0 and L1 are busy")
	}
	runJob(t, d, j)
	if n := levelEntries(d, 1); n != 20 || len(d.current.levels[0]) != 0 {
		t.Fatalf("after the L0 sweep: %d entries in L1, %d L0 files", n, len(d.current.levels[0]))
	}
	if j := d.PickExpired(now, 1<<62); j != nil {
		t.Fatalf("picked %v again after the sweep", j)
	}
	// An L1 file expiring at 30 over an L2 file expiring at 60 that overlaps it: the L1 file
	// is rewritten in place, alone, not at the bottom (its expired values become
	// tombstones, hiding the older versions below); the L2 file is not read.
	runJob(t, d, d.CompactLevel(1))
	installBatch(t, d, ttlEntries(110, 20, 3, 20), 3)
	runJob(t, d, d.CompactLevel(0))
	now = 30
	j = d.PickExpired(now, 1<<62)
	if j == nil || j.Level() != 1 || j.OutputLevel() != 1 || len(j.inputs[0]) != 1 || len(j.inputs[1]) != 0 || j.Bottom() {
		t.Fatalf("in-place job: %v (bottom %v)", j, j != nil && j.Bottom())
	}
	runJob(t, d, j)
	if n, tb := levelEntries(d, 1), d.current.levels[1][0].meta.Tombstones; n != 20 || tb != 20 {
		t.Fatalf("L1 after its sweep: %d entries, %d tombstones; want 20 tombstones", n, tb)
	}
	if n := levelEntries(d, 2); n != 20 {
		t.Fatalf("L2: %d entries", n)
	}
	// At 60 the L2 file is due: in place at the last level, at the bottom.
	now = 60
	j = d.PickExpired(now, 1<<62)
	if j == nil || j.Level() != 2 || j.OutputLevel() != 2 {
		t.Fatalf("last-level job: %v", j)
	}
	runJob(t, d, j)
	if n := levelEntries(d, 2); n != 0 {
		t.Fatalf("L2 holds %d entries after its sweep", n)
	}
	// Files found at Open have no summary: due at unknownAt.
	installBatch(t, d, ttlEntries(500, 5, 4, 1000), 4)
	persistClose(t, d)
	if d, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if j := d.PickExpired(now, now+1); j != nil {
		t.Fatalf("an unknown file picked before its bound: %v", j)
	}
	if !d.Overlaps(500, 500) || d.Overlaps(600, 700) {
		t.Fatal("Overlaps")
	}
	jobs := 0
	for j := d.PickExpired(now, now); j != nil; j = d.PickExpired(now, now) {
		if jobs++; jobs > 3 {
			t.Fatalf("unknown files rewritten over and again: %v", j)
		}
		runJob(t, d, j)
	}
	if jobs == 0 {
		t.Fatal("no unknown file picked at its bound")
	}
	known := func() (n, all int) {
		for _, files := range d.current.levels {
			for _, f := range files {
				all++
				if f.expKnown {
					n++
				}
			}
		}
		return n, all
	}
	if n, all := known(); n != all || all == 0 {
		t.Fatalf("%d of %d files with a summary after their sweep", n, all)
	}
	// ForgetExpiry: every file is due at the bound again, and a job in flight across it
	// installs outputs without a summary.
	d.ForgetExpiry()
	if n, _ := known(); n != 0 {
		t.Fatalf("%d files kept their summary after ForgetExpiry", n)
	}
	j = d.PickExpired(now, now)
	if j == nil {
		t.Fatal("nothing picked after ForgetExpiry")
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	d.ForgetExpiry()
	if err := d.InstallCompaction(j); err != nil {
		t.Fatal(err)
	}
	if n, _ := known(); n != 0 {
		t.Fatalf("a job run across ForgetExpiry installed %d files with a summary", n)
	}
}
