package lsm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// installBatch writes es to a new L0 file and installs it.
func installBatch(t testing.TB, d *DB, es []base.Entry, lastSeq uint64) *tableFile {
	t.Helper()
	p, err := d.WriteL0(&sliceIter{es: es})
	if err != nil {
		t.Fatalf("WriteL0: %v", err)
	}
	if err := d.InstallL0(p, lastSeq); err != nil {
		t.Fatalf("InstallL0: %v", err)
	}
	return p.t
}

func runJob(t testing.TB, d *DB, j *CompactionJob) {
	t.Helper()
	if j == nil {
		t.Fatal("no compaction job")
	}
	if err := j.Run(context.Background()); err != nil {
		t.Fatalf("Run %v: %v", j, err)
	}
	if err := d.InstallCompaction(j); err != nil {
		t.Fatalf("InstallCompaction %v: %v", j, err)
	}
}

func fileExists(fs vfs.FS, name string) bool {
	f, err := fs.Open(name)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// TestPersistedMeta: a new DB has no persist point; Persist's sequence number
// (the maximum with LastSeq) and a copy of its metadata come back from
// PersistedMeta, across reopens and manifest rewrites; metadata over
// MaxPersistMeta is refused with ErrMetaTooLarge and changes nothing; the
// largest allowed blob round-trips.
func TestPersistedMeta(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	if seq, meta, ok := d.PersistedMeta(); ok || seq != 0 || meta != nil {
		t.Fatalf("new DB: PersistedMeta %d %q %v", seq, meta, ok)
	}
	meta := []byte("registry v1")
	if err := d.Persist(40, meta); err != nil {
		t.Fatal(err)
	}
	meta[0] = 'X' // Persist copied it
	g := newGen(rand.New(rand.NewPCG(3, 3)), crashKeys)
	g.seq = 100
	installBatch(t, d, g.batch(10), g.seq)
	// The recorded sequence number is at least LastSeq.
	if err := d.Persist(7, nil); err != nil {
		t.Fatal(err)
	}
	if seq, m, ok := d.PersistedMeta(); !ok || seq != g.seq || m == nil || len(m) != 0 {
		t.Fatalf("after Persist(7, nil): %d %q %v; want %d, empty, true", seq, m, ok, g.seq)
	}
	if err := d.Persist(g.seq+5, []byte("registry v2")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), MaxPersistMeta/16+1)
	if err := d.Persist(g.seq+9, big); !errors.Is(err, ErrMetaTooLarge) {
		t.Fatalf("Persist of %d bytes: %v, want ErrMetaTooLarge", len(big), err)
	}
	d.Close()
	for round := range 2 {
		if d, err = Open(opts); err != nil {
			t.Fatal(err)
		}
		seq, m, ok := d.PersistedMeta()
		if !ok || seq != g.seq+5 || string(m) != "registry v2" || d.LastSeq() != g.seq+5 {
			t.Fatalf("reopen %d: PersistedMeta %d %q %v, LastSeq %d", round, seq, m, ok, d.LastSeq())
		}
		m[0] = 'Y' // a copy
		if _, m2, _ := d.PersistedMeta(); string(m2) != "registry v2" {
			t.Fatalf("PersistedMeta returned the DB's own slice")
		}
		d.Close()
	}
	// The largest blob, through the append path and a rewrite.
	d, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	big = big[:MaxPersistMeta]
	if err := d.Persist(1, big); err != nil {
		t.Fatalf("Persist of MaxPersistMeta bytes: %v", err)
	}
	if err := d.Persist(2, big); err != nil { // the manifest is past MaxManifestBytes: rewrite
		t.Fatalf("second Persist of MaxPersistMeta bytes: %v", err)
	}
	d.Close()
	if d, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if seq, m, ok := d.PersistedMeta(); !ok || seq != g.seq+5 || !bytes.Equal(m, big) {
		t.Fatalf("after reopen: %d, %d bytes, %v", seq, len(m), ok)
	}
}

// TestPersistPointRecovery: installs and compactions after the last Persist
// are visible to the running DB and gone after a reopen or crash, their
// files deleted; a DB never persisted recovers empty.
func TestPersistPointRecovery(t *testing.T) {
	fs := vfs.NewMem()
	opts := smallOptions(fs)
	opts.MaxManifestBytes = 300 // rewrites with edits after the persist point
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(rand.New(rand.NewPCG(4, 4)), crashKeys)
	m := newModel()
	for range 3 {
		es := g.batch(20)
		installBatch(t, d, es, g.seq)
		m.add(es)
	}
	// Never persisted: a crash (or reopen) recovers an empty DB.
	{
		d2, err := Open(smallOptions(fs.CrashClone()))
		if err != nil {
			t.Fatal(err)
		}
		if err := diffAll(d2, newModel(), g.keys); err != nil {
			t.Fatalf("never persisted: %v", err)
		}
		if _, _, ok := d2.PersistedMeta(); ok || d2.LastSeq() != 0 {
			t.Fatalf("never persisted: PersistedMeta ok, LastSeq %d", d2.LastSeq())
		}
		if names, _ := d2.fs.List("/db"); len(names) != 3 { // CURRENT, LOCK, the manifest
			t.Fatalf("never persisted: files left %v", names)
		}
		d2.Close()
	}
	if err := d.Persist(g.seq, []byte("p1")); err != nil {
		t.Fatal(err)
	}
	persisted, pseq := m.clone(), g.seq
	for i := range 6 {
		es := g.batch(20)
		installBatch(t, d, es, g.seq)
		m.add(es)
		if i%2 == 1 {
			compactAll(t, d)
		}
	}
	checkAll(t, d, m, g.keys, "running DB")
	if d.Metrics().ManifestRotations < 2 {
		t.Fatalf("no manifest rewrite after the persist point")
	}
	crash := fs.CrashClone()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fs := range []*vfs.MemFS{fs, crash} {
		d, err := Open(opts.withFS(fs))
		if err != nil {
			t.Fatal(err)
		}
		checkAll(t, d, persisted, g.keys, "reopened")
		if d.LastSeq() != pseq {
			t.Fatalf("LastSeq %d, want %d", d.LastSeq(), pseq)
		}
		if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
			t.Fatalf("stray files %v %v", stray, err)
		}
		d.Close()
	}
}

func (o Options) withFS(fs vfs.FS) Options {
	o.FS = fs
	return o
}

// TestDeferredDeletion: a compaction's inputs that the persisted version
// holds stay on disk (and a crash recovers them) until the next Persist,
// which removes them; inputs installed after the persist point are removed
// at once.
func TestDeferredDeletion(t *testing.T) {
	for _, rotate := range []bool{false, true} {
		t.Run(fmt.Sprintf("rotate=%v", rotate), func(t *testing.T) {
			fs := vfs.NewMem()
			opts := smallOptions(fs)
			opts.L0CompactionTrigger = 100
			if rotate {
				opts.MaxManifestBytes = 1 // every edit rewrites the manifest
			}
			d, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			g := newGen(rand.New(rand.NewPCG(5, 5)), crashKeys)
			m := newModel()
			var old []*tableFile
			for range 3 {
				es := g.batch(30)
				old = append(old, installBatch(t, d, es, g.seq))
				m.add(es)
			}
			if err := d.Persist(g.seq, nil); err != nil {
				t.Fatal(err)
			}
			persisted := m.clone()
			es := g.batch(30)
			fresh := installBatch(t, d, es, g.seq)
			m.add(es)
			runJob(t, d, d.CompactLevel(0)) // L0 (3 persisted + 1 new) → L1
			checkAll(t, d, m, g.keys, "after compaction")
			if fileExists(fs, fresh.name) {
				t.Fatalf("input %s installed after the persist point survived its compaction", fresh.name)
			}
			for _, tf := range old {
				if !fileExists(fs, tf.name) {
					t.Fatalf("input %s of the persisted version removed before the next Persist", tf.name)
				}
			}
			if mt := d.Metrics(); mt.PersistPinnedFiles != 3 || mt.PersistPinnedBytes == 0 {
				t.Fatalf("PersistPinnedFiles %d bytes %d, want 3 files", mt.PersistPinnedFiles, mt.PersistPinnedBytes)
			}
			// Compact L1 further down: still pinned, the outputs of the first
			// compaction (never persisted) go at once.
			runJob(t, d, d.CompactLevel(1))
			if err := persistedOnDisk(d); err != nil {
				t.Fatal(err)
			}
			if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
				t.Fatalf("stray files %v %v", stray, err)
			}
			// A crash now recovers the persisted version from its files.
			d2, err := Open(opts.withFS(fs.CrashClone()))
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			checkAll(t, d2, persisted, g.keys, "crash before the next Persist")
			d2.Close()
			// The next Persist releases them.
			if err := d.Persist(g.seq, nil); err != nil {
				t.Fatal(err)
			}
			for _, tf := range old {
				if fileExists(fs, tf.name) {
					t.Fatalf("input %s still on disk after the next Persist", tf.name)
				}
			}
			if mt := d.Metrics(); mt.PersistPinnedFiles != 0 {
				t.Fatalf("PersistPinnedFiles %d after Persist", mt.PersistPinnedFiles)
			}
			d3, err := Open(opts.withFS(fs.CrashClone()))
			if err != nil {
				t.Fatalf("reopen after crash: %v", err)
			}
			checkAll(t, d3, m, g.keys, "crash after the next Persist")
			d3.Close()
		})
	}
}

// TestPersistNoSpace: ENOSPC at each write of a Persist (append path: write,
// sync; rewrite path: create, write, sync of the manifest, of CURRENT.tmp,
// rename, directory sync) gives base.ErrNoSpace; the DB stays readable, the previous persist
// point stays the recovered one, and a later Persist succeeds.
func TestPersistNoSpace(t *testing.T) {
	for _, rewrite := range []bool{false, true} {
		writes := int64(2)
		if rewrite {
			writes = 8
		}
		for k := int64(1); k <= writes; k++ {
			t.Run(fmt.Sprintf("rewrite=%v/k=%d", rewrite, k), func(t *testing.T) {
				mem := vfs.NewMem()
				ffs := vfs.NewFaultFS(mem)
				opts := smallOptions(ffs)
				opts.MaxManifestBytes = 1 << 20
				if rewrite {
					opts.MaxManifestBytes = 1
				}
				d, err := Open(opts)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { d.Close() }()
				g := newGen(rand.New(rand.NewPCG(6, uint64(k))), crashKeys)
				m := newModel()
				es := g.batch(30)
				installBatch(t, d, es, g.seq)
				m.add(es)
				if err := d.Persist(g.seq, []byte("one")); err != nil {
					t.Fatal(err)
				}
				persisted := m.clone()
				es = g.batch(30)
				installBatch(t, d, es, g.seq)
				m.add(es)
				runJob(t, d, d.CompactLevel(0))
				ffs.Inject(vfs.Fault{Ops: faultOps, Nth: k, Sticky: true, Err: syscall.ENOSPC})
				err = d.Persist(g.seq, []byte("two"))
				if !errors.Is(err, base.ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("Persist: %v, want base.ErrNoSpace", err)
				}
				checkAll(t, d, m, g.keys, "after the failed Persist")
				if _, meta, ok := d.PersistedMeta(); !ok || string(meta) != "one" {
					t.Fatalf("PersistedMeta %q %v after a failed Persist", meta, ok)
				}
				if err := persistedOnDisk(d); err != nil {
					t.Fatal(err)
				}
				// A crash now recovers the previous persist point.
				d2, err := Open(smallOptions(mem.CrashClone()))
				if err != nil {
					t.Fatalf("reopen after crash: %v", err)
				}
				checkAll(t, d2, persisted, g.keys, "crash after the failed Persist")
				d2.Close()
				ffs.ClearFaults()
				if err := d.Persist(g.seq, []byte("three")); err != nil {
					t.Fatalf("Persist once space is back: %v", err)
				}
				if err := d.Close(); err != nil {
					t.Fatal(err)
				}
				if d, err = Open(opts); err != nil {
					t.Fatal(err)
				}
				checkAll(t, d, m, g.keys, "reopen after the later Persist")
				if _, meta, _ := d.PersistedMeta(); string(meta) != "three" {
					t.Fatalf("PersistedMeta %q", meta)
				}
				if stray, err := strayFiles(d); err != nil || len(stray) > 0 {
					t.Fatalf("stray files %v %v", stray, err)
				}
			})
		}
	}
}
