package sstable

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// seedFiles returns a few valid files for the fuzz corpora.
func seedFiles(f *testing.F) [][]byte { return seedFilesT(f) }

func seedFilesT(f testing.TB) [][]byte {
	golden, err := os.ReadFile(filepath.Join("testdata", "v1.sst"))
	if err != nil {
		f.Fatal(err)
	}
	out := [][]byte{golden}
	for i, g := range []genOpts{
		{keys: 5, maxVersions: 2, mapShare: 40, mapSize: 3, collide: 40, maxValue: 8},
		{keys: 30, maxVersions: 3, mapShare: 30, mapSize: 6, collide: 20, maxValue: 30, bigValue: 5, bigSize: 100},
	} {
		es := genEntries(rand.New(rand.NewPCG(uint64(i), 9)), g)
		fs := vfs.NewMem()
		writeFile(f, fs, "f.sst", es, WriterOptions{BlockSize: 200})
		out = append(out, fileBytes(f, fs, "f.sst"))
	}
	fs := vfs.NewMem()
	writeFile(f, fs, "e.sst", nil, WriterOptions{})
	return append(out, fileBytes(f, fs, "e.sst"))
}

// seal recomputes the trailer CRC of the block b (payload + trailer).
func seal(b []byte) {
	if len(b) >= trailerSize {
		n := len(b) - trailerSize
		le.PutUint32(b[n+4:], checksum(b[:n+4]))
	}
}

// reseal recomputes, as far as the (possibly garbage) footer and index allow,
// every checksum of a file, so that the fuzzer reaches the structural checks
// behind them.
func reseal(b []byte) {
	if len(b) < minFileSize {
		return
	}
	ft := b[len(b)-footerSize:]
	le.PutUint32(ft[104:], checksum(ft[:104]))
	u := func(i int) uint64 { return le.Uint64(ft[8*i:]) }
	in := func(off, n uint64) bool { return off <= uint64(len(b)) && n <= uint64(len(b))-off }
	if off, n := u(2), u(3); n > 0 && in(off, n) {
		seal(b[off : off+n])
	}
	if off, n := u(0), u(1); in(off, n) {
		idx := b[off : off+n]
		seal(idx)
		for i := 0; (i+1)*indexRecordSize <= len(idx)-trailerSize && i < 1000; i++ {
			q := idx[i*indexRecordSize:]
			if bo, bn := le.Uint64(q[16:]), uint64(le.Uint32(q[24:])); in(bo, bn) {
				seal(b[bo : bo+bn])
			}
		}
		seal(idx)
	}
}

// exercise reads a file every way; it must not panic, and if Open accepted
// the file, iteration must be in order and, if strict (checksums were not
// recomputed, so an accepted file is an intact one), Get must find what
// iteration found. A file with recomputed checksums may hold a filter or
// index that lies: reads then miss entries, which no checksum can tell.
func exercise(t testing.TB, b []byte, c *Cache, strict bool) {
	r, err := Open(readOnly(b), "fuzz", int64(len(b)), c, 1)
	if err != nil {
		if !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("Open error %v does not match base.ErrCorruption", err)
		}
		return
	}
	defer r.Close()
	it := r.NewIter()
	var all []ent
	for it.Next() && len(all) < 10000 {
		all = append(all, own(it.Entry()))
	}
	if it.Err() != nil {
		if !errors.Is(it.Err(), base.ErrCorruption) {
			t.Fatalf("Iter error %v", it.Err())
		}
		return
	}
	for i := range all {
		if i > 0 && cmpEnt(all[i-1], all[i]) >= 0 {
			t.Fatalf("iteration out of order at %d: %v then %v", i, all[i-1], all[i])
		}
	}
	for i := 0; i < len(all); i += 1 + len(all)/20 {
		x := all[i]
		found := false
		err := r.Get(x.Order, x.Key, x.UserKey, func(e *base.Entry) bool {
			found = found || equalEnt(own(e), x)
			return true
		})
		if strict && err == nil && !found {
			t.Fatalf("Get misses iterated entry %v", x)
		}
		_ = r.MapRange(x.Order, x.Key, func(*base.Entry) bool { return true })
		it := r.NewIter()
		it.SeekGE(x.Order)
		if strict && it.Next() && it.Entry().Order != x.Order && it.Err() == nil {
			t.Fatalf("SeekGE(%#x) lands on %#x", x.Order, it.Entry().Order)
		}
	}
	for _, o := range []uint64{0, 1, r.meta.MinOrder, r.meta.MaxOrder, ^uint64(0)} {
		_ = r.Get(o, nil, nil, func(*base.Entry) bool { return true })
	}
}

// FuzzOpen feeds whole files to Open and the read paths; with reseal set,
// checksums are recomputed first so that the footer, index, filter and block
// decoders behind them are reached.
func FuzzOpen(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b, false)
		f.Add(b, true)
		c := bytes.Clone(b)
		c[len(c)/2] ^= 0x40
		f.Add(c, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		b = bytes.Clone(b)
		if fix {
			reseal(b)
		}
		exercise(t, b, nil, !fix)
	})
}

// FuzzFooter feeds footers (with their CRC fixed up) and file sizes to
// decodeFooter.
func FuzzFooter(f *testing.F) {
	for _, b := range seedFiles(f) {
		f.Add(b[len(b)-footerSize:], int64(len(b)))
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		if len(b) == footerSize {
			b = bytes.Clone(b)
			le.PutUint32(b[104:], checksum(b[:104]))
		}
		ft, err := decodeFooter(b, size)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatal(err)
			}
			return
		}
		if ft.indexOff+ft.indexLen+footerSize != uint64(size) || ft.filterOff < headerSize {
			t.Fatalf("accepted footer %+v for size %d", ft, size)
		}
	})
}

// FuzzBlock feeds data blocks to parseBlock, validate, seek and decodeEntry.
// With fix set the trailer's CRC is recomputed so the structure is reached.
func FuzzBlock(f *testing.F) {
	for _, b := range seedFiles(f) {
		r, err := Open(readOnly(b), "", int64(len(b)), nil, 0)
		if err != nil {
			f.Fatal(err)
		}
		for _, h := range r.idx {
			blk := b[h.off : h.off+uint64(h.length)]
			f.Add(blk, true, h.first, h.last)
		}
	}
	f.Add([]byte{}, true, uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, raw []byte, fix bool, first, last uint64) {
		raw = bytes.Clone(raw)
		if fix {
			seal(raw)
		}
		blk, err := parseBlock(raw)
		if err != nil {
			if !errors.Is(err, base.ErrCorruption) {
				t.Fatal(err)
			}
			return
		}
		var e base.Entry
		for _, o := range []uint64{first, last, 0, first + 1} {
			if off := blk.seek(o); off >= 0 && decodeEntry(blk.data, off, &e) < 0 {
				_ = off // a damaged index may point anywhere; decoding must not panic
			}
		}
		// Decoding arbitrary offsets must not panic.
		for off := -1; off <= len(blk.data)+1; off += 1 + len(blk.data)/16 {
			decodeEntry(blk.data, off, &e)
		}
		if err := blk.validate(first, last, &e); err != nil {
			return
		}
		// A validated block decodes completely, in order, and seek finds
		// every run's first entry.
		n := 0
		var prev ent
		for off := 0; off < len(blk.data); n++ {
			next := decodeEntry(blk.data, off, &e)
			if next <= off {
				t.Fatalf("validated block fails to decode at %d", off)
			}
			if n == 0 || e.Order != prev.Order {
				if blk.seek(e.Order) != off {
					t.Fatalf("seek(%#x) misses %d", e.Order, off)
				}
			}
			prev = own(&e)
			off = next
		}
		if n != blk.entries {
			t.Fatalf("%d entries, footer says %d", n, blk.entries)
		}
	})
}

// FuzzFilter feeds filter payloads to decodeFilter and mayContain, and
// checks that a filter built from Orders has no false negatives.
func FuzzFilter(f *testing.F) {
	for _, b := range seedFiles(f) {
		r, err := Open(readOnly(b), "", int64(len(b)), nil, 0)
		if err != nil {
			f.Fatal(err)
		}
		if r.filter != nil {
			p := append(bytes.Clone(r.filter.bits), r.filter.k, 0, 0, 0)
			f.Add(binary.LittleEndian.AppendUint32(p, r.filter.lines), 10)
		}
	}
	f.Add([]byte{7, 0, 0, 0, 0, 0, 0, 0}, 1)
	f.Fuzz(func(t *testing.T, p []byte, bitsPerKey int) {
		if fl, err := decodeFilter(p); err == nil {
			for i := 0; i+8 <= len(p); i += 8 {
				fl.mayContain(le.Uint64(p[i:]))
			}
		} else if !errors.Is(err, base.ErrCorruption) {
			t.Fatal(err)
		}
		bitsPerKey = 1 + (bitsPerKey&63+64)%64
		var orders []uint64
		for i := 0; i+8 <= len(p); i += 8 {
			orders = append(orders, le.Uint64(p[i:]))
		}
		fl, err := decodeFilter(appendFilter(nil, orders, bitsPerKey))
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range orders {
			if !fl.mayContain(o) {
				t.Fatalf("false negative for %#x", o)
			}
		}
	})
}

// TestResealedDamage damages valid files at random and recomputes every
// checksum, so the damage reaches the structural checks: reads must never
// panic, and stay fast (no damaged length or count may make a read loop or
// allocate without bound).
func TestResealedDamage(t *testing.T) {
	seeds := seedFilesT(t)
	r := rand.New(rand.NewPCG(1, 2))
	n := 5000
	if testing.Short() || raceEnabled {
		n = 500
	}
	for i := 0; i < n; i++ {
		b := bytes.Clone(seeds[r.IntN(len(seeds))])
		for k := 0; k < 1+r.IntN(4); k++ {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		reseal(b)
		start := time.Now()
		exercise(t, b, nil, false)
		if d := time.Since(start); d > time.Second {
			t.Fatalf("input %d took %v", i, d)
		}
	}
}
