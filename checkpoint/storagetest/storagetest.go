// Package storagetest is the conformance suite of checkpoint.Storage: every implementation —
// DirStorage here, an object store in its own module (checkpoint/s3) — runs the same tests of
// the contract written on checkpoint.Storage and in checkpoint/doc.go ("Storage protocol"):
//
//   - create-if-absent: Create of an existing name fails with ErrExists and leaves the object
//     as it was; of N concurrent Creates of one name exactly one wins (S3's If-None-Match: *);
//   - whole and ranged reads, ErrNotFound and ErrRange exactly where the contract puts them;
//   - PutReader reads exactly size bytes, and a short reader stores nothing
//     (io.ErrUnexpectedEOF);
//   - List by plain string prefix, sorted, complete across many objects (past one page of an
//     object store's listing), with sizes and a Created time never before the write;
//   - idempotent Delete, and Get after Delete reports ErrNotFound;
//   - large objects (streamed, read back in ranges across part boundaries);
//   - names refused by ValidateName refused by every method; a done context honoured.
//
// It imports only the standard library, testing and package checkpoint, so the core module
// stays small; an implementation calls Run from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) checkpoint.Storage { return newStorage(t) }, storagetest.Options{})
//	}
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// Options tune Run to a backend. The zero value runs everything at the default sizes.
type Options struct {
	// LargeSize is the size in bytes of the large object PutReader streams and reads back;
	// default 24 MiB (past the 5 MiB minimum part and a 16 MiB default part of a multipart
	// upload, so two parts and a short last one).
	LargeSize int64
	// ManyObjects is how many objects the List test writes under one prefix; default 1100
	// (past S3's page of 1000 keys, so a List must follow its continuation token).
	ManyObjects int
	// Writers is how many goroutines race to Create one name in each round; default 4.
	Writers int
	// Rounds is how many names the Create race runs; default 10.
	Rounds int
	// ClockSkew is how far the storage's clock (ObjectInfo.Created) may lag the test's; default
	// 0 (one machine). Created must never be earlier than the write's start minus ClockSkew.
	ClockSkew time.Duration
	// Short skips the large object and cuts ManyObjects and Rounds, for -short runs.
	Short bool
}

func (o *Options) defaults() {
	if o.LargeSize <= 0 {
		o.LargeSize = 24 << 20
	}
	if o.ManyObjects <= 0 {
		o.ManyObjects = 1100
	}
	if o.Writers <= 1 {
		o.Writers = 4
	}
	if o.Rounds <= 0 {
		o.Rounds = 10
	}
	if o.Short {
		o.ManyObjects = min(o.ManyObjects, 120)
		o.Rounds = min(o.Rounds, 3)
	}
}

// Run runs the conformance suite as subtests of t. newStorage returns an empty storage for
// each subtest (a new directory, or a new bucket or prefix of an object store) and registers
// its cleanup with t.Cleanup. Subtests do not run in parallel with each other.
func Run(t *testing.T, newStorage func(t *testing.T) checkpoint.Storage, opts Options) {
	opts.defaults()
	t.Run("PutGet", func(t *testing.T) { testPutGet(t, newStorage(t)) })
	t.Run("PutReader", func(t *testing.T) { testPutReader(t, newStorage(t)) })
	t.Run("CreateIfAbsent", func(t *testing.T) { testCreateIfAbsent(t, newStorage(t)) })
	t.Run("CreateRace", func(t *testing.T) { testCreateRace(t, newStorage(t), opts) })
	t.Run("GetRange", func(t *testing.T) { testGetRange(t, newStorage(t)) })
	t.Run("List", func(t *testing.T) { testList(t, newStorage(t), opts) })
	t.Run("ListMany", func(t *testing.T) { testListMany(t, newStorage(t), opts) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, newStorage(t)) })
	t.Run("InvalidNames", func(t *testing.T) { testInvalidNames(t, newStorage(t)) })
	t.Run("Context", func(t *testing.T) { testContext(t, newStorage(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, newStorage(t)) })
	if !opts.Short {
		t.Run("Large", func(t *testing.T) { testLarge(t, newStorage(t), opts) })
	}
}

// Pattern returns n bytes of a pattern determined by seed, different at every offset of a
// part (a misplaced range or part shows as a mismatch).
func Pattern(seed byte, n int64) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func names(infos []checkpoint.ObjectInfo) string {
	var r []string
	for _, o := range infos {
		r = append(r, o.Name)
	}
	return strings.Join(r, " ")
}

func wantGet(t *testing.T, s checkpoint.Storage, name string, want []byte) {
	t.Helper()
	b, err := s.Get(context.Background(), name)
	if err != nil {
		t.Fatalf("Get(%s): %v", name, err)
	}
	if !bytes.Equal(b, want) {
		t.Fatalf("Get(%s) = %d bytes %.16q…, want %d bytes %.16q…", name, len(b), b, len(want), want)
	}
}

func wantNotFound(t *testing.T, s checkpoint.Storage, name string) {
	t.Helper()
	if b, err := s.Get(context.Background(), name); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("Get(%s) = %d bytes, %v; want ErrNotFound", name, len(b), err)
	}
	if _, err := s.GetRange(context.Background(), name, 0, 0); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("GetRange(%s, 0, 0) = %v; want ErrNotFound", name, err)
	}
}

func testPutGet(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	must(t, s.Put(ctx, "o/a/x", []byte("hello")))
	wantGet(t, s, "o/a/x", []byte("hello"))
	must(t, s.Put(ctx, "o/empty", nil))
	wantGet(t, s, "o/empty", []byte{})
	// The caller may reuse data once Put returns.
	buf := []byte("first")
	must(t, s.Put(ctx, "o/reused", buf))
	copy(buf, "XXXXX")
	wantGet(t, s, "o/reused", []byte("first"))
	// A second Put replaces the object whole (last writer wins, as an S3 PUT).
	must(t, s.Put(ctx, "o/a/x", []byte("bye")))
	wantGet(t, s, "o/a/x", []byte("bye"))
	wantNotFound(t, s, "o/missing")
	wantNotFound(t, s, "o/a/x/under-an-object")
	wantNotFound(t, s, "o/a")
}

func testPutReader(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	must(t, s.PutReader(ctx, "o/r/exact", strings.NewReader("world"), 5))
	wantGet(t, s, "o/r/exact", []byte("world"))
	// Bytes after size are not read, nor stored.
	r := strings.NewReader("world and more")
	must(t, s.PutReader(ctx, "o/r/longer", r, 5))
	wantGet(t, s, "o/r/longer", []byte("world"))
	must(t, s.PutReader(ctx, "o/r/zero", strings.NewReader(""), 0))
	wantGet(t, s, "o/r/zero", []byte{})
	// A reader that ends early stores nothing and reports io.ErrUnexpectedEOF.
	err := s.PutReader(ctx, "o/r/short", strings.NewReader("abc"), 10)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("PutReader of a short reader: %v, want io.ErrUnexpectedEOF", err)
	}
	wantNotFound(t, s, "o/r/short")
	// A reader that fails stores nothing and reports the reader's error.
	boom := errors.New("reader failed")
	err = s.PutReader(ctx, "o/r/failed", io.MultiReader(strings.NewReader("ab"), errReader{boom}), 10)
	if !errors.Is(err, boom) {
		t.Fatalf("PutReader of a failing reader: %v, want its error", err)
	}
	wantNotFound(t, s, "o/r/failed")
	if err := s.PutReader(ctx, "o/r/negative", strings.NewReader(""), -1); err == nil {
		t.Fatal("PutReader with a negative size succeeded")
	}
	if l, err := s.List(ctx, "o/r/"); err != nil || names(l) != "o/r/exact o/r/longer o/r/zero" {
		t.Fatalf("List after PutReaders = %s, %v", names(l), err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func testCreateIfAbsent(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	name := checkpoint.ManifestName("o", 1)
	must(t, s.Create(ctx, name, []byte("m1")))
	err := s.Create(ctx, name, []byte("zombie"))
	if !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	wantGet(t, s, name, []byte("m1")) // the zombie's Create must not change it
	// Create over an object Put wrote fails too.
	must(t, s.Put(ctx, "o/put-first", []byte("p")))
	if err := s.Create(ctx, "o/put-first", []byte("c")); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("Create over a Put object: %v, want ErrExists", err)
	}
	wantGet(t, s, "o/put-first", []byte("p"))
	// Once deleted, the name can be created again.
	must(t, s.Delete(ctx, "o/put-first"))
	must(t, s.Create(ctx, "o/put-first", []byte("again")))
	wantGet(t, s, "o/put-first", []byte("again"))
	must(t, s.Create(ctx, "o/empty-manifest", nil))
	wantGet(t, s, "o/empty-manifest", []byte{})
}

// testCreateRace: opts.Writers goroutines Create one name at once, opts.Rounds times —
// exactly one wins, every other fails with ErrExists, and the object holds the winner's bytes.
func testCreateRace(t *testing.T, s checkpoint.Storage, opts Options) {
	ctx := context.Background()
	for round := range opts.Rounds {
		name := checkpoint.ManifestName("o", uint64(round+1))
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, opts.Writers)
		for w := range opts.Writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[w] = s.Create(ctx, name, bytes.Repeat([]byte{byte('a' + w)}, 1000+w))
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both created %s", round, winner, w, name)
			case err == nil:
				winner = w
			case !errors.Is(err, checkpoint.ErrExists):
				t.Fatalf("round %d: writer %d: %v, want ErrExists", round, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer won", round)
		}
		wantGet(t, s, name, bytes.Repeat([]byte{byte('a' + winner)}, 1000+winner))
	}
}

func testGetRange(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	must(t, s.Put(ctx, "o/x", []byte("hello")))
	must(t, s.Put(ctx, "o/empty", nil))
	for _, tc := range []struct {
		off, n int64
		want   string
	}{
		{0, 5, "hello"}, {1, 3, "ell"}, {4, 1, "o"}, {0, 0, ""}, {5, 0, ""}, {2, 0, ""},
	} {
		b, err := s.GetRange(ctx, "o/x", tc.off, tc.n)
		if err != nil || string(b) != tc.want || int64(len(b)) != tc.n {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", tc.off, tc.n, b, err, tc.want)
		}
	}
	// {0, 1<<50}: a length from a damaged manifest is refused, not allocated.
	for _, r := range [][2]int64{{-1, 1}, {0, -1}, {4, 2}, {6, 0}, {5, 1}, {0, 6}, {100, 1}, {0, 1 << 50}} {
		if b, err := s.GetRange(ctx, "o/x", r[0], r[1]); !errors.Is(err, checkpoint.ErrRange) {
			t.Errorf("GetRange(%d, %d) = %q, %v; want ErrRange", r[0], r[1], b, err)
		}
	}
	if b, err := s.GetRange(ctx, "o/empty", 0, 0); err != nil || len(b) != 0 {
		t.Errorf("GetRange of an empty object = %q, %v", b, err)
	}
	if _, err := s.GetRange(ctx, "o/empty", 0, 1); !errors.Is(err, checkpoint.ErrRange) {
		t.Errorf("GetRange(0, 1) of an empty object = %v; want ErrRange", err)
	}
	if _, err := s.GetRange(ctx, "o/missing", 0, 1); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("GetRange of a missing object = %v; want ErrNotFound", err)
	}
	ri, ok := s.(checkpoint.RangeReaderInto)
	if !ok {
		return
	}
	// ReadRangeInto: GetRange's answers, into the caller's buffer.
	for _, tc := range []struct {
		name   string
		off, n int64
		want   error // nil: the bytes of "hello" at off
	}{
		{"o/x", 0, 5, nil}, {"o/x", 1, 3, nil}, {"o/x", 4, 1, nil}, {"o/x", 5, 0, nil}, {"o/empty", 0, 0, nil},
		{"o/x", -1, 1, checkpoint.ErrRange}, {"o/x", 4, 2, checkpoint.ErrRange}, {"o/x", 6, 0, checkpoint.ErrRange},
		{"o/empty", 0, 1, checkpoint.ErrRange}, {"o/missing", 0, 1, checkpoint.ErrNotFound},
	} {
		p := bytes.Repeat([]byte{'-'}, int(tc.n))
		err := ri.ReadRangeInto(ctx, tc.name, tc.off, p)
		if tc.want != nil {
			if !errors.Is(err, tc.want) {
				t.Errorf("ReadRangeInto(%s, %d, %d bytes) = %v; want %v", tc.name, tc.off, tc.n, err, tc.want)
			}
			continue
		}
		if err != nil || string(p) != "hello"[tc.off:tc.off+tc.n] {
			t.Errorf("ReadRangeInto(%s, %d, %d bytes) = %q, %v", tc.name, tc.off, tc.n, p, err)
		}
	}
}

func testList(t *testing.T, s checkpoint.Storage, opts Options) {
	ctx := context.Background()
	before := time.Now().Add(-opts.ClockSkew)
	must(t, s.Put(ctx, "o/a/x", []byte("hello")))
	must(t, s.PutReader(ctx, "o/a/y", strings.NewReader("world"), 5))
	must(t, s.Create(ctx, "o/chk-1/MANIFEST", []byte("m1")))
	must(t, s.Put(ctx, "p/z", nil))
	must(t, s.Put(ctx, "oo/q", []byte("1")))
	must(t, s.Put(ctx, "o/a-b", []byte("1"))) // '-' sorts before '/'
	for _, tc := range []struct{ prefix, want string }{
		{"", "o/a-b o/a/x o/a/y o/chk-1/MANIFEST oo/q p/z"},
		{"o", "o/a-b o/a/x o/a/y o/chk-1/MANIFEST oo/q"},
		{"o/", "o/a-b o/a/x o/a/y o/chk-1/MANIFEST"},
		{"o/a", "o/a-b o/a/x o/a/y"},
		{"o/a/", "o/a/x o/a/y"},
		{"o/chk-", "o/chk-1/MANIFEST"},
		{"o/a/y", "o/a/y"},
		{"o/a/yy", ""},
		{"q/", ""},
		{"q", ""},
	} {
		l, err := s.List(ctx, tc.prefix)
		if err != nil || names(l) != tc.want {
			t.Errorf("List(%q) = %s, %v; want %s", tc.prefix, names(l), err, tc.want)
		}
	}
	l, err := s.List(ctx, "o/a/")
	must(t, err)
	if len(l) != 2 || l[0].Size != 5 || l[1].Size != 5 {
		t.Fatalf("List sizes: %+v", l)
	}
	for _, o := range l {
		if !o.Created.IsZero() && o.Created.Before(before) {
			t.Errorf("List: %s Created %v, before the Put began (%v): an age computed from it would be too large", o.Name, o.Created, before)
		}
	}
	for _, bad := range []string{"/x", "a//b", "o/.tmp", "a b"} {
		if _, err := s.List(ctx, bad); !errors.Is(err, checkpoint.ErrInvalidName) {
			t.Errorf("List(%q) = %v; want ErrInvalidName", bad, err)
		}
	}
}

func testListMany(t *testing.T, s checkpoint.Storage, opts Options) {
	ctx := context.Background()
	var want []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var firstErr error
	for i := range opts.ManyObjects {
		// Shared-object-like names across key-group directories, written out of order.
		j := (i * 7919) % opts.ManyObjects
		name := fmt.Sprintf("own/shared/%05d-%05d/%020d-%016x.sst", j%7, j%7+1, j, uint64(j)*0x9e3779b97f4a7c15)
		want = append(want, name)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := s.Put(ctx, name, []byte(name[len(name)-8:])); err != nil {
				mu.Lock()
				firstErr = cmpErr(firstErr, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	must(t, firstErr)
	must(t, s.Put(ctx, "zz/x", []byte("1")))
	slices.Sort(want)
	l, err := s.List(ctx, "own/")
	must(t, err)
	if len(l) != len(want) {
		t.Fatalf("List(own/) returned %d objects, want %d", len(l), len(want))
	}
	for i, o := range l {
		if o.Name != want[i] || o.Size != 8 {
			t.Fatalf("List(own/)[%d] = %+v, want %s of 8 bytes", i, o, want[i])
		}
	}
	l, err = s.List(ctx, "own/shared/00003-")
	must(t, err)
	n := 0
	for _, w := range want {
		if strings.HasPrefix(w, "own/shared/00003-") {
			if n >= len(l) || l[n].Name != w {
				t.Fatalf("List(own/shared/00003-) = %d objects, missing %s", len(l), w)
			}
			n++
		}
	}
	if n != len(l) {
		t.Fatalf("List(own/shared/00003-) = %d objects, want %d", len(l), n)
	}
	l, err = s.List(ctx, "")
	must(t, err)
	if len(l) != len(want)+1 || l[len(l)-1].Name != "zz/x" {
		t.Fatalf("List(\"\") = %d objects, want %d ending with zz/x", len(l), len(want)+1)
	}
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

func testDelete(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	must(t, s.Put(ctx, "o/a/x", []byte("1")))
	must(t, s.Put(ctx, "o/a/y", []byte("2")))
	must(t, s.Delete(ctx, "o/a/x"))
	wantNotFound(t, s, "o/a/x")
	must(t, s.Delete(ctx, "o/a/x")) // idempotent
	must(t, s.Delete(ctx, "o/never/was"))
	must(t, s.Delete(ctx, "o/a/y/below"))
	if l, err := s.List(ctx, "o/"); err != nil || names(l) != "o/a/y" {
		t.Fatalf("List after Delete = %s, %v", names(l), err)
	}
	must(t, s.Delete(ctx, "o/a/y"))
	must(t, s.Put(ctx, "o/a/again", []byte("3"))) // a place emptied by Delete is usable again
	if l, err := s.List(ctx, "o/"); err != nil || names(l) != "o/a/again" {
		t.Fatalf("List after Deletes and a Put = %s, %v", names(l), err)
	}
	wantGet(t, s, "o/a/again", []byte("3"))
}

func testInvalidNames(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	for _, bad := range []string{"", "../x", "/abs", "a//b", ".tmp.1", "o/.hidden", "a/", "a b", "o/x?y", strings.Repeat("a", checkpoint.MaxNameLen+1)} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, checkpoint.ErrInvalidName) {
				t.Errorf("%s(%.20q) = %v; want ErrInvalidName", op, bad, err)
			}
		}
		check("Put", s.Put(ctx, bad, []byte("x")))
		check("PutReader", s.PutReader(ctx, bad, strings.NewReader("x"), 1))
		check("Create", s.Create(ctx, bad, []byte("x")))
		_, err := s.Get(ctx, bad)
		check("Get", err)
		_, err = s.GetRange(ctx, bad, 0, 1)
		check("GetRange", err)
		check("Delete", s.Delete(ctx, bad))
	}
	if l, err := s.List(ctx, ""); err != nil || len(l) != 0 {
		t.Fatalf("invalid names stored objects: %s, %v", names(l), err)
	}
}

func testContext(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	must(t, s.Put(ctx, "o/kept", []byte("k")))
	done, cancel := context.WithCancel(ctx)
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a done context = %v; want context.Canceled", op, err)
		}
	}
	check("Put", s.Put(done, "o/cancelled", []byte("x")))
	check("PutReader", s.PutReader(done, "o/cancelled2", strings.NewReader("x"), 1))
	check("Create", s.Create(done, "o/cancelled3", []byte("x")))
	_, err := s.Get(done, "o/kept")
	check("Get", err)
	_, err = s.GetRange(done, "o/kept", 0, 1)
	check("GetRange", err)
	_, err = s.List(done, "o/")
	check("List", err)
	check("Delete", s.Delete(done, "o/kept"))
	if l, err := s.List(ctx, "o/"); err != nil || names(l) != "o/kept" {
		t.Fatalf("after operations with a done context, List = %s, %v; want only o/kept", names(l), err)
	}
}

// testConcurrent: writers, readers and a lister on distinct names at once (for -race, and
// for a client shared between goroutines).
func testConcurrent(t *testing.T, s checkpoint.Storage) {
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10 {
				name := fmt.Sprintf("c/w%d/%03d", w, i)
				data := Pattern(byte(w*16+i), int64(100+i))
				if err := s.Put(ctx, name, data); err != nil {
					errs <- err
					return
				}
				b, err := s.GetRange(ctx, name, 10, 50)
				if err != nil || !bytes.Equal(b, data[10:60]) {
					errs <- fmt.Errorf("GetRange(%s) = %d bytes, %v", name, len(b), err)
					return
				}
				if _, err := s.List(ctx, fmt.Sprintf("c/w%d/", w)); err != nil {
					errs <- err
					return
				}
				if i%2 == 1 {
					if err := s.Delete(ctx, name); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	l, err := s.List(ctx, "c/")
	must(t, err)
	if len(l) != 30 {
		t.Fatalf("List(c/) = %d objects, want 30", len(l))
	}
}

func testLarge(t *testing.T, s checkpoint.Storage, opts Options) {
	ctx := context.Background()
	data := Pattern(7, opts.LargeSize)
	must(t, s.PutReader(ctx, "o/large.sst", bytes.NewReader(data), int64(len(data))))
	l, err := s.List(ctx, "o/large")
	must(t, err)
	if len(l) != 1 || l[0].Size != opts.LargeSize {
		t.Fatalf("List of the large object = %+v", l)
	}
	wantGet(t, s, "o/large.sst", data)
	n := opts.LargeSize
	for _, r := range [][2]int64{{0, 1}, {5<<20 - 3, 7}, {8<<20 - 1, 2}, {16<<20 - 5, 10}, {n - 1, 1}, {n / 3, n / 3}, {n, 0}} {
		if r[0]+r[1] > n {
			continue
		}
		b, err := s.GetRange(ctx, "o/large.sst", r[0], r[1])
		if err != nil || !bytes.Equal(b, data[r[0]:r[0]+r[1]]) {
			t.Fatalf("GetRange(%d, %d) of the large object: %d bytes, %v", r[0], r[1], len(b), err)
		}
	}
	if _, err := s.GetRange(ctx, "o/large.sst", n-1, 2); !errors.Is(err, checkpoint.ErrRange) {
		t.Fatalf("GetRange past the end of the large object = %v; want ErrRange", err)
	}
	// A large Create (a manifest can reach 256 MiB) is conditional like a small one.
	must(t, s.Create(ctx, "o/chk-9/MANIFEST", data[:1<<20]))
	if err := s.Create(ctx, "o/chk-9/MANIFEST", data[:1<<20]); !errors.Is(err, checkpoint.ErrExists) {
		t.Fatalf("second Create of a 1 MiB object = %v; want ErrExists", err)
	}
	// A large PutReader whose reader ends early stores nothing.
	err = s.PutReader(ctx, "o/large-short.sst", bytes.NewReader(data[:n-1]), n)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("large PutReader of a short reader = %v; want io.ErrUnexpectedEOF", err)
	}
	wantNotFound(t, s, "o/large-short.sst")
}
