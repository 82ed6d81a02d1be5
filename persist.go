package strata

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"reflect"
	"slices"

	"github.com/strata-db/strata/internal/base"
)

// Persistence (Store.Close, Open over an existing directory): the engine persists its tiers
// (internal/engine, persist.go); what the root adds is the state registry below, the persist
// point's opaque metadata, which also carries the operator state (opstate.go) and names the
// timer file (timers.go), so that both are persisted atomically with the keyed state.
//
// Registry (the persist point's metadata). All integers little endian, varints unsigned:
//
//	0          8         10   11   12         16
//	+----------+---------+----+----+----------+--------------------------+-----------+
//	| magic    | version | ck | 0  | length   | payload (length bytes)   | crc32c    |
//	| STRATARG | u16 1-4 | =1 |    | u32      |                          | u32       |
//	+----------+---------+----+----+----------+--------------------------+-----------+
//	ck 1 = CRC32C (Castagnoli); crc32c covers every byte before it.
//
//	payload: maxParallelism, keyGroupStart, keyGroupEnd, nextID, count (varints), then
//	count states, each: id (varint), kind (u8: 1 value, 2 list, 3 map, 4 reducing,
//	5 aggregating, 6 timer service (version 4 only); part of the format), name, codec 0,
//	codec 1 (each a varint length and bytes; a codec is its Go type's identity, see codecID;
//	"" for none; a timer service's codec 0 is its namespace codec's), and, in versions 3
//	and 4, flags (u8: bit 0 = the state has a TTL, its values carry timestamps, ttl.go; the
//	other bits 0); then, in versions 2 to 4, opLen (varint; at least 1 in version 2, 0 for
//	no operator state in versions 3 and 4) and the operator state blob (opLen bytes,
//	opstate.go, its directory form); then, in version 4 only, the timer file: nameLen
//	(varint; 0: none), name ("TIMERS-" and 16 lower-case hex digits, a file of the Store's
//	directory), size (varint, at least 1) and crc32c (u32) of the whole file (size and crc
//	absent when nameLen is 0).
//
// Version 1 is version 2 without opLen and the operator state; version 2 is version 3
// without state flags, and its opLen is at least 1; version 3 is version 4 without kind 6 and
// without the timer file. encode writes the lowest version that holds the registry — 4 with
// a timer service or a timer file, else 3 when a state has a TTL, else 2 with operator
// state, else 1 — so a registry without timers and TTLs, and the registry every checkpoint
// manifest of such a Store carries, keep their older bytes; decodeRegistry reads all four.
// Checked in the order magic, version, checksum type, length, CRC, payload; each failure is
// an ErrCorruption with ErrBadMagic, ErrFormatVersion, ErrTruncated or ErrChecksum (a bad
// payload: ErrCorruption alone; a bad operator state blob: decodeOps's error). Golden files:
// testdata/registry-v1.bin, registry-v2.bin, registry-v3.bin, registry-v3-ops.bin,
// registry-v4.bin.

const (
	registryMagic    = "STRATARG"
	registryVersion1 = 1 // no operator state; part of the format; do not change
	registryVersion2 = 2 // with operator state; part of the format; do not change
	registryVersion3 = 3 // with state flags (TTL); part of the format; do not change
	registryVersion  = 4 // with timer services and the timer file; part of the format; do not change
	registryCRC32C   = 1 // checksum type; part of the format
	registryHeader   = 16

	// registryFlagTTL is the state flag of a state with a TTL (versions 3 and 4). Part of the format.
	registryFlagTTL = 1
)

// persistedState is a state of the registry recovered by Open: registering its name again must
// give the same kind and codecs, and gets the same id (its data is keyed by it).
type persistedState struct {
	id     uint16
	kind   stateKind
	codecs [2]string
	ttl    bool // the state's values carry TTL timestamps
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

// persistMeta returns the metadata of the Store's persist point: its registry with its
// operator state, if it has any, naming the timer file tf (Close, Restore; zero: none).
func (s *Store) persistMeta(tf timerFileRef) []byte {
	r := s.registry()
	if len(s.ops) > 0 {
		r.ops = s.opSnapshot()
	}
	r.timerFile = tf
	return r.encode()
}

// encodeRegistry returns the registry blob of the Store, without operator state (a checkpoint
// manifest's, which carries the operator state in a field of its own): every state registered
// now and every state recovered from disk that was not registered again (its data is still
// there).
func (s *Store) encodeRegistry() []byte { return s.registry().encode() }

// registry returns the Store's keyed state registry.
func (s *Store) registry() *registry {
	kg := *s.opts.KeyGroups
	r := &registry{maxP: int(s.maxP), kgStart: kg.Start, kgEnd: kg.End, nextID: s.nextID,
		states: make(map[string]persistedState, len(s.states)+len(s.persisted))}
	for name, reg := range s.states {
		r.states[name] = persistedState{reg.id, reg.kind, [2]string{codecID(reg.codecs[0]), codecID(reg.codecs[1])}, reg.ttl != nil}
	}
	for name, p := range s.persisted {
		if _, ok := s.states[name]; !ok {
			r.states[name] = p
		}
	}
	return r
}

// encode returns the registry blob of r (layout above), states in id order, in the lowest
// version that holds it: 4 with a timer service or file, else 3 when a state has a TTL, else
// 2 with r.ops (in its directory form) having states, else 1.
func (r *registry) encode() []byte {
	type rec struct {
		name string
		persistedState
	}
	recs := make([]rec, 0, len(r.states))
	version := uint16(registryVersion1)
	hasOps := r.ops != nil && len(r.ops.states) > 0
	if hasOps {
		version = registryVersion2
	}
	if r.timerFile.name != "" {
		version = registryVersion
	}
	for name, p := range r.states {
		recs = append(recs, rec{name, p})
		switch {
		case p.kind == kindTimerService:
			version = registryVersion
		case p.ttl:
			version = max(version, registryVersion3)
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return int(a.id) - int(b.id) })
	p := make([]byte, 0, 64+32*len(recs))
	for _, v := range []uint64{uint64(r.maxP), uint64(r.kgStart), uint64(r.kgEnd), uint64(r.nextID), uint64(len(recs))} {
		p = binary.AppendUvarint(p, v)
	}
	for _, r := range recs {
		p = binary.AppendUvarint(p, uint64(r.id))
		p = append(p, byte(r.kind))
		for _, str := range []string{r.name, r.codecs[0], r.codecs[1]} {
			p = binary.AppendUvarint(p, uint64(len(str)))
			p = append(p, str...)
		}
		if version >= registryVersion3 {
			var flags byte
			if r.ttl {
				flags |= registryFlagTTL
			}
			p = append(p, flags)
		}
	}
	if version >= registryVersion2 {
		var ob []byte
		if hasOps {
			ob = r.ops.encode(false)
		}
		p = binary.AppendUvarint(p, uint64(len(ob)))
		p = append(p, ob...)
	}
	if version == registryVersion {
		f := r.timerFile
		p = binary.AppendUvarint(p, uint64(len(f.name)))
		if f.name != "" {
			p = append(p, f.name...)
			p = binary.AppendUvarint(p, uint64(f.size))
			p = binary.LittleEndian.AppendUint32(p, f.crc)
		}
	}
	b := make([]byte, registryHeader, registryHeader+len(p)+4)
	copy(b, registryMagic)
	binary.LittleEndian.PutUint16(b[8:], version)
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
	ops                  *opSnapshot  // the operator state (versions 2 to 4); nil: none
	timerFile            timerFileRef // the timer file (version 4); zero: none
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
	version := binary.LittleEndian.Uint16(b[8:])
	if version < registryVersion1 || version > registryVersion {
		return nil, bad(ErrFormatVersion, 8, "version %d, this Strata reads %d to %d", version, registryVersion1, registryVersion)
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
	timers := false // a timer service seen
	for range hdr[4] {
		at := off
		id, ok := uv()
		if !ok || id == 0 || id >= uint64(r.nextID) || ids[uint16(id)] || len(p) == 0 {
			return nil, bad(nil, at, "bad state id")
		}
		kind := stateKind(p[0])
		p, off = p[1:], off+1
		if !(kind >= kindValue && kind <= kindAggregating || version == registryVersion && kind == kindTimerService) {
			return nil, bad(nil, at, "bad state kind %d", kind)
		}
		timers = timers || kind == kindTimerService
		name, ok1 := str()
		c0, ok2 := str()
		c1, ok3 := str()
		if !ok1 || !ok2 || !ok3 || name == "" {
			return nil, bad(nil, at, "bad state name or codec")
		}
		if _, dup := r.states[name]; dup {
			return nil, bad(nil, at, "state %q twice", name)
		}
		var ttl bool
		if version >= registryVersion3 {
			if len(p) == 0 || p[0]&^registryFlagTTL != 0 {
				return nil, bad(nil, off, "bad state flags")
			}
			ttl = p[0]&registryFlagTTL != 0
			p, off = p[1:], off+1
		}
		ids[uint16(id)] = true
		r.states[name] = persistedState{id: uint16(id), kind: kind, codecs: [2]string{c0, c1}, ttl: ttl}
	}
	if version >= registryVersion2 {
		at := off
		l, ok := uv()
		if !ok || (l == 0 && version == registryVersion2) || l > uint64(len(p)) {
			return nil, bad(nil, at, "bad operator state length")
		}
		if l > 0 {
			ops, err := decodeOps("operator state in the state registry", p[:l], false)
			if err != nil {
				return nil, err
			}
			if len(ops.states) == 0 {
				return nil, bad(nil, at, "an operator state blob without operator state")
			}
			r.ops = ops
			p, off = p[l:], off+int(l)
		}
	}
	if version == registryVersion {
		at := off
		name, ok := str()
		if !ok {
			return nil, bad(nil, at, "bad timer file name")
		}
		if name != "" {
			size, ok := uv()
			if !ok || !validTimerFile(name) || size == 0 || size > 1<<50 || len(p) < 4 {
				return nil, bad(nil, at, "bad timer file %q", name)
			}
			r.timerFile = timerFileRef{name: name, size: int64(size), crc: binary.LittleEndian.Uint32(p)}
			p, off = p[4:], off+4
		}
		if !timers && name == "" {
			return nil, bad(nil, at, "version 4 without timer services or timer file")
		}
	}
	if len(p) != 0 {
		return nil, bad(nil, off, "%d bytes after the last state", len(p))
	}
	return r, nil
}

// checkPersisted checks a registration against the recovered registry and returns the id the
// state's data is stored under (0 when the name is new).
func (s *Store) checkPersisted(name string, kind stateKind, codecs [2]any) (uint16, error) {
	return s.checkPersistedTTL(name, kind, codecs, false)
}

// checkPersistedTTL is checkPersisted of a state with a TTL (ttl) or without: the stored
// state must have the same TTL flag.
func (s *Store) checkPersistedTTL(name string, kind stateKind, codecs [2]any, ttl bool) (uint16, error) {
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
	if p.ttl != ttl {
		// Its values are stored with (or without) timestamps: as Flink's TtlStateFactory, which
		// refuses the serializer change, the TTL cannot be switched on or off across a restore.
		return 0, fmt.Errorf("%w: state %q is stored %s, requested %s", ErrIncompatibleState, name, withTTL(p.ttl), withTTL(ttl))
	}
	return p.id, nil
}
