package sstable

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// fileBytes returns the contents of name.
func fileBytes(t testing.TB, fs vfs.FS, name string) []byte {
	t.Helper()
	f, err := fs.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

// putBytes writes b as name on fs.
func putBytes(t testing.TB, fs vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readEverything opens b as a file and reads it every way: iteration, Get of
// every key in es, MapRange of every map key, SeekGE. It returns the first
// error, or nil after checking that everything read equals es (a silently
// wrong read fails the test).
func readEverything(t *testing.T, b []byte, es []ent, c *Cache, id uint64) error {
	t.Helper()
	fs := vfs.NewMem()
	putBytes(t, fs, "x.sst", b)
	f, err := fs.Open("x.sst")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(f, "x.sst", int64(len(b)), c, id)
	if err != nil {
		f.Close()
		return err
	}
	defer r.Close()
	it := r.NewIter()
	var got []ent
	for it.Next() {
		got = append(got, own(it.Entry()))
	}
	if it.Err() != nil {
		return it.Err()
	}
	sameEnts(t, "iteration", got, es)
	for i := range es {
		x := es[i]
		var want []ent
		for _, y := range es {
			if y.Order == x.Order && bytes.Equal(y.Key, x.Key) && bytes.Equal(y.UserKey, x.UserKey) {
				want = append(want, y)
			}
		}
		var got []ent
		if err := r.Get(x.Order, x.Key, x.UserKey, func(e *base.Entry) bool { got = append(got, own(e)); return true }); err != nil {
			return err
		}
		sameEnts(t, "Get", got, want)
		want = want[:0]
		for _, y := range es {
			if y.Order == x.Order && bytes.Equal(y.Key, x.Key) {
				want = append(want, y)
			}
		}
		got = got[:0]
		if err := r.MapRange(x.Order, x.Key, func(e *base.Entry) bool { got = append(got, own(e)); return true }); err != nil {
			return err
		}
		sameEnts(t, "MapRange", got, want)
	}
	return nil
}

func smallFile(t *testing.T) (vfs.FS, []ent, []byte) {
	r := rand.New(rand.NewPCG(3, 3))
	es := genEntries(r, genOpts{keys: 12, maxVersions: 2, mapShare: 30, mapSize: 3, collide: 30, maxValue: 12, bigValue: 10, bigSize: 200})
	fs := vfs.NewMem()
	writeFile(t, fs, "s.sst", es, WriterOptions{BlockSize: 300})
	return fs, es, fileBytes(t, fs, "s.sst")
}

// TestFlipEveryByte flips each bit position's byte of a small multi-block
// file (one bit at a time, cycling through the 8 bits) and reads it every way,
// with and without a cache: every flip must give an error — never a panic or
// a silently different read. Checksums cover every byte that is read.
func TestFlipEveryByte(t *testing.T) {
	_, es, orig := smallFile(t)
	t.Logf("%d entries, %d bytes", len(es), len(orig))
	if err := readEverything(t, orig, es, nil, 0); err != nil {
		t.Fatal(err)
	}
	c := newCache(t, 64<<10, 1024)
	for i := range orig {
		for _, bit := range []uint{uint(i % 8), uint(i+3) % 8} {
			b := bytes.Clone(orig)
			b[i] ^= 1 << bit
			var cache *Cache
			if i%2 == 1 {
				cache = c
			}
			err := readEverything(t, b, es, cache, uint64(i+1))
			if err == nil {
				t.Fatalf("flipping bit %d of byte %d went unnoticed", bit, i)
			}
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("flipping bit %d of byte %d: %v does not match base.ErrCorruption", bit, i, err)
			}
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || ce.File != "x.sst" || ce.Offset < 0 || ce.Offset > int64(len(b)) {
				t.Fatalf("flipping byte %d: error %v does not name the file and an offset in it", i, err)
			}
		}
	}
}

// TestTruncateEveryLength opens every proper prefix of a file: base.ErrTruncated
// (or base.ErrCorruption), never a panic.
func TestTruncateEveryLength(t *testing.T) {
	_, es, orig := smallFile(t)
	for n := 0; n < len(orig); n++ {
		err := readEverything(t, orig[:n], es, nil, 0)
		if !errors.Is(err, base.ErrTruncated) {
			t.Fatalf("prefix of %d bytes: %v, want base.ErrTruncated", n, err)
		}
	}
	// Garbage after a complete file: the footer is not at the end.
	err := readEverything(t, append(bytes.Clone(orig), 0, 0, 0), es, nil, 0)
	if !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("trailing garbage: %v", err)
	}
}

func TestHeaderFooterErrors(t *testing.T) {
	_, es, orig := smallFile(t)
	n := len(orig)
	ft := n - footerSize
	for _, tc := range []struct {
		name string
		edit func(b []byte)
		want error
		off  int64
	}{
		{"header-magic", func(b []byte) { b[0] = 'X' }, base.ErrBadMagic, 0},
		{"header-version", func(b []byte) { le.PutUint32(b[8:], 2) }, base.ErrFormatVersion, 8},
		{"header-version-0", func(b []byte) { le.PutUint32(b[8:], 0) }, base.ErrFormatVersion, 8},
		{"header-checksum-type", func(b []byte) { b[12] = 2 }, base.ErrChecksumType, 12},
		{"header-reserved", func(b []byte) { b[14] = 1 }, base.ErrCorruption, 13},
		{"footer-magic", func(b []byte) { b[n-1] ^= 1 }, base.ErrTruncated, int64(ft + 108)},
		{"footer-version", func(b []byte) { le.PutUint32(b[ft+96:], 9) }, base.ErrFormatVersion, int64(ft + 96)},
		{"footer-checksum-type", func(b []byte) { b[ft+100] = 0 }, base.ErrChecksumType, int64(ft + 100)},
		{"footer-crc", func(b []byte) { b[ft+5] ^= 0x10 }, base.ErrChecksum, int64(ft)},
		{"index-crc", func(b []byte) { b[ft-trailerSize-1] ^= 1 }, base.ErrChecksum, -1},
		{"block-crc", func(b []byte) { b[headerSize+3] ^= 1 }, base.ErrChecksum, headerSize + 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(orig)
			tc.edit(b)
			err := readEverything(t, b, es, nil, 0)
			if !errors.Is(err, tc.want) || !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
			var ce *base.CorruptionError
			if !errors.As(err, &ce) || ce.File != "x.sst" {
				t.Fatalf("error %v does not name the file", err)
			}
			if tc.off >= 0 && tc.name != "block-crc" && ce.Offset != tc.off {
				t.Fatalf("error at offset %d, want %d: %v", ce.Offset, tc.off, err)
			}
			for _, other := range []error{base.ErrTruncated, base.ErrBadMagic, base.ErrFormatVersion, base.ErrChecksumType, base.ErrChecksum} {
				if other != tc.want && errors.Is(err, other) {
					t.Fatalf("error %v also matches %v: the errors must be distinct", err, other)
				}
			}
		})
	}
}

// TestReadErrors: an I/O error is returned wrapped, keeps its identity and is
// not corruption.
func TestReadErrors(t *testing.T) {
	mem := vfs.NewMem()
	r := rand.New(rand.NewPCG(4, 4))
	es := genEntries(r, genOpts{keys: 200, maxVersions: 2, maxValue: 50})
	writeFile(t, mem, "r.sst", es, WriterOptions{BlockSize: 512})
	ffs := vfs.NewFaultFS(mem)
	f, err := ffs.Open("r.sst")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	rd, err := Open(f, "r.sst", st.Size(), nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	ffs.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpRead), Err: syscall.EIO})
	err = rd.Get(es[0].Order, es[0].Key, es[0].UserKey, func(*base.Entry) bool { return true })
	if !errors.Is(err, syscall.EIO) || errors.Is(err, base.ErrCorruption) {
		t.Fatalf("Get with a failing read: %v", err)
	}
	ffs.Inject(vfs.Fault{Ops: vfs.Ops(vfs.OpRead), Err: syscall.EIO})
	it := rd.NewIter()
	if it.Next() || !errors.Is(it.Err(), syscall.EIO) {
		t.Fatalf("Iter with a failing read: %v", it.Err())
	}
}

// TestWriteErrors: ENOSPC on any write or the sync is returned by Add or
// Finish, wrapped, and sticks.
func TestWriteErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	es := genEntries(r, genOpts{keys: 3000, maxVersions: 2, maxValue: 80})
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		for nth := int64(1); ; nth++ {
			ffs := vfs.NewFaultFS(vfs.NewMem())
			f, err := ffs.Create("w.sst")
			if err != nil {
				t.Fatal(err)
			}
			ffs.Inject(vfs.Fault{Ops: vfs.Ops(op), Nth: nth, Err: syscall.ENOSPC, ShortWrite: nth%2 == 0})
			w := NewWriter(f, WriterOptions{BlockSize: 1024})
			var werr error
			for i := range es {
				if werr = w.Add(es[i].entry()); werr != nil {
					break
				}
			}
			if werr == nil {
				_, werr = w.Finish()
			}
			if ffs.Injected() == 0 {
				if werr != nil {
					t.Fatal(werr)
				}
				if nth == 1 {
					t.Fatalf("op %v never happened", op)
				}
				break // every write was tried
			}
			if !errors.Is(werr, syscall.ENOSPC) {
				t.Fatalf("%v #%d: error %v, want ENOSPC", op, nth, werr)
			}
			if err := w.Add(es[0].entry()); !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, ErrFinished) {
				t.Fatalf("error is not sticky: %v", err)
			}
		}
	}
}

// TestDumpDamaged: Dump prints what it can and returns the corruption.
func TestDumpDamaged(t *testing.T) {
	_, _, orig := smallFile(t)
	for _, at := range []int{0, headerSize + 40, len(orig) - footerSize - 3, len(orig) - 2} {
		b := bytes.Clone(orig)
		b[at] ^= 0x08
		var out bytes.Buffer
		err := Dump(&out, readOnly(b), int64(len(b)))
		if !errors.Is(err, base.ErrCorruption) || !bytes.Contains(out.Bytes(), []byte("error: ")) {
			t.Fatalf("Dump of a file damaged at %d: %v\n%s", at, err, out.String())
		}
	}
}
