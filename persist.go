package strata

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"reflect"
	"slices"
	"time"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// Persistence (Store.Close, Open over an existing directory).
//
// A Store with a directory keeps its state in three tiers, and only the LsmStore is on disk.
// Close persists: it waits for the background work, moves every slice and every FreshTable
// segment into L0 files of the LsmStore, then records a persist point (lsm.DB.Persist): the
// LsmStore's version, the last sequence number, and the state registry below as the point's
// opaque metadata. Open recovers the LsmStore as of its last persist point (installs after it
// — evictions and compactions of a session that crashed — are dropped by lsm's recovery),
// reads the registry back, and starts the FreshTable's sequence numbers after the persisted
// one, so new writes are newer than everything on disk.
//
// Install order (lsm doc.go, invariant 6: for every key, a file installed later holds newer
// versions). The tiers already hold data in age order: the LsmStore (oldest), the SliceTable's
// chains (each newer than what was evicted from it), the FreshTable's sealed segments in seal
// order, the active segment (newest). Close installs in that order: the slices through
// evictions — each takes only units of its chains' oldest runs, as in normal operation — until
// the SliceTable is empty; then one L0 file per FreshTable segment, oldest first.
//
// Crash safety comes from lsm: a crash before Persist returns leaves the previous persist
// point; its files are kept until the next Persist. Nothing of the root is written elsewhere.
//
// Registry (the persist point's metadata). All integers little endian, varints unsigned:
//
//	0          8         10   11   12         16
//	+----------+---------+----+----+----------+--------------------------+-----------+
//	| magic    | version | ck | 0  | length   | payload (length bytes)   | crc32c    |
//	| STRATARG | u16 = 1 | =1 |    | u32      |                          | u32       |
//	+----------+---------+----+----+----------+--------------------------+-----------+
//	ck 1 = CRC32C (Castagnoli); crc32c covers every byte before it.
//
//	payload: maxParallelism, keyGroupStart, keyGroupEnd, nextID, count (varints), then
//	count states, each: id (varint), kind (u8: 1 value, 2 list, 3 map, 4 reducing,
//	5 aggregating; part of the format), name, codec 0, codec 1 (each a varint length
//	and bytes; a codec is its Go type's identity, see codecID; "" for none).
//
// Checked in the order magic, version, checksum type, length, CRC, payload; each failure is an
// ErrCorruption with ErrBadMagic, ErrFormatVersion, ErrTruncated or ErrChecksum (a bad payload:
// ErrCorruption alone).

const (
	registryMagic   = "STRATARG"
	registryVersion = 1 // part of the format; do not change
	registryCRC32C  = 1 // checksum type; part of the format
	registryHeader  = 16
)

// persistedState is a state of the registry recovered by Open: registering its name again must
// give the same kind and codecs, and gets the same id (its data is keyed by it).
type persistedState struct {
	id     uint16
	kind   stateKind
	codecs [2]string
}

// codecID is a codec's identity in the registry: the import path and name of its Go type
// (with type arguments), "*" for pointers; "" for none. Two codecs of one type are assumed to
// encode alike (the registry cannot compare their values, as sameCodec does within a run).
func codecID(c any) string {
	if c == nil {
		return ""
	}
	t := reflect.TypeOf(c)
	ptr := ""
	for t.Kind() == reflect.Pointer && t.Name() == "" {
		ptr += "*"
		t = t.Elem()
	}
	if t.PkgPath() != "" {
		return ptr + t.PkgPath() + "." + t.Name()
	}
	return ptr + t.String()
}

// encodeRegistry returns the registry blob of the Store: every state registered now and every
// state recovered from disk that was not registered again (its data is still there).
func (s *Store) encodeRegistry() []byte {
	type rec struct {
		name   string
		id     uint16
		kind   stateKind
		codecs [2]string
	}
	var recs []rec
	for name, r := range s.states {
		recs = append(recs, rec{name, r.id, r.kind, [2]string{codecID(r.codecs[0]), codecID(r.codecs[1])}})
	}
	for name, p := range s.persisted {
		if _, ok := s.states[name]; !ok {
			recs = append(recs, rec{name, p.id, p.kind, p.codecs})
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return int(a.id) - int(b.id) })
	p := make([]byte, 0, 64+32*len(recs))
	kg := *s.opts.KeyGroups
	for _, v := range []uint64{uint64(s.maxP), uint64(kg.Start), uint64(kg.End), uint64(s.nextID), uint64(len(recs))} {
		p = binary.AppendUvarint(p, v)
	}
	for _, r := range recs {
		p = binary.AppendUvarint(p, uint64(r.id))
		p = append(p, byte(r.kind))
		for _, str := range []string{r.name, r.codecs[0], r.codecs[1]} {
			p = binary.AppendUvarint(p, uint64(len(str)))
			p = append(p, str...)
		}
	}
	b := make([]byte, registryHeader, registryHeader+len(p)+4)
	copy(b, registryMagic)
	binary.LittleEndian.PutUint16(b[8:], registryVersion)
	b[10] = registryCRC32C
	binary.LittleEndian.PutUint32(b[12:], uint32(len(p)))
	b = append(b, p...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, base.CRC32C))
}

// registry is a decoded registry blob.
type registry struct {
	maxP, kgStart, kgEnd int
	nextID               uint32
	states               map[string]persistedState
}

// decodeRegistry decodes a registry blob; errors are *base.CorruptionError values naming the
// "state registry" (it is stored inside the LSM manifest's persist point, not a file of its own)
// and the offset in the blob, with the specific cause.
func decodeRegistry(b []byte) (*registry, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt("state registry", int64(off), cause, format, args...)
	}
	if len(b) < 8 || string(b[:8]) != registryMagic {
		if len(b) < 8 {
			return nil, bad(ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
		}
		return nil, bad(ErrBadMagic, 0, "magic %q", b[:8])
	}
	if len(b) < registryHeader {
		return nil, bad(ErrTruncated, 0, "%d bytes, shorter than the header", len(b))
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != registryVersion {
		return nil, bad(ErrFormatVersion, 8, "version %d, this Strata reads %d", v, registryVersion)
	}
	if b[10] != registryCRC32C || b[11] != 0 {
		return nil, bad(nil, 10, "checksum type %d, reserved byte %d", b[10], b[11])
	}
	n := int(binary.LittleEndian.Uint32(b[12:]))
	if len(b) != registryHeader+n+4 {
		if len(b) < registryHeader+n+4 {
			return nil, bad(ErrTruncated, 12, "payload of %d bytes, %d left", n, len(b)-registryHeader)
		}
		return nil, bad(nil, 12, "payload of %d bytes, %d left", n, len(b)-registryHeader)
	}
	if got, want := crc32.Checksum(b[:registryHeader+n], base.CRC32C), binary.LittleEndian.Uint32(b[registryHeader+n:]); got != want {
		return nil, bad(ErrChecksum, registryHeader+n, "crc32c %#x, stored %#x", got, want)
	}
	p, off := b[registryHeader:registryHeader+n], registryHeader
	uv := func() (uint64, bool) {
		v, m := binary.Uvarint(p)
		if m <= 0 {
			return 0, false
		}
		p, off = p[m:], off+m
		return v, true
	}
	str := func() (string, bool) {
		l, ok := uv()
		if !ok || l > uint64(len(p)) {
			return "", false
		}
		s := string(p[:l])
		p, off = p[l:], off+int(l)
		return s, true
	}
	var hdr [5]uint64
	for i := range hdr {
		v, ok := uv()
		if !ok {
			return nil, bad(nil, off, "bad varint in the header fields")
		}
		hdr[i] = v
	}
	if hdr[0] < 1 || hdr[0] > UpperBoundMaxParallelism || hdr[1] > hdr[2] || hdr[2] >= hdr[0] || hdr[3] > maxStates+1 || hdr[4] > maxStates {
		return nil, bad(nil, registryHeader, "fields %v out of range", hdr)
	}
	r := &registry{maxP: int(hdr[0]), kgStart: int(hdr[1]), kgEnd: int(hdr[2]), nextID: uint32(hdr[3]),
		states: make(map[string]persistedState, hdr[4])}
	ids := make(map[uint16]bool, hdr[4])
	for range hdr[4] {
		at := off
		id, ok := uv()
		if !ok || id == 0 || id >= uint64(r.nextID) || ids[uint16(id)] || len(p) == 0 {
			return nil, bad(nil, at, "bad state id")
		}
		kind := stateKind(p[0])
		p, off = p[1:], off+1
		if kind < kindValue || kind > kindAggregating {
			return nil, bad(nil, at, "bad state kind %d", kind)
		}
		name, ok1 := str()
		c0, ok2 := str()
		c1, ok3 := str()
		if !ok1 || !ok2 || !ok3 || name == "" {
			return nil, bad(nil, at, "bad state name or codec")
		}
		if _, dup := r.states[name]; dup {
			return nil, bad(nil, at, "state %q twice", name)
		}
		ids[uint16(id)] = true
		r.states[name] = persistedState{id: uint16(id), kind: kind, codecs: [2]string{c0, c1}}
	}
	if len(p) != 0 {
		return nil, bad(nil, off, "%d bytes after the last state", len(p))
	}
	return r, nil
}

// checkPersisted checks a registration against the recovered registry and returns the id the
// state's data is stored under (0 when the name is new).
func (s *Store) checkPersisted(name string, kind stateKind, codecs [2]any) (uint16, error) {
	p, ok := s.persisted[name]
	if !ok {
		return 0, nil
	}
	if p.kind != kind {
		return 0, fmt.Errorf("%w: state %q is stored as %v state, requested as %v state",
			ErrIncompatibleState, name, p.kind, kind)
	}
	if c0, c1 := codecID(codecs[0]), codecID(codecs[1]); c0 != p.codecs[0] || c1 != p.codecs[1] {
		return 0, fmt.Errorf("%w: state %q is stored with codec %s/%s, requested with %s/%s",
			ErrIncompatibleState, name, p.codecs[0], p.codecs[1], c0, c1)
	}
	return p.id, nil
}

// flush moves everything the Store holds in memory into the LsmStore in install order (see the
// top of this file): it waits for the background work to end (submitting nothing new), evicts
// every slice, then writes each FreshTable segment, oldest first, as an L0 file. The tiers
// keep serving reads throughout; on error nothing is lost from memory (a failed eviction is
// cancelled, a segment stays in the FreshTable) and the on-disk persist point is unchanged.
func (t *tiers) flush() error {
	start := time.Now()
	defer func() { t.flushNanos += int64(time.Since(start)) }()
	t.closing = true
	defer func() { t.closing = false }()
	t.checkSealed()
	for {
		t.install()
		if !t.inFlight() && len(t.lsmJobs) == 0 {
			if t.ready.Load() != 0 {
				continue
			}
			break
		}
		<-t.wake
	}
	if t.bgErr != nil && !errors.Is(t.bgErr, ErrNoSpace) {
		return t.bgErr
	}
	ctx := context.Background()
	for {
		e, ok := t.sl.PickEviction()
		if !ok {
			break
		}
		sink := evictSink{low: t.low}
		err := e.Run(ctx, &sink)
		if err == nil {
			err = t.low.Install(sink.pending, t.f.Seq())
		}
		if err != nil {
			if sink.pending != nil {
				t.low.Discard(sink.pending)
			}
			if cerr := t.sl.CancelEviction(e); cerr != nil {
				panic("strata: invariant: cancelling an eviction at Close: " + cerr.Error())
			}
			return fmt.Errorf("strata: persisting slices: %w", err)
		}
		t.bumpEpoch()
		if err := t.sl.InstallEviction(e); err != nil {
			panic("strata: invariant: installing an eviction at Close: " + err.Error())
		}
		t.evictions++
		t.flushedFiles++
	}
	if n := t.sl.Stats().Slices; n != 0 {
		return fmt.Errorf("strata: invariant: %d slices left after evicting all", n)
	}
	if err := t.f.Seal(); err != nil {
		return fmt.Errorf("strata: persisting the active segment: %w", err)
	}
	for _, seg := range t.f.Sealed() {
		ents, err := t.segmentEntries(ctx, seg)
		if err == nil {
			var p any
			p, err = t.low.Evict(ents)
			ents.release()
			if err == nil {
				if err = t.low.Install(p, t.f.Seq()); err != nil {
					t.low.Discard(p)
				}
			}
		}
		if err != nil {
			return fmt.Errorf("strata: persisting a segment: %w", err)
		}
		// The segment is now in the lower tier: it leaves the FreshTable (and the transform
		// queue) at once, as a background flush's does. Kept, a Close that fails later (at
		// Persist) would leave list appends both in memory and on disk, read twice, and a
		// retried Close would persist the duplicates.
		if len(t.fifo) > 0 && t.fifo[0].seg == seg {
			t.fifo[0] = nil
			t.fifo = t.fifo[1:]
		}
		t.bumpEpoch()
		if err := t.f.DropSealed(seg); err != nil {
			return fmt.Errorf("strata: dropping a persisted segment: %w", err)
		}
		t.lastFresh = t.budget.UsedBy(memory.PurposeFreshData)
		t.flushedFiles++
	}
	t.noteL0()
	return nil
}
