package strata

import (
	"context"
	"testing"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// TestSavepointCanonicalBulk: a canonical savepoint restores in bulk (engine.BulkLoad: L0
// files, no Apply) into a fresh Store, and through Apply when engine.Options.ReplayByApply
// forces it; both read as the model, and as each other, and writes after the bulk restore are
// newer than the restored entries (engine invariant 24): the model still holds after more
// writes and a push down through every tier.
func TestSavepointCanonicalBulk(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	sp := spStorage(t, e)
	r := e.open(nil)
	r.writes(raceScale(6000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(2000))
	h, err := r.st.s.Savepoint(ctx, sp, SavepointCanonical, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.st.s.Close()

	bulk, err := e.restoreFrom(sp, nil, NoClaim, h)
	if err != nil {
		t.Fatal(err)
	}
	defer bulk.st.s.Close()
	if n := bulk.st.s.RestoreStats().BulkFiles; n == 0 {
		t.Fatal("the canonical restore wrote no L0 file in bulk")
	}
	e.opts.adjust = func(eo *engine.Options) { eo.ReplayByApply = true }
	applied, err := e.restoreFrom(sp, nil, NoClaim, h)
	e.opts.adjust = nil
	if err != nil {
		t.Fatal(err)
	}
	defer applied.st.s.Close()
	if n := applied.st.s.RestoreStats().BulkFiles; n != 0 {
		t.Fatalf("engine.Options.ReplayByApply: %d L0 files written in bulk", n)
	}
	if bulk.st.s.RestoreStats().CanonicalEntries != applied.st.s.RestoreStats().CanonicalEntries {
		t.Fatalf("canonical entries: bulk %d, Apply %d", bulk.st.s.RestoreStats().CanonicalEntries, applied.st.s.RestoreStats().CanonicalEntries)
	}
	for name, p := range map[string]*modelRun{"bulk": bulk, "apply": applied} {
		if err := p.st.checkOwned(m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if err := bulk.st.checkSameAs(applied.st); err != nil {
		t.Fatalf("bulk vs Apply: %v", err)
	}
	bulk.m = m
	bulk.writes(raceScale(3000))
	if err := bulk.st.checkOwned(bulk.m); err != nil {
		t.Fatalf("writes after the bulk restore: %v", err)
	}
	if err := bulk.pushDown(0); err != nil {
		t.Fatal(err)
	}
	if err := bulk.st.checkOwned(bulk.m); err != nil {
		t.Fatalf("writes after the bulk restore, pushed down: %v", err)
	}
}
