package changelog

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"unsafe"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

const (
	// tailRead is how many bytes at an object's end Replay reads first, hoping the footer
	// fits (it does for up to ~1000 stores per persist); a larger footer takes one more read.
	tailRead = 64 << 10
	// coalesceGap is the largest gap between two wanted segments of one object that Replay
	// reads through rather than issuing a second ranged read.
	coalesceGap = 256 << 10
)

// Replay calls visit with every record of the segments segs (changelog handles from
// Log.Handles or a manifest, in any order, duplicates allowed) whose key group is in kg, in
// sequence-number order (records of equal seq in segment order). It is ReplayRange over every
// sequence number.
func Replay(ctx context.Context, s checkpoint.Storage, segs []checkpoint.Object, kg KeyGroupRange, visit func(*Record) error) error {
	return ReplayRange(ctx, s, segs, kg, 0, math.MaxUint64, visit)
}

// ReplayRange is Replay restricted to records with from <= seq <= to: a restore replays
// (materialized seq, checkpoint's last seq], skipping what the snapshot holds and what was
// appended after the cut and persisted with it.
//
// For each distinct object it reads the footer once (the object's last bytes; Size comes from
// the handle) and then only the byte ranges of the listed segments that can hold records in
// kg and [from, to], adjacent ones in one ranged read (FLINK-27155: never the whole object
// per segment). Each segment is checked against the footer (its offset, length and CRC must
// match an entry) and by its CRC32C, and each record by the rules of doc.go; a record outside
// kg is never passed to visit (rescaling). The Record and its byte slices are valid only
// during the call to visit; an error from visit stops the replay and is returned as is.
//
// Memory: the fetched segments of every object are held until the replay ends (the records
// are sorted by seq across objects), so a replay holds about the bytes it replays.
// Errors: a *base.CorruptionError naming the object and offset for damage, an object shorter
// than its handles' Size (checkpoint.GetObjectRange) or a handle that does not match the
// footer; the Storage's errors wrapped with the object's name.
func ReplayRange(ctx context.Context, s checkpoint.Storage, segs []checkpoint.Object, kg KeyGroupRange, from, to uint64, visit func(*Record) error) error {
	b, err := Collect(ctx, s, segs, kg, from, to)
	if err != nil {
		return err
	}
	var r Record
	for i := range b.Len() {
		if err := b.Record(i, &r); err != nil {
			return err
		}
		if err := visit(&r); err != nil {
			return err
		}
	}
	return nil
}

// Batch is the checked records of a Collect, in sequence-number order, held in the byte
// spans read (about the bytes replayed). Read-only: safe for concurrent readers.
type Batch struct {
	spans   [][]byte
	vers    []uint16 // format version of each span's object
	recs    []recordRef
	scratch []byte // the spans' one buffer off the Go heap (CollectOptions.OffHeap), or nil
	index   []byte // the record index's memory off the Go heap (CollectOptions.OffHeap), or nil
}

// CollectOptions are CollectParallel's.
type CollectOptions struct {
	// Run, if not nil, reads and checks the objects: it must call f(i) once for every i in
	// [0, n) — on several goroutines at once or one after the other — and return the first
	// error f returned (or its own): this package starts no goroutine, a restore's scheduler
	// does (the engine's). f(i) reads object i of the log only and writes only its own part
	// of the result, so calls may overlap; the Storage must allow concurrent reads
	// (checkpoint.Storage does). Nil reads them one after the other.
	Run func(n int, f func(i int) error) error
	// OffHeap, when the Storage reads into the caller's memory (checkpoint.RangeReaderInto:
	// DirStorage, CacheReader), reads every span into one buffer mapped outside the Go heap
	// with huge pages (memory.MapScratch) instead of a fresh Go slice per ranged read: a
	// replay of a long tail otherwise spends about 40 % of its CPU in the page faults of that
	// fresh heap (one per 4 KiB), and leaves the garbage collector the tail's size to reclaim.
	// The record index (16 bytes per record) goes there too: a bulk replay reads it at random
	// (in key order), and on the Go heap's small pages each of those reads was a TLB miss
	// before the record's own (a third of a 64 MiB tail's replay CPU).
	// Any other Storage returns slices of its own, which the Batch keeps as without OffHeap
	// (a copy into the buffer would only add one). Either way, call Batch.Release when its
	// records are no longer needed.
	OffHeap bool
}

// Collect reads and checks what ReplayRange would visit and returns it as a Batch, so that a
// caller can look at every record before applying any (a restore drops the ones a later
// record supersedes). Errors: ReplayRange's.
func Collect(ctx context.Context, s checkpoint.Storage, segs []checkpoint.Object, kg KeyGroupRange, from, to uint64) (*Batch, error) {
	return CollectParallel(ctx, s, segs, kg, from, to, CollectOptions{})
}

// CollectParallel is Collect with the objects' segments read and checked as o says (o.Run,
// o.OffHeap). The Batch is the one Collect returns. Errors: ReplayRange's; o.Run's; a
// wrapped memory error when OffHeap cannot map its buffer. Nothing stays mapped on error.
func CollectParallel(ctx context.Context, s checkpoint.Storage, segs []checkpoint.Object, kg KeyGroupRange, from, to uint64, o CollectOptions) (b *Batch, err error) {
	run := o.Run
	byName := map[string][]checkpoint.Object{}
	var names []string
	for _, h := range segs {
		if h.Kind != checkpoint.KindChangelog || !h.Packed {
			return nil, fmt.Errorf("changelog: replay: %s is not a packed changelog segment (kind %s, packed %v)", h.Name, h.Kind, h.Packed)
		}
		if _, ok := byName[h.Name]; !ok {
			names = append(names, h.Name)
		}
		byName[h.Name] = append(byName[h.Name], h)
	}
	slices.Sort(names)
	// The footers first: their record counts size the record index once (grown by append,
	// its copies were a third of a 1.6-million-record Collect's CPU), and give each object
	// its own range of it.
	plans := make([]objectPlan, len(names))
	records := 0
	for i, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var err error
		if plans[i], err = planObject(ctx, s, name, byName[name], kg, from, to); err != nil {
			return nil, err
		}
		plans[i].at = records
		for _, si := range plans[i].want {
			records += int(min(int64(si.Records), si.Length)) // a record takes a byte at least: a damaged count allocates no more than the read
		}
	}
	var scratch []byte
	_, into := s.(checkpoint.RangeReaderInto)
	if o.OffHeap && into {
		total := int64(0)
		for i := range plans {
			plans[i].buf = total
			coalesce(plans[i].want, func(_, _ int, start, end int64) { total += end - start })
		}
		if scratch, err = memory.MapScratch(int(total)); err != nil {
			return nil, fmt.Errorf("changelog: replay: a read buffer of %d bytes: %w", total, err)
		}
		defer func() {
			if err != nil {
				memory.UnmapScratch(scratch)
			}
		}()
		for i := range plans {
			end := int64(len(scratch))
			if i+1 < len(plans) {
				end = plans[i+1].buf
			}
			plans[i].into = scratch[plans[i].buf:end:end]
		}
	}
	var all []recordRef
	var index []byte
	if scratch != nil {
		size := int(unsafe.Sizeof(recordRef{}))
		if index, err = memory.MapScratch(records * size); err != nil {
			return nil, fmt.Errorf("changelog: replay: a record index of %d records: %w", records, err)
		}
		defer func() {
			if err != nil {
				memory.UnmapScratch(index)
			}
		}()
		all = unsafe.Slice((*recordRef)(unsafe.Pointer(unsafe.SliceData(index))), len(index)/size)[:records]
	} else {
		all = make([]recordRef, records)
	}
	parts := make([]Batch, len(plans))
	read := func(i int) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := len(all)
		if i+1 < len(plans) {
			end = plans[i+1].at
		}
		parts[i].recs = all[plans[i].at:plans[i].at:end]
		return readObjectSegments(ctx, s, plans[i], kg, from, to, &parts[i])
	}
	if run == nil {
		run = func(n int, f func(i int) error) error {
			for i := range n {
				if err := f(i); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if err := run(len(plans), read); err != nil {
		return nil, err
	}
	// The objects' parts joined: each record index moved down to the end of the ones before
	// (copy moves overlapping ranges safely), its span renumbered. A part that outgrew its
	// range (more records than its footer counted) left it: then into a new index.
	out := all[:0]
	for i := range parts {
		if p := parts[i].recs; len(p) > 0 && (plans[i].at >= len(all) || &p[0] != &all[plans[i].at]) {
			out = make([]recordRef, 0, records)
			break
		}
	}
	b = &Batch{scratch: scratch, index: index}
	n := 0
	for i := range parts {
		p := &parts[i]
		base := len(b.spans)
		b.spans = append(b.spans, p.spans...)
		b.vers = append(b.vers, p.vers...)
		out = append(out, p.recs...)
		for j := n; j < len(out); j++ {
			out[j].span += uint32(base)
		}
		n = len(out)
	}
	b.recs = out
	sort.SliceStable(b.recs, func(i, j int) bool { return b.recs[i].seq < b.recs[j].seq })
	return b, nil
}

// Len returns the number of records.
func (b *Batch) Len() int { return len(b.recs) }

// Release ends the Batch: with CollectOptions.OffHeap it unmaps the buffer its spans are in
// and its record index, and the Batch, its records' byte slices and anything taken from them must not be used
// afterwards (a call of the Batch then panics on its emptied index; a slice kept from a
// Record faults). Without OffHeap it only drops the Batch's references. Idempotent; not safe
// concurrently with any other use of the Batch. Errors: the first unmap error (that mapping
// stays; the other is unmapped all the same).
func (b *Batch) Release() error {
	sc, ix := b.scratch, b.index
	b.spans, b.vers, b.recs, b.scratch, b.index = nil, nil, nil, nil, nil
	var err error
	if ix != nil {
		err = memory.UnmapScratch(ix)
	}
	if sc != nil {
		if e := memory.UnmapScratch(sc); err == nil {
			err = e
		}
	}
	return err
}

// Record decodes record i (0 <= i < Len, in seq order) into r; r's byte slices alias the
// Batch and stay valid as long as it does. The records were checked by Collect: an error
// here is a broken invariant (memory damaged since).
func (b *Batch) Record(i int, r *Record) error {
	rr := &b.recs[i]
	if _, err := decodeRecord("", 0, b.spans[rr.span][rr.off:], b.vers[rr.span], 0, r); err != nil {
		return fmt.Errorf("strata: invariant: a checked changelog record no longer decodes: %w", err)
	}
	r.Seq = rr.seq // a version 2 record holds only its delta from the one before it
	return nil
}

// Touch reads and returns the first byte of record i (0 <= i < Len). A caller that decodes the
// records in another order than the Batch's (a bulk replay, sorted by key) touches a group of
// them before decoding them, so that their cache and TLB misses (the record index, then the
// record's span) overlap instead of queueing one after the other. Safe for concurrent use.
func (b *Batch) Touch(i int) byte {
	rr := &b.recs[i]
	return b.spans[rr.span][rr.off]
}

// maxSpan is the longest range coalesce joins segments into: a record's offset in its span
// is a uint32 (recordRef). A single segment longer than that (no Writer makes one:
// MaxThreshold) is refused by readSpan as corrupt.
const maxSpan = math.MaxUint32

// recordRef places a checked record to visit: the span it is in and its offset there. 16
// bytes (recordRefSize): a long tail's index is one entry per record.
type recordRef struct {
	seq  uint64
	span uint32
	off  uint32 // below 4 GiB: readSpan refuses a longer span
}

// recordRefSize is recordRef's size; the array fails to compile if it changes.
const recordRefSize = 16

var _ = [1]struct{}{}[unsafe.Sizeof(recordRef{})-recordRefSize]

// objectPlan is what Collect reads of one object: its name and size, and the footer entries of
// the segments that can hold wanted records, by offset, each once.
type objectPlan struct {
	name string
	size int64
	want []*SegmentInfo
	at   int    // the first of its places in the record index (Collect)
	buf  int64  // where its ranges start in the off-heap buffer (CollectOptions.OffHeap)
	into []byte // its part of that buffer; nil without one
}

// coalesce calls f for each ranged read of the segments want (sorted by offset): segments
// want[i:j], bytes [start, end) of the object — adjacent segments, and those less than
// coalesceGap apart, in one read.
func coalesce(want []*SegmentInfo, f func(i, j int, start, end int64)) {
	for i := 0; i < len(want); {
		start, end := want[i].Offset, want[i].Offset+want[i].Length
		j := i + 1
		for j < len(want) && want[j].Offset <= end+coalesceGap && max(end, want[j].Offset+want[j].Length)-start <= maxSpan {
			end = max(end, want[j].Offset+want[j].Length)
			j++
		}
		f(i, j, start, end)
		i = j
	}
}

// planObject reads the footer of object name and returns the segments hs of it that can hold
// wanted records, after checking the handles against the footer.
func planObject(ctx context.Context, s checkpoint.Storage, name string, hs []checkpoint.Object, kg KeyGroupRange, from, to uint64) (objectPlan, error) {
	size := hs[0].Size
	for _, h := range hs {
		if h.Size != size {
			return objectPlan{}, base.Corrupt(name, -1, nil, "handles give the object sizes %d and %d", size, h.Size)
		}
	}
	if size < headerLen+trailerLen {
		return objectPlan{}, base.Corrupt(name, 0, base.ErrTruncated, "object of %d bytes has no room for a header and a trailer", size)
	}
	footer, err := readFooter(ctx, s, name, size)
	if err != nil {
		return objectPlan{}, err
	}
	// The wanted footer entries, each once.
	var want []*SegmentInfo
	for _, h := range hs {
		i := slices.IndexFunc(footer, func(si SegmentInfo) bool { return si.Offset == h.Offset && si.Length == h.Length })
		if i < 0 {
			return objectPlan{}, base.Corrupt(name, h.Offset, nil, "no segment [%d, +%d) in the footer", h.Offset, h.Length)
		}
		si := &footer[i]
		if si.CRC != h.CRC || si.KeyGroups != h.KeyGroups || si.MinSeq != h.MinOrder || si.MaxSeq != h.MaxOrder {
			return objectPlan{}, base.Corrupt(name, h.Offset, nil, "segment at %d: handle (crc32c %#08x, %s, seqs %d..%d) does not match the footer (crc32c %#08x, %s, seqs %d..%d)",
				h.Offset, h.CRC, h.KeyGroups, h.MinOrder, h.MaxOrder, si.CRC, si.KeyGroups, si.MinSeq, si.MaxSeq)
		}
		if !overlaps(si.KeyGroups, kg) || si.MaxSeq < from || si.MinSeq > to || slices.Contains(want, si) {
			continue
		}
		want = append(want, si)
	}
	slices.SortFunc(want, func(a, b *SegmentInfo) int { return cmpInt64(a.Offset, b.Offset) })
	return objectPlan{name: name, size: size, want: want}, nil
}

// readObjectSegments reads the segments p plans, checks them, appends the byte spans read to
// b.spans (their version to b.vers) and a recordRef for every wanted record to b.recs.
func readObjectSegments(ctx context.Context, s checkpoint.Storage, p objectPlan, kg KeyGroupRange, from, to uint64, b *Batch) error {
	want := p.want
	var err error
	coalesce(want, func(i, j int, start, end int64) {
		if err == nil {
			err = readSpan(ctx, s, &p, kg, from, to, want[i:j], start, end, b)
		}
	})
	return err
}

// readSpan reads bytes [start, end) of object p, the segments want, into a span of b (into
// p's part of the off-heap buffer if it has one) and checks them.
func readSpan(ctx context.Context, s checkpoint.Storage, p *objectPlan, kg KeyGroupRange, from, to uint64, want []*SegmentInfo, start, end int64, b *Batch) error {
	name, size := p.name, p.size
	if end-start > maxSpan {
		return base.Corrupt(name, start, nil, "a span of %d bytes of segments to read: more than a record index addresses (4 GiB)", end-start)
	}
	var data []byte
	if p.into != nil {
		data, p.into = p.into[:end-start:end-start], p.into[end-start:]
		if err := checkpoint.ReadObjectRange(ctx, s.(checkpoint.RangeReaderInto), name, size, start, data); err != nil {
			return fmt.Errorf("changelog: replay: %w", err)
		}
	} else {
		var err error
		if data, err = checkpoint.GetObjectRange(ctx, s, name, size, start, end-start); err != nil {
			return fmt.Errorf("changelog: replay: %w", err)
		}
		if int64(len(data)) != end-start {
			return base.Corrupt(name, start, base.ErrTruncated, "read %d bytes of %d", len(data), end-start)
		}
	}
	span := uint32(len(b.spans))
	b.spans = append(b.spans, data)
	b.vers = append(b.vers, want[0].Version)
	for _, si := range want {
		segStart := int(si.Offset - start)
		err := checkSegment(name, si, data[segStart:segStart+int(si.Length)], func(off int, r *Record) error {
			if contains(kg, r.KeyGroup) && r.Seq >= from && r.Seq <= to {
				b.recs = append(b.recs, recordRef{seq: r.Seq, span: span, off: uint32(segStart + off)})
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readFooter reads and decodes the footer of object name of size bytes: its last tailRead
// bytes first, then the rest of the footer if it is longer.
func readFooter(ctx context.Context, s checkpoint.Storage, name string, size int64) ([]SegmentInfo, error) {
	n := min(size, tailRead)
	tail, err := checkpoint.GetObjectRange(ctx, s, name, size, size-n, n)
	if err != nil {
		return nil, fmt.Errorf("changelog: replay: read the footer of %s: %w", name, err)
	}
	if int64(len(tail)) != n {
		return nil, base.Corrupt(name, size-n, base.ErrTruncated, "read %d bytes of %d", len(tail), n)
	}
	fl, _, err := footerLenOf(name, size, tail)
	if err != nil {
		return nil, err
	}
	if need := int64(fl + trailerLen); need > n {
		more, err := checkpoint.GetObjectRange(ctx, s, name, size, size-need, need-n)
		if err != nil {
			return nil, fmt.Errorf("changelog: replay: read the footer of %s: %w", name, err)
		}
		if int64(len(more)) != need-n {
			return nil, base.Corrupt(name, size-need, base.ErrTruncated, "read %d bytes of %d", len(more), need-n)
		}
		tail = append(more, tail...)
	}
	return decodeFooter(name, size, tail)
}
