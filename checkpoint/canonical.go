package checkpoint

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/strata-db/strata/internal/base"
)

// The canonical savepoint format (doc.go, "Canonical savepoint layout"): a stream of logical
// entries that depends on no file format of the engine.

const (
	canonicalMagic   = "STRATACS"
	canonicalVersion = 1 // what CanonicalWriter writes; part of the format; do not change
	canonicalHeader  = 24
	canonicalFooter  = 24
	canonicalBlockH  = 12 // kind, 0, kg, count, length
	canonicalIndexE  = 16 // one index entry
	// CanonicalBlockTarget is the payload size after which CanonicalWriter ends an entries or
	// timers block (a block holds whole records, so one may be larger by its last record).
	CanonicalBlockTarget = 64 << 10
	// MaxCanonicalBlock bounds a block's payload (a record larger than this is refused by
	// the writer and the reader treats a longer length as damage).
	MaxCanonicalBlock = 256 << 20
)

// Block kinds of a canonical savepoint; part of the format; do not change.
const (
	canonicalMeta    = 1
	canonicalEntries = 2
	canonicalTimers  = 3
)

// StateKind is the kind of a state in a canonical savepoint's registry. The values are the
// root package's state kinds (its registry, persist.go); part of the format; do not change.
type StateKind uint8

const (
	StateValue        StateKind = 1 // one value per (key, namespace)
	StateList         StateKind = 2 // a list of elements per (key, namespace)
	StateMap          StateKind = 3 // user key → value entries per (key, namespace)
	StateReducing     StateKind = 4 // one value per (key, namespace), the reduction so far
	StateAggregating  StateKind = 5 // one value per (key, namespace), the accumulator
	StateTimerService StateKind = 6 // a timer service: names timers, holds no entries
)

// String returns the kind's name as the root package prints it ("value", "list", …).
func (k StateKind) String() string {
	switch k {
	case StateValue:
		return "value"
	case StateList:
		return "list"
	case StateMap:
		return "map"
	case StateReducing:
		return "reducing"
	case StateAggregating:
		return "aggregating"
	case StateTimerService:
		return "timer service"
	}
	return fmt.Sprintf("StateKind(%d)", uint8(k))
}

// CanonicalState is one state of a canonical savepoint's registry: its name (how Flink and
// Strata identify state), kind, whether its values carry TTL timestamps, and the ids of its
// codecs (the root package's codecID: key/namespace and value codec; informative, matched by
// a restore as the root registry's are).
type CanonicalState struct {
	Name   string
	Kind   StateKind
	TTL    bool
	Codecs [2]string
}

// CanonicalMeta is what a canonical savepoint holds besides entries and timers: the job's
// MaxParallelism, the key groups it covers, the state registry (entries and timers name
// their state by index into States), the caller's input position and the operator state (the
// root package's operator state blob, opaque here: operator lists, union lists and broadcast
// state, with its own magic, version and CRC32C).
type CanonicalMeta struct {
	MaxParallelism int
	KeyGroups      KeyGroupRange
	States         []CanonicalState
	InputPosition  []byte
	OperatorState  []byte
}

// CanonicalEntry is one logical entry of a canonical savepoint: the state (index into
// CanonicalMeta.States), the key group, serialized key and namespace, and by the state's kind
// a value (value, reducing, aggregating), a map entry (UserKey and Value) or a list
// (Elements). TTL holds the last-access timestamp (milliseconds, the state's TTL clock) of the
// value or map entry and ElementTTLs the one of each list element, only for states with TTL.
// Byte slices returned by a reader alias its buffer: valid until the callback returns.
type CanonicalEntry struct {
	KeyGroup    uint16
	State       int
	Key         []byte
	Namespace   []byte
	UserKey     []byte
	Value       []byte
	Elements    [][]byte
	TTL         int64
	ElementTTLs []int64
}

// CanonicalTimer is one timer of a canonical savepoint: its timer service (index into
// CanonicalMeta.States, a StateTimerService), time domain (0 event time, 1 processing time,
// package timer's Domain), key group, the key's hash (the int32 the key group was derived
// from), timestamp (milliseconds), key and namespace bytes.
type CanonicalTimer struct {
	KeyGroup  uint16
	Service   int
	Domain    uint8
	KeyHash   int32
	Timestamp int64
	Key       []byte
	Namespace []byte
}

// canonicalBlock is one block of the index: its kind, key group, offset and total length
// (block header, payload and CRC).
type canonicalBlock struct {
	kind   uint8
	kg     uint16
	length uint32
	off    int64
}

// CanonicalWriter writes a canonical savepoint to an io.Writer: NewCanonicalWriter (header
// and meta block), Add and AddTimer in key-group order (each kind's key groups not
// decreasing), Close (last blocks, index and footer). Not safe for concurrent use. Errors:
// ErrInvalidEntry for an entry that breaks the rules (out of order, unknown state, a shape
// that does not fit the state's kind, out of the meta's key groups); the writer's errors.
// After an error the writer is unusable.
type CanonicalWriter struct {
	w       io.Writer
	meta    CanonicalMeta
	off     int64
	blocks  []canonicalBlock
	cur     [4][]byte // payload in progress by block kind
	curKG   [4]uint16
	curN    [4]uint32
	started [4]bool
	entries int64
	timers  int64
	rec     []byte // the record being encoded (reused)
	target  int    // CanonicalBlockTarget; tests make it small
	err     error
}

// ErrInvalidEntry is returned by CanonicalWriter for an entry or timer that breaks the
// format's rules (CanonicalWriter's doc comment).
var ErrInvalidEntry = fmt.Errorf("checkpoint: invalid canonical savepoint entry")

// NewCanonicalWriter writes the header and the meta block of a canonical savepoint to w.
// Errors: ErrInvalidEntry for a meta that breaks the rules (MaxParallelism outside 1..32768,
// a key-group range outside it, a state without a name, a duplicate name, an unknown kind,
// blobs above MaxBlob); w's errors.
func NewCanonicalWriter(w io.Writer, meta CanonicalMeta) (*CanonicalWriter, error) {
	if meta.MaxParallelism < 1 || meta.MaxParallelism > 32768 || meta.KeyGroups.Start < 0 ||
		meta.KeyGroups.Start > meta.KeyGroups.End || meta.KeyGroups.End >= meta.MaxParallelism {
		return nil, fmt.Errorf("%w: max parallelism %d, key groups %v", ErrInvalidEntry, meta.MaxParallelism, meta.KeyGroups)
	}
	if len(meta.InputPosition) > MaxBlob || len(meta.OperatorState) > MaxBlob {
		return nil, fmt.Errorf("%w: input position or operator state above %d bytes", ErrInvalidEntry, MaxBlob)
	}
	seen := map[string]bool{}
	var p []byte
	for _, st := range meta.States {
		if st.Name == "" || seen[st.Name] || st.Kind < StateValue || st.Kind > StateTimerService {
			return nil, fmt.Errorf("%w: state %q of kind %v (empty, duplicate or unknown)", ErrInvalidEntry, st.Name, st.Kind)
		}
		seen[st.Name] = true
		p = appendBytes(p, []byte(st.Name))
		flags := byte(0)
		if st.TTL {
			flags = 1
		}
		p = append(p, byte(st.Kind), flags)
		p = appendBytes(appendBytes(p, []byte(st.Codecs[0])), []byte(st.Codecs[1]))
	}
	p = appendBytes(appendBytes(p, meta.InputPosition), meta.OperatorState)
	cw := &CanonicalWriter{w: w, meta: meta, target: CanonicalBlockTarget}
	h := make([]byte, canonicalHeader)
	copy(h, canonicalMagic)
	le := binary.LittleEndian
	le.PutUint16(h[8:], canonicalVersion)
	h[10] = 1 // CRC32C
	le.PutUint32(h[12:], uint32(meta.MaxParallelism))
	le.PutUint16(h[16:], uint16(meta.KeyGroups.Start))
	le.PutUint16(h[18:], uint16(meta.KeyGroups.End))
	le.PutUint32(h[20:], crc32.Checksum(h[:20], base.CRC32C))
	if err := cw.write(h); err != nil {
		return nil, err
	}
	if err := cw.block(canonicalMeta, 0, uint32(len(meta.States)), p); err != nil {
		return nil, err
	}
	return cw, nil
}

// write appends b to the stream.
func (cw *CanonicalWriter) write(b []byte) error {
	if cw.err != nil {
		return cw.err
	}
	n, err := cw.w.Write(b)
	cw.off += int64(n)
	if err != nil {
		cw.err = err
	}
	return err
}

// block writes one block and records it in the index.
func (cw *CanonicalWriter) block(kind uint8, kg uint16, count uint32, payload []byte) error {
	if len(payload) > MaxCanonicalBlock {
		cw.err = fmt.Errorf("%w: a block of %d bytes, more than %d", ErrInvalidEntry, len(payload), MaxCanonicalBlock)
		return cw.err
	}
	le := binary.LittleEndian
	var h [canonicalBlockH]byte
	h[0] = kind
	le.PutUint16(h[2:], kg)
	le.PutUint32(h[4:], count)
	le.PutUint32(h[8:], uint32(len(payload)))
	crc := crc32.Update(crc32.Checksum(h[:], base.CRC32C), base.CRC32C, payload)
	off := cw.off
	if err := cw.write(h[:]); err != nil {
		return err
	}
	if err := cw.write(payload); err != nil {
		return err
	}
	if err := cw.write(le.AppendUint32(nil, crc)); err != nil {
		return err
	}
	cw.blocks = append(cw.blocks, canonicalBlock{kind: kind, kg: kg, length: uint32(canonicalBlockH + len(payload) + 4), off: off})
	return nil
}

// record adds one encoded record of kind in key group kg: it ends the block in progress when
// kg changes or the block reached CanonicalBlockTarget.
func (cw *CanonicalWriter) record(kind uint8, kg uint16, rec []byte) error {
	if cw.err != nil {
		return cw.err
	}
	if !cw.meta.KeyGroups.Contains(int(kg)) {
		cw.err = fmt.Errorf("%w: key group %d outside %v", ErrInvalidEntry, kg, cw.meta.KeyGroups)
		return cw.err
	}
	if cw.started[kind] && kg < cw.curKG[kind] {
		cw.err = fmt.Errorf("%w: key group %d after %d", ErrInvalidEntry, kg, cw.curKG[kind])
		return cw.err
	}
	if cw.started[kind] && (kg != cw.curKG[kind] || len(cw.cur[kind]) >= cw.target) {
		if err := cw.flush(kind); err != nil {
			return err
		}
	}
	cw.started[kind], cw.curKG[kind] = true, kg
	cw.cur[kind] = append(cw.cur[kind], rec...)
	cw.curN[kind]++
	return nil
}

// flush writes the block in progress of kind, if any.
func (cw *CanonicalWriter) flush(kind uint8) error {
	if cw.curN[kind] == 0 {
		return nil
	}
	err := cw.block(kind, cw.curKG[kind], cw.curN[kind], cw.cur[kind])
	cw.cur[kind], cw.curN[kind] = cw.cur[kind][:0], 0
	return err
}

// Add appends entry e (CanonicalEntry's rules: its state's kind decides which fields are
// written; TTL timestamps are written for states with TTL only). Errors: ErrInvalidEntry, the
// writer's.
func (cw *CanonicalWriter) Add(e *CanonicalEntry) error {
	if cw.err != nil {
		return cw.err
	}
	if e.State < 0 || e.State >= len(cw.meta.States) || cw.meta.States[e.State].Kind == StateTimerService {
		cw.err = fmt.Errorf("%w: entry of state index %d", ErrInvalidEntry, e.State)
		return cw.err
	}
	st := cw.meta.States[e.State]
	rec := binary.AppendUvarint(cw.rec[:0], uint64(e.State))
	rec = appendBytes(appendBytes(rec, e.Key), e.Namespace)
	le := binary.LittleEndian
	switch st.Kind {
	case StateList:
		if st.TTL && len(e.ElementTTLs) != len(e.Elements) {
			cw.err = fmt.Errorf("%w: list entry of %q with %d elements and %d timestamps", ErrInvalidEntry, st.Name, len(e.Elements), len(e.ElementTTLs))
			return cw.err
		}
		if len(e.Elements) == 0 {
			cw.err = fmt.Errorf("%w: empty list entry of %q (an empty list is no state)", ErrInvalidEntry, st.Name)
			return cw.err
		}
		rec = binary.AppendUvarint(rec, uint64(len(e.Elements)))
		for i, el := range e.Elements {
			if st.TTL {
				rec = le.AppendUint64(rec, uint64(e.ElementTTLs[i]))
			}
			rec = appendBytes(rec, el)
		}
	default:
		if st.Kind == StateMap {
			rec = appendBytes(rec, e.UserKey)
		}
		if st.TTL {
			rec = le.AppendUint64(rec, uint64(e.TTL))
		}
		rec = appendBytes(rec, e.Value)
	}
	cw.rec = rec
	if err := cw.record(canonicalEntries, e.KeyGroup, rec); err != nil {
		return err
	}
	cw.entries++
	return nil
}

// AddTimer appends timer t. Errors: ErrInvalidEntry (a service index that names no timer
// service, a domain other than 0 or 1), the writer's.
func (cw *CanonicalWriter) AddTimer(t *CanonicalTimer) error {
	if cw.err != nil {
		return cw.err
	}
	if t.Service < 0 || t.Service >= len(cw.meta.States) || cw.meta.States[t.Service].Kind != StateTimerService || t.Domain > 1 {
		cw.err = fmt.Errorf("%w: timer of service index %d, domain %d", ErrInvalidEntry, t.Service, t.Domain)
		return cw.err
	}
	le := binary.LittleEndian
	rec := binary.AppendUvarint(cw.rec[:0], uint64(t.Service))
	rec = append(rec, t.Domain)
	rec = le.AppendUint32(rec, uint32(t.KeyHash))
	rec = le.AppendUint64(rec, uint64(t.Timestamp))
	rec = appendBytes(appendBytes(rec, t.Key), t.Namespace)
	cw.rec = rec
	if err := cw.record(canonicalTimers, t.KeyGroup, rec); err != nil {
		return err
	}
	cw.timers++
	return nil
}

// Close writes the blocks in progress, the index and the footer, and returns the stream's
// size in bytes. It does not close the io.Writer.
func (cw *CanonicalWriter) Close() (int64, error) {
	if err := cw.flush(canonicalEntries); err != nil {
		return 0, err
	}
	if err := cw.flush(canonicalTimers); err != nil {
		return 0, err
	}
	// The index in key-group order (entries before timers in one key group), so a reader of a
	// key-group range finds its blocks as one run.
	idx := slices.Clone(cw.blocks[1:])
	slices.SortStableFunc(idx, func(a, b canonicalBlock) int {
		if a.kg != b.kg {
			return int(a.kg) - int(b.kg)
		}
		return int(a.kind) - int(b.kind)
	})
	le := binary.LittleEndian
	p := le.AppendUint32(nil, uint32(len(idx)))
	for _, bl := range idx {
		p = append(p, bl.kind, 0)
		p = le.AppendUint16(p, bl.kg)
		p = le.AppendUint32(p, bl.length)
		p = le.AppendUint64(p, uint64(bl.off))
	}
	idxOff := cw.off
	f := le.AppendUint64(nil, uint64(idxOff))
	f = le.AppendUint32(f, uint32(len(p)))
	f = le.AppendUint32(f, crc32.Update(crc32.Checksum(p, base.CRC32C), base.CRC32C, f))
	f = append(f, canonicalMagic...)
	if err := cw.write(p); err != nil {
		return 0, err
	}
	if err := cw.write(f); err != nil {
		return 0, err
	}
	cw.err = fmt.Errorf("%w: writer closed", ErrInvalidEntry)
	return cw.off, nil
}

// Counts returns the entries and timers added so far.
func (cw *CanonicalWriter) Counts() (entries, timers int64) { return cw.entries, cw.timers }

func appendBytes(dst, b []byte) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(b))), b...)
}

// CanonicalReader reads a canonical savepoint: its meta at once, then the entries and timers
// of any key-group range, reading only the blocks of that range. Not safe for concurrent use.
type CanonicalReader struct {
	name   string
	size   int64
	read   func(off, n int64) ([]byte, error)
	meta   CanonicalMeta
	blocks []canonicalBlock // the index, key group ascending
}

// OpenCanonical reads the header, footer, index and meta block of the canonical savepoint
// object name of size bytes through read (which returns exactly n bytes at off, or an error)
// and checks them: magic (base.ErrBadMagic), version (base.ErrFormatVersion), checksum type
// (base.ErrChecksumType), the header's and footer's CRC32C (base.ErrChecksum), sizes
// (base.ErrTruncated), the index's rules (blocks inside the data, not overlapping, key groups
// in the header's range and ascending) and the meta block's. Each failure is a
// *base.CorruptionError naming the object and the byte offset.
func OpenCanonical(name string, size int64, read func(off, n int64) ([]byte, error)) (*CanonicalReader, error) {
	bad := func(cause error, off int64, format string, args ...any) error {
		return base.Corrupt(name, off, cause, format, args...)
	}
	if size < 8 {
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", size)
	}
	h, err := read(0, min(size, canonicalHeader))
	if err != nil {
		return nil, err
	}
	if string(h[:8]) != canonicalMagic {
		return nil, bad(base.ErrBadMagic, 0, "magic %q, want %q", h[:8], canonicalMagic)
	}
	if size < canonicalHeader+canonicalFooter+4 {
		return nil, bad(base.ErrTruncated, size, "%d bytes, shorter than a header, an index and a footer", size)
	}
	le := binary.LittleEndian
	if v := le.Uint16(h[8:]); v != canonicalVersion {
		return nil, bad(base.ErrFormatVersion, 8, "format version %d, this code reads %d", v, canonicalVersion)
	}
	if h[10] != 1 {
		return nil, bad(base.ErrChecksumType, 10, "checksum type %d", h[10])
	}
	if got, want := crc32.Checksum(h[:20], base.CRC32C), le.Uint32(h[20:]); got != want {
		return nil, bad(base.ErrChecksum, 20, "header crc32c %#08x, computed %#08x", want, got)
	}
	if h[11] != 0 {
		return nil, bad(nil, 11, "reserved byte %d", h[11])
	}
	r := &CanonicalReader{name: name, size: size, read: read}
	r.meta.MaxParallelism = int(le.Uint32(h[12:]))
	r.meta.KeyGroups = KeyGroupRange{Start: int(le.Uint16(h[16:])), End: int(le.Uint16(h[18:]))}
	if mp := r.meta.MaxParallelism; mp < 1 || mp > 32768 || r.meta.KeyGroups.Start > r.meta.KeyGroups.End || r.meta.KeyGroups.End >= mp {
		return nil, bad(nil, 12, "max parallelism %d, key groups %v", mp, r.meta.KeyGroups)
	}
	f, err := read(size-canonicalFooter, canonicalFooter)
	if err != nil {
		return nil, err
	}
	fo := size - canonicalFooter
	if string(f[16:]) != canonicalMagic {
		return nil, bad(base.ErrTruncated, fo+16, "no trailing magic (cut short?)")
	}
	idxOff, idxLen := int64(le.Uint64(f)), int64(le.Uint32(f[8:]))
	if idxOff < canonicalHeader || idxLen < 4 || idxOff > fo || idxLen != fo-idxOff {
		return nil, bad(base.ErrTruncated, fo, "index at %d of %d bytes in an object of %d", idxOff, idxLen, size)
	}
	p, err := read(idxOff, idxLen)
	if err != nil {
		return nil, err
	}
	if got, want := crc32.Update(crc32.Checksum(p, base.CRC32C), base.CRC32C, f[:12]), le.Uint32(f[12:]); got != want {
		return nil, bad(base.ErrChecksum, fo+12, "index crc32c %#08x, computed %#08x", want, got)
	}
	n := int64(le.Uint32(p))
	if n*canonicalIndexE != idxLen-4 {
		return nil, bad(nil, idxOff, "index of %d blocks in %d bytes", n, idxLen)
	}
	r.blocks = make([]canonicalBlock, n)
	for i := range r.blocks {
		e := p[4+i*canonicalIndexE:]
		bl := canonicalBlock{kind: e[0], kg: le.Uint16(e[2:]), length: le.Uint32(e[4:]), off: int64(le.Uint64(e[8:]))}
		at := idxOff + 4 + int64(i)*canonicalIndexE
		switch {
		case bl.kind != canonicalEntries && bl.kind != canonicalTimers || e[1] != 0:
			return nil, bad(nil, at, "block %d of kind %d", i, bl.kind)
		case !r.meta.KeyGroups.Contains(int(bl.kg)):
			return nil, bad(nil, at, "block %d of key group %d outside %v", i, bl.kg, r.meta.KeyGroups)
		case i > 0 && bl.kg < r.blocks[i-1].kg:
			return nil, bad(nil, at, "block %d of key group %d after key group %d", i, bl.kg, r.blocks[i-1].kg)
		case bl.length < canonicalBlockH+4 || bl.length > MaxCanonicalBlock+canonicalBlockH+4 ||
			bl.off < canonicalHeader || bl.off > idxOff-int64(bl.length):
			return nil, bad(nil, at, "block %d at %d of %d bytes outside the data", i, bl.off, bl.length)
		}
		r.blocks[i] = bl
	}
	// Blocks do not overlap (each byte of the data is read for one block at most).
	order := slices.Clone(r.blocks)
	slices.SortFunc(order, func(a, b canonicalBlock) int { return int(a.off - b.off) })
	for i := 1; i < len(order); i++ {
		if order[i].off < order[i-1].off+int64(order[i-1].length) {
			return nil, bad(nil, order[i].off, "blocks at %d and %d overlap", order[i-1].off, order[i].off)
		}
	}
	// The meta block begins right after the header and ends where the first block does.
	metaEnd := idxOff
	if len(order) > 0 {
		metaEnd = order[0].off
	}
	mb, err := read(canonicalHeader, metaEnd-canonicalHeader)
	if err != nil {
		return nil, err
	}
	kind, _, count, payload, err := r.checkBlock(mb, canonicalHeader)
	if err != nil {
		return nil, err
	}
	if kind != canonicalMeta || len(payload)+canonicalBlockH+4 != len(mb) {
		return nil, bad(nil, canonicalHeader, "a meta block of kind %d, %d bytes, before %d", kind, len(payload), metaEnd)
	}
	if err := r.decodeMeta(payload, count); err != nil {
		return nil, err
	}
	return r, nil
}

// ReadCanonical opens the canonical savepoint object name of size bytes in storage
// (OpenCanonical over ranged reads: GetObjectRange).
func ReadCanonical(ctx context.Context, s Storage, name string, size int64) (*CanonicalReader, error) {
	return OpenCanonical(name, size, func(off, n int64) ([]byte, error) {
		b, err := GetObjectRange(ctx, s, name, size, off, n)
		if err == nil && int64(len(b)) != n {
			return nil, base.Corrupt(name, off, base.ErrTruncated, "read %d bytes of %d", len(b), n)
		}
		return b, err
	})
}

// DecodeCanonical opens a whole canonical savepoint held in b (OpenCanonical over b).
func DecodeCanonical(name string, b []byte) (*CanonicalReader, error) {
	return OpenCanonical(name, int64(len(b)), func(off, n int64) ([]byte, error) {
		if off < 0 || n < 0 || off+n > int64(len(b)) {
			return nil, base.Corrupt(name, off, base.ErrTruncated, "%d bytes at %d of %d", n, off, len(b))
		}
		return b[off : off+n], nil
	})
}

// Meta returns the savepoint's meta (shared: do not modify).
func (r *CanonicalReader) Meta() *CanonicalMeta { return &r.meta }

// checkBlock checks the block in b (at offset off of the object): header, length, CRC32C.
func (r *CanonicalReader) checkBlock(b []byte, off int64) (kind uint8, kg uint16, count uint32, payload []byte, err error) {
	le := binary.LittleEndian
	if len(b) < canonicalBlockH+4 {
		return 0, 0, 0, nil, base.Corrupt(r.name, off, base.ErrTruncated, "a block of %d bytes", len(b))
	}
	n := int(le.Uint32(b[8:]))
	if n > len(b)-canonicalBlockH-4 || n > MaxCanonicalBlock {
		return 0, 0, 0, nil, base.Corrupt(r.name, off, base.ErrTruncated, "a block payload of %d bytes in %d", n, len(b))
	}
	body := b[:canonicalBlockH+n]
	if got, want := crc32.Checksum(body, base.CRC32C), le.Uint32(b[canonicalBlockH+n:]); got != want {
		return 0, 0, 0, nil, base.Corrupt(r.name, off, base.ErrChecksum, "block crc32c %#08x, computed %#08x", want, got)
	}
	if b[1] != 0 {
		return 0, 0, 0, nil, base.Corrupt(r.name, off+1, nil, "reserved byte %d", b[1])
	}
	return b[0], le.Uint16(b[2:]), le.Uint32(b[4:]), body[canonicalBlockH:], nil
}

// canonicalDec reads fields of a payload, remembering the first overrun.
type canonicalDec struct {
	b   []byte
	i   int
	bad bool
}

func (d *canonicalDec) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.i:])
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.i += n
	return v
}

func (d *canonicalDec) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)-d.i) {
		d.bad = true
		return nil
	}
	b := d.b[d.i : d.i+int(n) : d.i+int(n)]
	d.i += int(n)
	return b
}

func (d *canonicalDec) fixed(n int) []byte {
	if d.bad || n > len(d.b)-d.i {
		d.bad = true
		return make([]byte, n)
	}
	d.i += n
	return d.b[d.i-n : d.i]
}

// decodeMeta decodes the meta block's payload of count states.
func (r *CanonicalReader) decodeMeta(p []byte, count uint32) error {
	off := int64(canonicalHeader + canonicalBlockH)
	if int(count) > len(p)/4 {
		return base.Corrupt(r.name, off, nil, "%d states in %d bytes", count, len(p))
	}
	d := &canonicalDec{b: p}
	seen := map[string]bool{}
	for i := 0; i < int(count); i++ {
		at := d.i
		var st CanonicalState
		st.Name = string(d.bytes())
		kf := d.fixed(2)
		st.Kind, st.TTL = StateKind(kf[0]), kf[1] == 1
		st.Codecs[0], st.Codecs[1] = string(d.bytes()), string(d.bytes())
		if d.bad {
			return base.Corrupt(r.name, off+int64(at), base.ErrTruncated, "state %d runs past the meta block", i)
		}
		if st.Name == "" || seen[st.Name] || st.Kind < StateValue || st.Kind > StateTimerService || kf[1] > 1 {
			return base.Corrupt(r.name, off+int64(at), nil, "state %d %q of kind %d, flags %d (empty, duplicate or unknown)", i, st.Name, kf[0], kf[1])
		}
		seen[st.Name] = true
		r.meta.States = append(r.meta.States, st)
	}
	pos, ops := d.bytes(), d.bytes()
	if d.bad {
		return base.Corrupt(r.name, off+int64(d.i), base.ErrTruncated, "input position or operator state runs past the meta block")
	}
	if d.i != len(p) {
		return base.Corrupt(r.name, off+int64(d.i), nil, "%d bytes after the meta", len(p)-d.i)
	}
	if len(pos) > 0 {
		r.meta.InputPosition = bytes.Clone(pos)
	}
	if len(ops) > 0 {
		r.meta.OperatorState = bytes.Clone(ops)
	}
	return nil
}

// Scan reads the blocks of the key groups kgs (clipped to the savepoint's) in key-group
// order — of each key group its entries, then its timers — and calls entry for each entry and
// timer for each timer (either may be nil: those records are checked and skipped). Adjacent
// blocks are read together (a key-group range is one run of the index, so a restore of a
// sub-range reads only its part). Each block is checked before any of its records is
// passed on: its CRC32C (base.ErrChecksum), header against the index, then every record's
// bounds (base.ErrTruncated), state index and kind, the record count and no trailing bytes.
// An error of a callback ends the scan and is returned as it is.
func (r *CanonicalReader) Scan(kgs KeyGroupRange, entry func(*CanonicalEntry) error, timer func(*CanonicalTimer) error) error {
	i := 0
	for i < len(r.blocks) && int(r.blocks[i].kg) < kgs.Start {
		i++
	}
	for i < len(r.blocks) && int(r.blocks[i].kg) <= kgs.End {
		// One read for a run of contiguous blocks (bounded to 64 MiB).
		j, end := i+1, r.blocks[i].off+int64(r.blocks[i].length)
		for j < len(r.blocks) && int(r.blocks[j].kg) <= kgs.End && r.blocks[j].off == end && end-r.blocks[i].off < 64<<20 {
			end += int64(r.blocks[j].length)
			j++
		}
		buf, err := r.read(r.blocks[i].off, end-r.blocks[i].off)
		if err != nil {
			return err
		}
		for k := i; k < j; k++ {
			bl := r.blocks[k]
			b := buf[bl.off-r.blocks[i].off : bl.off-r.blocks[i].off+int64(bl.length)]
			if err := r.decodeBlock(bl, b, entry, timer); err != nil {
				return err
			}
		}
		i = j
	}
	return nil
}

// decodeBlock checks block bl (its bytes b) and passes its records on.
func (r *CanonicalReader) decodeBlock(bl canonicalBlock, b []byte, entry func(*CanonicalEntry) error, timer func(*CanonicalTimer) error) error {
	kind, kg, count, p, err := r.checkBlock(b, bl.off)
	if err != nil {
		return err
	}
	if kind != bl.kind || kg != bl.kg || len(p)+canonicalBlockH+4 != len(b) {
		return base.Corrupt(r.name, bl.off, nil, "block of kind %d, key group %d, %d bytes where the index says kind %d, key group %d, %d bytes",
			kind, kg, len(b), bl.kind, bl.kg, bl.length)
	}
	if int(count) > len(p)/3 {
		return base.Corrupt(r.name, bl.off, nil, "%d records in %d bytes", count, len(p))
	}
	off := bl.off + canonicalBlockH
	le := binary.LittleEndian
	d := &canonicalDec{b: p}
	var e CanonicalEntry
	var t CanonicalTimer
	for n := 0; n < int(count); n++ {
		at := off + int64(d.i)
		si := d.uvarint()
		if d.bad || si >= uint64(len(r.meta.States)) {
			return base.Corrupt(r.name, at, nil, "record %d names state %d of %d", n, si, len(r.meta.States))
		}
		st := r.meta.States[si]
		if (st.Kind == StateTimerService) != (kind == canonicalTimers) {
			return base.Corrupt(r.name, at, nil, "record %d of %v state %q in a block of kind %d", n, st.Kind, st.Name, kind)
		}
		if kind == canonicalTimers {
			f := d.fixed(13)
			t = CanonicalTimer{KeyGroup: kg, Service: int(si), Domain: f[0], KeyHash: int32(le.Uint32(f[1:])), Timestamp: int64(le.Uint64(f[5:]))}
			t.Key, t.Namespace = d.bytes(), d.bytes()
			if d.bad {
				return base.Corrupt(r.name, at, base.ErrTruncated, "timer %d runs past its block", n)
			}
			if t.Domain > 1 {
				return base.Corrupt(r.name, at, nil, "timer %d of domain %d", n, t.Domain)
			}
			if timer != nil {
				if err := timer(&t); err != nil {
					return err
				}
			}
			continue
		}
		e = CanonicalEntry{KeyGroup: kg, State: int(si), Elements: e.Elements[:0], ElementTTLs: e.ElementTTLs[:0]}
		e.Key, e.Namespace = d.bytes(), d.bytes()
		switch st.Kind {
		case StateList:
			c := d.uvarint()
			if c == 0 || c > uint64(len(p)-d.i) {
				return base.Corrupt(r.name, at, nil, "list entry %d of %d elements in %d bytes", n, c, len(p)-d.i)
			}
			for range c {
				if st.TTL {
					e.ElementTTLs = append(e.ElementTTLs, int64(le.Uint64(d.fixed(8))))
				}
				e.Elements = append(e.Elements, d.bytes())
			}
		default:
			if st.Kind == StateMap {
				e.UserKey = d.bytes()
			}
			if st.TTL {
				e.TTL = int64(le.Uint64(d.fixed(8)))
			}
			e.Value = d.bytes()
		}
		if d.bad {
			return base.Corrupt(r.name, at, base.ErrTruncated, "entry %d runs past its block", n)
		}
		if entry != nil {
			if err := entry(&e); err != nil {
				return err
			}
		}
	}
	if d.i != len(p) {
		return base.Corrupt(r.name, off+int64(d.i), nil, "%d bytes after record %d", len(p)-d.i, count)
	}
	return nil
}

// Verify reads and checks every block of the savepoint (Scan of every key group, records
// skipped) and returns its entry and timer counts.
func (r *CanonicalReader) Verify() (entries, timers int64, err error) {
	err = r.Scan(r.meta.KeyGroups, func(*CanonicalEntry) error { entries++; return nil },
		func(*CanonicalTimer) error { timers++; return nil })
	return entries, timers, err
}
