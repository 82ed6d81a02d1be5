package engine

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"strings"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
)

// The state registry: the byte-level codec of the persist point's metadata (Persist's meta,
// Recovered's Meta) and of every checkpoint manifest's Registry field. The root builds a
// Registry from its registered states (persist.go) and reads one back on Open and Restore;
// what the root keeps is the typed side: codec identities, the check of a registration
// against what is stored, the operator state blob's contents (opstate.go) and the timer file.
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
//	codec 1 (each a varint length and bytes; a codec is its Go type's identity, the root's
//	codecID; "" for none; a timer service's codec 0 is its namespace codec's), and, in
//	versions 3 and 4, flags (u8: bit 0 = the state has a TTL, its values carry timestamps;
//	the other bits 0); then, in versions 2 to 4, opLen (varint; at least 1 in version 2, 0
//	for no operator state in versions 3 and 4) and the operator state blob (opLen bytes, the
//	root's opstate.go, its directory form; opaque here); then, in version 4 only, the timer
//	file: nameLen (varint; 0: none), name ("TIMERS-" and 16 lower-case hex digits, a file of
//	the Store's directory), size (varint, at least 1) and crc32c (u32) of the whole file
//	(size and crc absent when nameLen is 0); then, in version 5 only, the state id aliases:
//	count (varint, at least 1), then count aliases, each: state (varint: the id of a state
//	above), lo, hi (varints: key groups, lo <= hi, inside the registry's key groups), id
//	(varint, 1 <= id < nextID): in key groups lo..hi the state's data is stored under id
//	instead of its own id. Aliases are sorted by (state, lo), and those of one state do not
//	overlap.
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
// without the timer file; version 4 is version 5 without aliases. Encode writes the lowest
// version that holds the registry — 5 with an alias, else 4 with a timer service or a timer
// file, else 3 when a state has a TTL, else 2 with operator state, else 1 — so a registry
// without aliases, timers and TTLs, and the registry every checkpoint manifest of such a
// Store carries, keep their older bytes; DecodeRegistry reads all five.
// Checked in the order magic, version, checksum type, length, CRC, payload; each failure is
// an ErrCorruption with ErrBadMagic, ErrFormatVersion, ErrTruncated or ErrChecksum (a bad
// payload: ErrCorruption alone). Golden files (the root's testdata/):
// registry-v1.bin, registry-v2.bin, registry-v3.bin, registry-v3-ops.bin, registry-v4.bin,
// registry-v5.bin.

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

// MaxStates is the number of states one Store can register: state ids are uint16 and 0 is
// reserved.
const MaxStates = 1<<16 - 1

// StateKind is the kind of a registered state. The values are written in the state registry:
// part of the format; do not change.
type StateKind uint8

// The kinds of state of the registry (the root's states and timer services).
const (
	KindValue       StateKind = 1 // strata.ValueState
	KindList        StateKind = 2 // strata.ListState
	KindMap         StateKind = 3 // strata.MapState
	KindReducing    StateKind = 4 // strata.ReducingState
	KindAggregating StateKind = 5 // strata.AggregatingState
	// KindTimerService is a timer service: registered by name like a state, with its
	// namespace codec, so it survives Close and Open and travels with checkpoints; it keeps no
	// data in the tiers (its id names none). Registry version 4 and later.
	KindTimerService StateKind = 6
)

// String names the kind as error messages do ("value", "timer service", …).
func (k StateKind) String() string {
	switch k {
	case KindValue:
		return "value"
	case KindList:
		return "list"
	case KindMap:
		return "map"
	case KindReducing:
		return "reducing"
	case KindAggregating:
		return "aggregating"
	case KindTimerService:
		return "timer service"
	}
	return fmt.Sprintf("stateKind(%d)", uint8(k))
}

// PersistedState is one state of a Registry: registering its name again must give the same
// kind and codecs, and gets the same id (its data is keyed by it).
type PersistedState struct {
	ID     uint16
	Kind   StateKind
	Codecs [2]string // codec identities; "" for none
	TTL    bool      // the state's values carry TTL timestamps
}

// IDAlias says that in key groups Lo..Hi (inclusive) a state's data is stored under ID (the
// registry's version 5, "State id aliases").
type IDAlias struct {
	Lo, Hi uint16
	ID     uint16
}

// TimerFileRef names the Store directory's timer file in the state registry: name, size and
// CRC32C of the whole file. The zero value means none.
type TimerFileRef struct {
	Name string
	Size int64
	CRC  uint32
}

// TimerFilePrefix begins every timer file's name.
const TimerFilePrefix = "TIMERS-"

// ValidTimerFile reports whether name is a timer file's: "TIMERS-" and 16 lower-case hex
// digits (a registry naming anything else, a path above all, is damaged).
func ValidTimerFile(name string) bool {
	hex, ok := strings.CutPrefix(name, TimerFilePrefix)
	if !ok || len(hex) != 16 {
		return false
	}
	for _, c := range hex {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Registry is a state registry (layout above), decoded or about to be encoded. Its Aliases'
// slices are never changed in place (replaced whole), so a Store may share them.
type Registry struct {
	MaxParallelism int
	KeyGroups      checkpoint.KeyGroupRange
	NextID         uint32 // the next state id to give out (ids are 1..NextID-1)
	States         map[string]PersistedState
	// Ops is the operator state blob in its directory form (the root's opstate.go), opaque
	// here; nil or empty: none (versions 2 to 5).
	Ops []byte
	// OpsOffset is, in a decoded Registry, the offset in the blob of Ops' length varint (for
	// the root's errors about Ops' contents).
	OpsOffset int
	TimerFile TimerFileRef // the timer file (versions 4 and 5); zero: none
	// Aliases are the state id aliases by state name (version 5), each state's sorted by Lo
	// and disjoint; nil: none.
	Aliases map[string][]IDAlias
}

// Encode returns the registry blob of r (layout above), states in id order, in the lowest
// version that holds it: 5 with an alias, 4 with a timer service or file, else 3 when a state
// has a TTL, else 2 with operator state (a non-empty Ops), else 1. r must be valid (as
// DecodeRegistry would accept it); Encode does not check.
func (r *Registry) Encode() []byte {
	type rec struct {
		name string
		PersistedState
	}
	recs := make([]rec, 0, len(r.States))
	version := uint16(registryVersion1)
	hasOps := len(r.Ops) > 0
	if hasOps {
		version = registryVersion2
	}
	if r.TimerFile.Name != "" {
		version = registryVersion4
	}
	for name, p := range r.States {
		recs = append(recs, rec{name, p})
		switch {
		case p.Kind == KindTimerService:
			version = max(version, registryVersion4)
		case p.TTL:
			version = max(version, registryVersion3)
		}
	}
	slices.SortFunc(recs, func(a, b rec) int { return int(a.ID) - int(b.ID) })
	if len(r.Aliases) > 0 {
		version = registryVersion
	}
	p := make([]byte, 0, 64+32*len(recs))
	for _, v := range []uint64{uint64(r.MaxParallelism), uint64(r.KeyGroups.Start), uint64(r.KeyGroups.End), uint64(r.NextID), uint64(len(recs))} {
		p = binary.AppendUvarint(p, v)
	}
	for _, r := range recs {
		p = binary.AppendUvarint(p, uint64(r.ID))
		p = append(p, byte(r.Kind))
		for _, str := range []string{r.name, r.Codecs[0], r.Codecs[1]} {
			p = binary.AppendUvarint(p, uint64(len(str)))
			p = append(p, str...)
		}
		if version >= registryVersion3 {
			var flags byte
			if r.TTL {
				flags |= registryFlagTTL
			}
			p = append(p, flags)
		}
	}
	if version >= registryVersion2 {
		var ob []byte
		if hasOps {
			ob = r.Ops
		}
		p = binary.AppendUvarint(p, uint64(len(ob)))
		p = append(p, ob...)
	}
	if version >= registryVersion4 {
		f := r.TimerFile
		p = binary.AppendUvarint(p, uint64(len(f.Name)))
		if f.Name != "" {
			p = append(p, f.Name...)
			p = binary.AppendUvarint(p, uint64(f.Size))
			p = binary.LittleEndian.AppendUint32(p, f.CRC)
		}
	}
	if version == registryVersion {
		count := 0
		for _, rc := range recs {
			count += len(r.Aliases[rc.name])
		}
		p = binary.AppendUvarint(p, uint64(count))
		for _, rc := range recs {
			for _, a := range r.Aliases[rc.name] {
				for _, v := range []uint16{rc.ID, a.Lo, a.Hi, a.ID} {
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

// RegistryName is the name errors of DecodeRegistry give the registry: it is stored inside
// the LSM manifest's persist point (or a checkpoint manifest), not a file of its own.
const RegistryName = "state registry"

// DecodeRegistry decodes a registry blob; errors are *base.CorruptionError values naming
// RegistryName and the offset in the blob, with the specific cause. The operator state blob
// is returned as it is (Ops, a sub-slice of b), not decoded.
func DecodeRegistry(b []byte) (*Registry, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt(RegistryName, int64(off), cause, format, args...)
	}
	if len(b) < 8 || string(b[:8]) != registryMagic {
		if len(b) < 8 {
			return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
		}
		return nil, bad(base.ErrBadMagic, 0, "magic %q", b[:8])
	}
	if len(b) < registryHeader {
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the header", len(b))
	}
	version := binary.LittleEndian.Uint16(b[8:])
	if version < registryVersion1 || version > registryVersion {
		return nil, bad(base.ErrFormatVersion, 8, "version %d, this Strata reads %d to %d", version, registryVersion1, registryVersion)
	}
	if b[10] != registryCRC32C || b[11] != 0 {
		return nil, bad(nil, 10, "checksum type %d, reserved byte %d", b[10], b[11])
	}
	n := int(binary.LittleEndian.Uint32(b[12:]))
	if len(b) != registryHeader+n+4 {
		if len(b) < registryHeader+n+4 {
			return nil, bad(base.ErrTruncated, 12, "payload of %d bytes, %d left", n, len(b)-registryHeader)
		}
		return nil, bad(nil, 12, "payload of %d bytes, %d left", n, len(b)-registryHeader)
	}
	if got, want := crc32.Checksum(b[:registryHeader+n], base.CRC32C), binary.LittleEndian.Uint32(b[registryHeader+n:]); got != want {
		return nil, bad(base.ErrChecksum, registryHeader+n, "crc32c %#x, stored %#x", got, want)
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
	if hdr[0] < 1 || hdr[0] > checkpoint.MaxParallelismLimit || hdr[1] > hdr[2] || hdr[2] >= hdr[0] || hdr[3] > MaxStates+1 || hdr[4] > MaxStates {
		return nil, bad(nil, registryHeader, "fields %v out of range", hdr)
	}
	r := &Registry{MaxParallelism: int(hdr[0]), KeyGroups: checkpoint.KeyGroupRange{Start: int(hdr[1]), End: int(hdr[2])},
		NextID: uint32(hdr[3]), States: make(map[string]PersistedState, hdr[4])}
	ids := make(map[uint16]bool, hdr[4])
	timers := false // a timer service seen
	for range hdr[4] {
		at := off
		id, ok := uv()
		if !ok || id == 0 || id >= uint64(r.NextID) || ids[uint16(id)] || len(p) == 0 {
			return nil, bad(nil, at, "bad state id")
		}
		kind := StateKind(p[0])
		p, off = p[1:], off+1
		if !(kind >= KindValue && kind <= KindAggregating || version >= registryVersion4 && kind == KindTimerService) {
			return nil, bad(nil, at, "bad state kind %d", kind)
		}
		timers = timers || kind == KindTimerService
		name, ok1 := str()
		c0, ok2 := str()
		c1, ok3 := str()
		if !ok1 || !ok2 || !ok3 || name == "" {
			return nil, bad(nil, at, "bad state name or codec")
		}
		if _, dup := r.States[name]; dup {
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
		r.States[name] = PersistedState{ID: uint16(id), Kind: kind, Codecs: [2]string{c0, c1}, TTL: ttl}
	}
	if version >= registryVersion2 {
		at := off
		l, ok := uv()
		if !ok || (l == 0 && version == registryVersion2) || l > uint64(len(p)) {
			return nil, bad(nil, at, "bad operator state length")
		}
		r.OpsOffset = at
		if l > 0 {
			r.Ops = p[:l:l]
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
			if !ok || !ValidTimerFile(name) || size == 0 || size > 1<<50 || len(p) < 4 {
				return nil, bad(nil, at, "bad timer file %q", name)
			}
			r.TimerFile = TimerFileRef{Name: name, Size: int64(size), CRC: binary.LittleEndian.Uint32(p)}
			p, off = p[4:], off+4
		}
		if !timers && name == "" && version == registryVersion4 {
			return nil, bad(nil, at, "version 4 without timer services or timer file")
		}
	}
	if version == registryVersion {
		byID := make(map[uint16]string, len(r.States))
		for name, st := range r.States {
			byID[st.ID] = name
		}
		at := off
		count, ok := uv()
		if !ok || count == 0 || count > uint64(len(p)) {
			return nil, bad(nil, at, "bad alias count")
		}
		r.Aliases = map[string][]IDAlias{}
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
			as := r.Aliases[name]
			switch {
			case f[0] > MaxStates || !known:
				return nil, bad(nil, at, "alias %d: no state of id %d", i, f[0])
			case f[1] > f[2] || f[1] < uint64(r.KeyGroups.Start) || f[2] > uint64(r.KeyGroups.End):
				return nil, bad(nil, at, "alias %d: key groups %d-%d outside %d-%d", i, f[1], f[2], r.KeyGroups.Start, r.KeyGroups.End)
			case f[3] == 0 || f[3] >= uint64(r.NextID):
				return nil, bad(nil, at, "alias %d: bad id %d", i, f[3])
			case i > 0 && (f[0] < prev[0] || f[0] == prev[0] && (len(as) == 0 || f[1] <= uint64(as[len(as)-1].Hi))):
				return nil, bad(nil, at, "alias %d: out of order or overlapping", i)
			}
			prev = [2]uint64{f[0], f[1]}
			r.Aliases[name] = append(as, IDAlias{Lo: uint16(f[1]), Hi: uint16(f[2]), ID: uint16(f[3])})
		}
	}
	if len(p) != 0 {
		return nil, bad(nil, off, "%d bytes after the last state", len(p))
	}
	return r, nil
}

// DecodeRegistryOps decodes a registry blob (DecodeRegistry) and the operator state blob it
// carries (DecodeOps in its directory form; nil: none). Errors are *base.CorruptionError
// values: DecodeRegistry's, naming the "state registry", or DecodeOps's, naming the "operator
// state in the state registry".
func DecodeRegistryOps(b []byte) (*Registry, *OpSnapshot, error) {
	r, err := DecodeRegistry(b)
	if err != nil || len(r.Ops) == 0 {
		return r, nil, err
	}
	ops, err := DecodeOps("operator state in the state registry", r.Ops, false)
	if err != nil {
		return nil, nil, err
	}
	if len(ops.States) == 0 {
		return nil, nil, base.Corrupt(RegistryName, int64(r.OpsOffset), nil, "an operator state blob without operator state")
	}
	return r, ops, nil
}

// ttlWord says whether a state has a TTL, for restoreIDs' errors.
func ttlWord(on bool) string {
	if on {
		return "with a TTL"
	}
	return "without a TTL"
}

// idSource is the state registry of one checkpoint given to Restore, with the key groups
// lo..hi of the new Store it holds.
type idSource struct {
	lo, hi uint16
	reg    *Registry
}

// restoreIDs fills merged (the restored Store's registry) with the states of the sources, matched
// by name, as Flink identifies state: their kinds, codecs and TTL flags must agree
// (ErrIncompatibleState), their ids need not — Stores register lazily, in the order their records
// need the states, and a state may be missing from some ("State id aliases" above). Each
// state gets an own id, and an alias in the key groups where its data (or another state's data
// under its own id) says otherwise:
//
//   - the key groups are cut into ranges over which one source, and one alias of it, applies;
//     in each, a state the source holds keeps the source's id there;
//   - a state's own id is its id in the first range (in key-group order) that holds it,
//     unless an earlier state (by name) took that id as its own: then a fresh one;
//   - in a range whose source lacks the state, the state keeps its own id unless the source
//     uses that id for another state: then it gets its fresh id (one per state, reused);
//   - key groups no source holds use the own ids, which are distinct.
//
// So in every key group distinct states have distinct ids (invariant 1), and no entry is
// read or rewritten: the cost is O(sources + aliases) in time and registry bytes. nextID
// becomes larger than every id of every source and every fresh id.
func restoreIDs(merged *Registry, srcs []idSource) error {
	type rng struct {
		lo, hi uint16
		ids    map[string]uint16 // name → id in this range
		used   map[uint16]bool
	}
	var ranges []rng
	for _, src := range srcs {
		merged.NextID = max(merged.NextID, src.reg.NextID)
		for name, st := range src.reg.States {
			if p, ok := merged.States[name]; ok && (p.Kind != st.Kind || p.Codecs != st.Codecs || p.TTL != st.TTL) {
				return fmt.Errorf("%w: state %q is %v state with codecs %v (%s) in one checkpoint, %v state with %v (%s) in another",
					ErrIncompatibleState, name, p.Kind, p.Codecs, ttlWord(p.TTL), st.Kind, st.Codecs, ttlWord(st.TTL))
			}
			merged.States[name] = st // its id is set below
		}
		// Cut src's key groups where one of its aliases starts or ends.
		cuts := []int{int(src.lo), int(src.hi) + 1}
		for _, as := range src.reg.Aliases {
			for _, a := range as {
				for _, c := range []int{int(a.Lo), int(a.Hi) + 1} {
					if c > int(src.lo) && c <= int(src.hi) {
						cuts = append(cuts, c)
					}
				}
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		for i := 0; i+1 < len(cuts); i++ {
			g := rng{lo: uint16(cuts[i]), hi: uint16(cuts[i+1] - 1), ids: map[string]uint16{}, used: map[uint16]bool{}}
			for name, st := range src.reg.States {
				id := st.ID
				for _, a := range src.reg.Aliases[name] {
					if a.Lo <= g.lo && g.hi <= a.Hi {
						id = a.ID
					}
				}
				g.ids[name], g.used[id] = id, true
			}
			ranges = append(ranges, g)
		}
	}
	slices.SortFunc(ranges, func(a, b rng) int { return int(a.lo) - int(b.lo) })
	names := slices.Sorted(maps.Keys(merged.States))
	next := merged.NextID
	fresh := func() (uint16, error) {
		if next > MaxStates {
			return 0, fmt.Errorf("%w: the restored states need more than %d state ids", ErrIncompatibleState, MaxStates)
		}
		next++
		return uint16(next - 1), nil
	}
	own := map[uint16]bool{}
	aliases := map[string][]IDAlias{}
	for _, name := range names {
		id := uint16(0)
		for _, g := range ranges {
			if x, ok := g.ids[name]; ok {
				id = x
				break
			}
		}
		if id == 0 || own[id] {
			var err error
			if id, err = fresh(); err != nil {
				return err
			}
		}
		own[id] = true
		st := merged.States[name]
		st.ID = id
		merged.States[name] = st
	}
	for _, name := range names {
		id := merged.States[name].ID
		var alt uint16 // the state's fresh id for ranges whose source uses its own id otherwise
		for _, g := range ranges {
			eff, ok := g.ids[name]
			if !ok {
				eff = id
				if g.used[id] {
					if alt == 0 {
						var err error
						if alt, err = fresh(); err != nil {
							return err
						}
					}
					eff = alt
				}
			}
			if eff == id {
				continue
			}
			as := aliases[name]
			if n := len(as); n > 0 && as[n-1].ID == eff && as[n-1].Hi+1 == g.lo {
				as[n-1].Hi = g.hi
			} else {
				as = append(as, IDAlias{Lo: g.lo, Hi: g.hi, ID: eff})
			}
			aliases[name] = as
		}
	}
	merged.NextID = next
	if len(aliases) > 0 {
		merged.Aliases = aliases
	}
	return nil
}
