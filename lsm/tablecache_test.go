package lsm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/strata-db/strata/internal/vfs"
)

// TestTableCacheBoundsOpenFiles: a DB of many tables with MaxOpenFiles 4
// never holds more than 4 table files open between calls, reads every key
// right (through files the cache closes and opens again), compacts, and
// reopens within the bound too.
func TestTableCacheBoundsOpenFiles(t *testing.T) {
	const maxOpen = 4
	mem := vfs.NewMem()
	ffs := vfs.NewFaultFS(mem)
	opts := smallOptions(ffs)
	opts.MaxOpenFiles = maxOpen
	opts.L0CompactionTrigger = 40 // many L0 files: every Get probes them all
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	ks := keySpace{values: 200, lists: 20, maps: 10, userKeys: 8, orderBits: 12}
	keys := ks.all()
	g := newGen(rand.New(rand.NewPCG(1, 2)), ks)
	m := newModel()
	check := func(when string) {
		t.Helper()
		checkAll(t, d, m, keys, when)
		if n := d.Metrics().OpenTables; n > maxOpen {
			t.Fatalf("%s: %d table files open, MaxOpenFiles %d", when, n, maxOpen)
		}
	}
	for i := range 30 {
		es := g.batch(200)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			t.Fatal(err)
		}
		m.add(es)
		if i%10 == 9 {
			check(fmt.Sprintf("after batch %d", i))
		}
	}
	files := d.Metrics().Levels[0].Files
	if files < 20 {
		t.Fatalf("only %d L0 files", files)
	}
	check("before compaction")
	compactAll(t, d)
	check("after compaction")
	mt := d.Metrics()
	t.Logf("files %d, open %d, hits %d, misses %d", files, mt.OpenTables, mt.TableCacheHits, mt.TableCacheMisses)
	if mt.TableCacheMisses <= int64(files) || mt.TableCacheHits == 0 {
		t.Fatalf("hits %d, misses %d: the cache neither closed nor reused files", mt.TableCacheHits, mt.TableCacheMisses)
	}
	if err := d.Persist(g.seq, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	opens := ffs.Count(vfs.Ops(vfs.OpOpen))
	if d, err = Open(opts); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if n := d.Metrics().OpenTables; n > maxOpen {
		t.Fatalf("after reopen: %d table files open", n)
	}
	check("after reopen")
	t.Logf("reopen and reads: %d opens", ffs.Count(vfs.Ops(vfs.OpOpen))-opens)
}

// TestTableCacheRefs: a file in use is never closed under its reader, by
// eviction or by Close; it is closed by the last release instead. Reads after
// Close fail with fs.ErrClosed.
func TestTableCacheRefs(t *testing.T) {
	mem := vfs.NewMem()
	var hs []*tableHandle
	c := newTableCache(1)
	c.fs(mem)
	for i := range 3 {
		name := fmt.Sprintf("/%d.sst", i)
		f, err := mem.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		f.Write([]byte{byte(i), byte(i)})
		f.Close()
		h, err := c.openHandle(name)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	if open, _, _ := c.stats(); open != 1 {
		t.Fatalf("%d open, want 1 (MaxOpenFiles)", open)
	}
	f0, err := hs[0].acquire() // a read in flight on file 0
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs[1:] {
		var b [1]byte
		if _, err := h.ReadAt(b[:], 1); err != nil {
			t.Fatal(err)
		}
	}
	if hs[0].f == nil {
		t.Fatal("file 0 closed while a read held it")
	}
	hs[0].Close()
	var b [2]byte
	if _, err := f0.ReadAt(b[:], 0); err != nil || b[0] != 0 {
		t.Fatalf("read of a held file after Close: %v", err)
	}
	hs[0].release()
	if hs[0].f != nil {
		t.Fatal("file 0 still open after Close and its last release")
	}
	if _, err := hs[0].ReadAt(b[:], 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read after Close: %v, want fs.ErrClosed", err)
	}
	if open, _, _ := c.stats(); open != 0 {
		// Files 1 and 2 were closed by their own releases (the cache was
		// over its bound while file 0 was held), file 0 by its last one.
		t.Fatalf("%d open after the release, want 0", open)
	}
	for _, h := range hs[1:] {
		h.Close()
	}
	if open, _, _ := c.stats(); open != 0 {
		t.Fatalf("%d open after every Close", open)
	}
	if _, err := hs[1].ReadAt(b[:], 0); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read after Close: %v, want fs.ErrClosed", err)
	}
}

// TestTableCacheConcurrent: goroutines read many files through a cache of 3
// (run with -race): every read returns the file's bytes, and the open count
// returns to the bound once they stop.
func TestTableCacheConcurrent(t *testing.T) {
	mem := vfs.NewMem()
	c := newTableCache(3)
	c.fs(mem)
	var hs []*tableHandle
	for i := range 20 {
		name := fmt.Sprintf("/%d.sst", i)
		f, _ := mem.Create(name)
		f.Write(bytes.Repeat([]byte{byte(i)}, 64))
		f.Close()
		h, err := c.openHandle(name)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			var b [8]byte
			for range 2000 {
				i := rng.IntN(len(hs))
				if _, err := hs[i].ReadAt(b[:], int64(rng.IntN(56))); err != nil {
					errs <- err
					return
				}
				if b != [8]byte(bytes.Repeat([]byte{byte(i)}, 8)) {
					errs <- fmt.Errorf("file %d read %v", i, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if open, hits, misses := c.stats(); open > 3 || hits == 0 || misses <= 20 {
		t.Fatalf("open %d, hits %d, misses %d", open, hits, misses)
	}
	for _, h := range hs {
		h.Close()
	}
}

// TestTableCacheEMFILE: when the process is out of descriptors, a table open
// closes the cache's idle files and tries again, so reads keep working.
func TestTableCacheEMFILE(t *testing.T) {
	mem := vfs.NewMem()
	ffs := vfs.NewFaultFS(mem)
	c := newTableCache(10)
	c.fs(ffs)
	var hs []*tableHandle
	for i := range 3 {
		name := filepath.Join("/", fmt.Sprintf("%d.sst", i))
		f, _ := mem.Create(name)
		f.Write([]byte{byte(i)})
		f.Close()
		h, err := c.openHandle(name)
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	// Push file 0 out, then make its reopen fail once with EMFILE.
	c.mu.Lock()
	c.unlink(hs[0])
	c.mu.Unlock()
	ffs.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpOpen), Err: syscall.EMFILE})
	var b [1]byte
	if _, err := hs[0].ReadAt(b[:], 0); err != nil {
		t.Fatalf("read with one EMFILE: %v", err)
	}
	if open, _, _ := c.stats(); open != 1 {
		t.Fatalf("%d open after the EMFILE retry, want 1 (the idle files closed)", open)
	}
	// Out of descriptors for good: the read reports EMFILE.
	c.mu.Lock()
	c.unlink(hs[0])
	c.mu.Unlock()
	ffs.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpOpen), Err: syscall.EMFILE, Sticky: true})
	if _, err := hs[0].ReadAt(b[:], 0); !errors.Is(err, syscall.EMFILE) {
		t.Fatalf("read with EMFILE for good: %v", err)
	}
	for _, h := range hs {
		h.Close()
	}
}

// TestDefaultMaxOpenFiles: half the soft RLIMIT_NOFILE, within
// [MinDefaultOpenFiles, MaxDefaultOpenFiles].
func TestDefaultMaxOpenFiles(t *testing.T) {
	n := DefaultMaxOpenFiles()
	if n < MinDefaultOpenFiles || n > MaxDefaultOpenFiles {
		t.Fatalf("DefaultMaxOpenFiles() = %d", n)
	}
	if lim, ok := fileLimit(); ok && lim/2 >= MinDefaultOpenFiles && lim/2 <= MaxDefaultOpenFiles && uint64(n) != lim/2 {
		t.Fatalf("DefaultMaxOpenFiles() = %d with a soft limit of %d", n, lim)
	}
	t.Logf("DefaultMaxOpenFiles() = %d", n)
}

// TestOutOfFilesSheds: a table file the DB creates when the process is out of
// descriptors (EMFILE) closes the cache's idle files and is created on the
// second try, so a flush does not fail because the cache holds descriptors.
func TestOutOfFilesSheds(t *testing.T) {
	ffs := vfs.NewFaultFS(vfs.NewMem())
	opts := smallOptions(ffs)
	opts.L0CompactionTrigger = 100
	d, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ks := keySpace{values: 100, orderBits: 12}
	g := newGen(rand.New(rand.NewPCG(3, 4)), ks)
	m := newModel()
	flush := func() error {
		es := g.batch(50)
		p, err := d.WriteL0(&sliceIter{es: es})
		if err != nil {
			return err
		}
		if err := d.InstallL0(p, g.seq); err != nil {
			return err
		}
		m.add(es)
		return nil
	}
	for range 10 {
		if err := flush(); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.Metrics().OpenTables; n != 10 {
		t.Fatalf("%d tables open, want 10", n)
	}
	ffs.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpCreate), Path: vfs.PathGlob("*.sst"), Err: syscall.EMFILE})
	if err := flush(); err != nil {
		t.Fatalf("flush with one EMFILE: %v", err)
	}
	mt := d.Metrics()
	if mt.OutOfFiles != 1 || mt.OpenTables != 1 {
		t.Fatalf("OutOfFiles %d, OpenTables %d; want 1 and 1 (the new table)", mt.OutOfFiles, mt.OpenTables)
	}
	checkAll(t, d, m, ks.all(), "after the shed")
}
