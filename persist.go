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
//	| STRATARG | u16 1-5 | =1 |    | u32      |                          | u32       |
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
//	absent when nameLen is 0); then, in version 5 only, the state id aliases: count (varint,
//	at least 1), then count aliases, each: state (varint: the id of a state above), lo, hi
//	(varints: key groups, lo <= hi, inside the registry's key groups), id (varint, 1 <= id <
//	nextID): in key groups lo..hi the state's data is stored under id instead of its own id.
//	Aliases are sorted by (state, lo), and those of one state do not overlap.
//
// State id aliases (version 5). A restore of several checkpoints (a scale-in) whose Stores
// registered their states in different orders, or different sets of states, finds one name
// under different ids in different key groups; the state id is inside every stored composite
// key and its hash, so the data cannot be moved to another id without rewriting it key by
// key. Instead the restored Store keeps each source's ids in that source's key groups: a state
// has its own id (the one new data of key groups no alias covers is written under) and, per
// key-group range, an alias. Invariants:
//
//  1. Within one key group, distinct states have distinct effective ids (own or alias).
//  2. An id may name different states in different key groups; so whatever looks a state up
//     by id (the TTL table of the compaction filter, scans) looks it up by (key group, id).
//  3. Aliases survive Close/Open and checkpoints (this registry), and a later Restore treats
//     each aliased key-group range of a source as a source of its own (restoreIDs).
//
// Version 1 is version 2 without opLen and the operator state; version 2 is version 3
// without state flags, and its opLen is at least 1; version 3 is version 4 without kind 6 and
// without the timer file; version 4 is version 5 without aliases. encode writes the lowest
// version that holds the registry — 5 with an alias, else 4 with a timer service or a timer
// file, else 3 when a state has a TTL, else 2 with operator state, else 1 — so a registry
// without aliases, timers and TTLs, and the registry every checkpoint manifest of such a
// Store carries, keep their older bytes; decodeRegistry reads all five.
// Checked in the order magic, version, checksum type, length, CRC, payload; each failure is
// an ErrCorruption with ErrBadMagic, ErrFormatVersion, ErrTruncated or ErrChecksum (a bad
// payload: ErrCorruption alone; a bad operator state blob: decodeOps's error). Golden files:
// testdata/registry-v1.bin, registry-v2.bin, registry-v3.bin, registry-v3-ops.bin,
// registry-v4.bin, registry-v5.bin.

const (
	registryMagic    = "STRATARG"
	registryVersion1 = 1 // no operator state; part of the format; do not change
	registryVersion2 = 2 // with operator state; part of the format; do not change
	registryVersion3 = 3 // with state flags (TTL); part of the format; do not change
	registryVersion4 = 4 // with timer services and the timer file; part of the format; do not change
	registryVersion  = 5 // with state id aliases; part of the format; do not change
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

// idAlias says that in key groups lo..hi (inclusive) a state's data is stored under id (the
// registry's version 5, "State id aliases").
type idAlias struct {
	lo, hi uint16
	id     uint16
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
	if len(s.aliases) > 0 {
		r.aliases = s.aliases // never changed in place: replaced whole
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
		version = registryVersion4
	}
	for name, p := range r.states {
		recs = append(recs, rec{name, p})
		switch {
		case p.kind == kindTimerService:
			version = max(version, registryVersion4)
		case p.ttl:
			version = max(version, registryVersion3)
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return int(a.id) - int(b.id) })
	if len(r.aliases) > 0 {
		version = registryVersion
	}
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
	if version >= registryVersion4 {
		f := r.timerFile
		p = binary.AppendUvarint(p, uint64(len(f.name)))
		if f.name != "" {
			p = append(p, f.name...)
			p = binary.AppendUvarint(p, uint64(f.size))
			p = binary.LittleEndian.AppendUint32(p, f.crc)
		}
	}
	if version == registryVersion {
		count := 0
		for _, rc := range recs {
			count += len(r.aliases[rc.name])
		}
		p = binary.AppendUvarint(p, uint64(count))
		for _, rc := range recs {
			for _, a := range r.aliases[rc.name] {
				for _, v := range []uint16{rc.id, a.lo, a.hi, a.id} {
					p = binary.AppendUvarint(p, uint64(v))
				}
			}
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
	ops                  *opSnapshot  // the operator state (versions 2 to 5); nil: none
	timerFile            timerFileRef // the timer file (versions 4 and 5); zero: none
	// aliases are the state id aliases by state name (version 5), each state's sorted by lo
	// and disjoint; nil: none. Never changed in place.
	aliases map[string][]idAlias
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
		if !(kind >= kindValue && kind <= kindAggregating || version >= registryVersion4 && kind == kindTimerService) {
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
	if version >= registryVersion4 {
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
		if !timers && name == "" && version == registryVersion4 {
			return nil, bad(nil, at, "version 4 without timer services or timer file")
		}
	}
	if version == registryVersion {
		byID := make(map[uint16]string, len(r.states))
		for name, st := range r.states {
			byID[st.id] = name
		}
		at := off
		count, ok := uv()
		if !ok || count == 0 || count > uint64(len(p)) {
			return nil, bad(nil, at, "bad alias count")
		}
		r.aliases = map[string][]idAlias{}
		var prev [2]uint64 // (state, lo) of the previous alias
		for i := range count {
			at := off
			var f [4]uint64
			for j := range f {
				if f[j], ok = uv(); !ok {
					return nil, bad(nil, at, "alias %d: bad varint", i)
				}
			}
			name, known := byID[uint16(f[0])]
			as := r.aliases[name]
			switch {
			case f[0] > maxStates || !known:
				return nil, bad(nil, at, "alias %d: no state of id %d", i, f[0])
			case f[1] > f[2] || f[1] < uint64(r.kgStart) || f[2] > uint64(r.kgEnd):
				return nil, bad(nil, at, "alias %d: key groups %d-%d outside %d-%d", i, f[1], f[2], r.kgStart, r.kgEnd)
			case f[3] == 0 || f[3] >= uint64(r.nextID):
				return nil, bad(nil, at, "alias %d: bad id %d", i, f[3])
			case i > 0 && (f[0] < prev[0] || f[0] == prev[0] && (len(as) == 0 || f[1] <= uint64(as[len(as)-1].hi))):
				return nil, bad(nil, at, "alias %d: out of order or overlapping", i)
			}
			prev = [2]uint64{f[0], f[1]}
			r.aliases[name] = append(as, idAlias{lo: uint16(f[1]), hi: uint16(f[2]), id: uint16(f[3])})
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
	id, migrate, err := s.checkPersistedTTL(name, kind, codecs, false)
	if err == nil && migrate {
		// Only the keyed state kinds take a TTL (ttl_migrate.go); a registry giving another
		// kind a TTL flag is refused as before.
		err = fmt.Errorf("%w: state %q is stored with a TTL, requested without a TTL", ErrIncompatibleState, name)
	}
	return id, err
}

// checkPersistedTTL is checkPersisted of a state with a TTL (ttl) or without: migrate reports
// that the stored state has the other TTL flag, so that its values must be migrated to the
// requested shape before use (ttl_migrate.go; only kinds value to aggregating, which take a
// TTL, report it; Flink 2.x migrates so too, TtlAwareSerializer).
func (s *Store) checkPersistedTTL(name string, kind stateKind, codecs [2]any, ttl bool) (id uint16, migrate bool, err error) {
	p, ok := s.persisted[name]
	if !ok {
		return 0, false, nil
	}
	if p.kind != kind {
		return 0, false, fmt.Errorf("%w: state %q is stored as %v state, requested as %v state",
			ErrIncompatibleState, name, p.kind, kind)
	}
	if c0, c1 := codecID(codecs[0]), codecID(codecs[1]); c0 != p.codecs[0] || c1 != p.codecs[1] {
		return 0, false, fmt.Errorf("%w: state %q is stored with codec %s/%s, requested with %s/%s",
			ErrIncompatibleState, name, p.codecs[0], p.codecs[1], c0, c1)
	}
	return p.id, p.ttl != ttl, nil
}
