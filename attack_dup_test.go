package strata

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
)

// TestAttackNoSpaceCloseListDup: the disk fills up during Close after some tables were already
// installed. Close fails with ErrNoSpace and the Store stays open; every read must still
// return the model's state — list state (merge operands) included, which would show a
// segment that Close installed into the LsmStore and kept in the FreshTable twice.
func TestAttackNoSpaceCloseListDup(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  vfs.OpSet
		path string
		nth  int64
	}{
		{"table-create-1", vfs.Ops(vfs.OpCreate), "*.sst", 1},
		{"manifest-write-2", vfs.Ops(vfs.OpWrite), "MANIFEST-*", 2},
		{"manifest-write-1", vfs.Ops(vfs.OpWrite), "MANIFEST-*", 1},
		{"manifest-sync-2", vfs.Ops(vfs.OpSync), "MANIFEST-*", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			fault := vfs.NewFaultFS(vfs.Default())
			s, err := Open(dir, attackFaultOptions(fault))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { s.Close() }()
			st, _ := registerModel(s, attackFaultWorkload.u)
			f := &modelRun{t: t, w: attackFaultWorkload, rng: rand.New(rand.NewPCG(7, 0)), m: newModel(), st: st, faulty: true}
			for range 60_000 {
				if err := f.step(); err != nil {
					t.Fatal(err)
				}
			}
			before := s.Stats()
			fault.Inject(vfs.Fault{Ops: tc.ops, Path: vfs.PathGlob(tc.path), Nth: tc.nth, Sticky: true, Err: syscall.ENOSPC})
			cerr := s.Close()
			if cerr == nil {
				t.Fatalf("Close succeeded: the fault never fired (segments %d, slices %d); pick an earlier write", before.Fresh.Segments, before.Slices.Count)
			}
			if !errors.Is(cerr, ErrNoSpace) {
				t.Fatal(cerr)
			}
			after := s.Stats()
			t.Logf("before Close: segments %d slices %d; after the failed Close: segments %d, slices %d, LSM files %d, persist files %d",
				before.Fresh.Segments, before.Slices.Count, after.Fresh.Segments, after.Slices.Count, after.LSM.Files, after.LSM.PersistFiles)
			readErr := st.checkAll(f.m)
			fault.ClearFaults()
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s, err = Open(dir, attackFaultOptions(vfs.Default()))
			if err != nil {
				t.Fatal(err)
			}
			st, _ = registerModel(s, attackFaultWorkload.u)
			reopenErr := st.checkAll(f.m)
			if readErr != nil || reopenErr != nil {
				t.Fatalf("after Close failed with ErrNoSpace part-way: reads %v; after the retried Close and Open: %v", readErr, reopenErr)
			}
		})
	}
}
