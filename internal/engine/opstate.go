package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
)

// Operator state: the byte-level codec of the root's operator state (the root's opstate.go
// and operator.go hold its typed API, its memory accounting and the ids' invariants 1 and 2)
// and its redistribution on Restore. The blob is written whole into every checkpoint manifest
// (checkpoint.Manifest.OperatorState) and, in its directory form, inside the state registry
// (registry.go, Registry.Ops).
//
// Operator state blob. All integers little endian:
//
//	0          8         10   11   12         16
//	+----------+---------+----+----+----------+-------------------------+--------+
//	| magic    | version | ck | 0  | length   | payload (length bytes)  | crc32c |
//	| STRATAOP | u16 1-2 | =1 |    | u32      |                         | u32    |
//	+----------+---------+----+----+----------+-------------------------+--------+
//	ck 1 = CRC32C (Castagnoli); crc32c covers every byte before it; length <= 64 MiB.
//
//	payload:
//	0         4             8        12
//	+---------+-------------+--------+--------------+
//	| subtask | parallelism | count  | count states |
//	| u32     | u32         | u32    |              |
//	+---------+-------------+--------+--------------+
//	subtask, parallelism: Options.SubtaskIndex and Options.Parallelism of the Store that wrote it
//
//	state:
//	0      1     2         4        +n      +2      +c0     +2      +c1     +4
//	+------+-----+---------+--------+-------+-------+-------+-------+-------+-------+
//	| kind | 0   | nameLen | name   | c0Len | codec0| c1Len | codec1| n     | items |
//	| u8   | u8  | u16     |        | u16   |       | u16   |       | u32   |       |
//	+------+-----+---------+--------+-------+-------+-------+-------+-------+-------+
//	kind: 1 list (even split), 2 union list, 3 broadcast map (part of the format; do not change)
//	codec0: the identity (the root's codecID) of the element codec (lists) or key codec (map); codec1:
//	the value codec's (map), empty for lists
//
//	list item (kind 1; kind 2 in      union item (kind 2 in version 2)
//	version 1)
//	+-------+--------+---------+      +-------+-------+--------+---------+
//	| flags | len    | element |      | flags | id    | len    | element |
//	| u8    | u32    |         |      | u8    | u64   | u32    |         |
//	+-------+--------+---------+      +-------+-------+--------+---------+
//	flags bit 0 R: received (version 1 union lists in the directory form only; version 2
//	has no received elements and its flags are 0); bits 1..7 are 0
//
//	map entry (kind 3)
//	+--------+-------+--------+-------+
//	| keyLen | key   | valLen | value |
//	| u32    |       | u32    |       |
//	+--------+-------+--------+-------+
//
// Rules: 1 <= parallelism <= 32768, subtask < parallelism; states in strictly increasing name
// order, names not empty; codec0 not empty; codec1 empty unless kind 3, not empty then; map entries
// in strictly increasing key order; R only on union items of the directory form; no byte after the
// last state. Every field has one encoding, so a blob of version 2 that decodes re-encodes to the
// same bytes (FuzzDecodeOps). Encode writes version 2 when a union list state is present, version 1
// otherwise (the bytes of Stores without union state do not change); DecodeOps reads both. Checked
// in the order magic (base.ErrBadMagic; fewer than 8 bytes: base.ErrTruncated), header size
// (base.ErrTruncated), version (base.ErrFormatVersion), checksum type (base.ErrChecksumType), reserved
// byte, length (base.ErrTruncated if the bytes end early), CRC32C (base.ErrChecksum), then the
// payload (a field running past it: base.ErrTruncated; a rule broken: ErrCorruption alone) — each a
// *base.CorruptionError naming the blob and the byte offset in it. The root's
// testdata/opstate-v1.bin (decoded only) and testdata/opstate-v2.bin are the golden files.

const (
	opMagic    = "STRATAOP"
	opVersion1 = 1 // union items without ids; part of the format; do not change
	opVersion  = 2 // union items with ids; part of the format; do not change
	opCRC32C   = 1 // checksum type; part of the format
	opHeader   = 16
	opMaxBlob  = checkpoint.MaxBlob // 64 MiB: the blob must fit a manifest
)

// OpStateKind is the kind of an operator state. The values are written in the operator state
// blob: part of the format; do not change.
type OpStateKind uint8

// The kinds of operator state, as Flink's OperatorStateBackend distributes them.
const (
	OpStateList      OpStateKind = 1 // Flink's getListState: SPLIT_DISTRIBUTE
	OpStateUnion     OpStateKind = 2 // Flink's getUnionListState: UNION
	OpStateBroadcast OpStateKind = 3 // Flink's getBroadcastState: BROADCAST
)

// String names the kind as error messages do.
func (k OpStateKind) String() string {
	switch k {
	case OpStateList:
		return "operator list (even split)"
	case OpStateUnion:
		return "operator union list"
	case OpStateBroadcast:
		return "broadcast"
	}
	return fmt.Sprintf("OpStateKind(%d)", uint8(k))
}

// OpState is the stored content of one operator state: what the blob holds of it.
type OpState struct {
	Name   string
	Kind   OpStateKind
	Codecs [2]string // codec identities (the root's codecID); Codecs[1] only for OpStateBroadcast

	Elems [][]byte          // lists: the elements in order
	IDs   []uint64          // union lists: IDs[i] is the identity of Elems[i]; nil otherwise
	Map   map[string][]byte // broadcast: the entries; nil otherwise
}

// The operator state's counted bytes (the root's MaxOperatorStateSize and its costs): what a
// Store's operator state may hold and what it is charged to the budget for (Go's slice
// headers, map buckets and allocation rounding, approximately).
const (
	// MaxOperatorStateSize bounds one Store's operator state in counted bytes (8 MiB).
	MaxOperatorStateSize = 8 << 20
	// OpElemCost is what a list element costs beside its bytes, OpEntryCost a broadcast
	// entry beside its key and value, OpStateCost a state beside its name and codec
	// identities.
	OpElemCost  = 32
	OpEntryCost = 64
	OpStateCost = 128
)

// BaseCost returns what st costs besides its items (counted bytes).
func (st *OpState) BaseCost() int64 {
	return int64(len(st.Name)+len(st.Codecs[0])+len(st.Codecs[1])) + OpStateCost
}

// Cost returns the counted bytes of st: BaseCost, each element's bytes plus OpElemCost, each
// entry's key and value plus OpEntryCost.
func (st *OpState) Cost() int64 {
	n := st.BaseCost()
	for _, e := range st.Elems {
		n += int64(len(e)) + OpElemCost
	}
	for k, v := range st.Map {
		n += int64(len(k)+len(v)) + OpEntryCost
	}
	return n
}

// OpSnapshot is a decoded (or about to be encoded) operator state blob: the operator states of
// subtask Subtask of Parallelism, States in increasing name order.
type OpSnapshot struct {
	Subtask, Parallelism int
	States               []*OpState
}

// V1UnionID derives the id of element i of union list name in a version 1 blob of subtask of
// parallelism (the root's opstate.go, "Union state", invariant 4): xxh3 of subtask,
// parallelism, i and name, so the elements of one set of version 1 checkpoints get distinct
// ids.
func V1UnionID(subtask, parallelism int, name string, i int) uint64 {
	b := make([]byte, 0, 16+len(name))
	b = binary.LittleEndian.AppendUint32(b, uint32(subtask))
	b = binary.LittleEndian.AppendUint32(b, uint32(parallelism))
	b = binary.LittleEndian.AppendUint64(b, uint64(i))
	return xxh3.Hash(append(b, name...))
}

// Encode returns the blob of o (layout above), in version 2 when it holds a union list state,
// else in version 1. The checkpoint form and the directory form are the same bytes since
// version 2: every element a subtask holds is stored. o must follow the rules above (names
// increasing, codecs as the kinds want); Encode does not check.
func (o *OpSnapshot) Encode() []byte {
	le := binary.LittleEndian
	b := make([]byte, opHeader, 256)
	copy(b, opMagic)
	version := uint16(opVersion1)
	for _, st := range o.States {
		if st.Kind == OpStateUnion {
			version = opVersion
		}
	}
	le.PutUint16(b[8:], version)
	b[10] = opCRC32C
	b = le.AppendUint32(b, uint32(o.Subtask))
	b = le.AppendUint32(b, uint32(o.Parallelism))
	b = le.AppendUint32(b, uint32(len(o.States)))
	for _, st := range o.States {
		b = append(b, byte(st.Kind), 0)
		for _, str := range []string{st.Name, st.Codecs[0], st.Codecs[1]} {
			b = le.AppendUint16(b, uint16(len(str)))
			b = append(b, str...)
		}
		switch st.Kind {
		case OpStateList, OpStateUnion:
			elems := st.Elems
			b = le.AppendUint32(b, uint32(len(elems)))
			for i, e := range elems {
				b = append(b, 0) // flags
				if st.Kind == OpStateUnion {
					b = le.AppendUint64(b, st.IDs[i])
				}
				b = le.AppendUint32(b, uint32(len(e)))
				b = append(b, e...)
			}
		case OpStateBroadcast:
			keys := make([]string, 0, len(st.Map))
			for k := range st.Map {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			b = le.AppendUint32(b, uint32(len(keys)))
			for _, k := range keys {
				b = le.AppendUint32(b, uint32(len(k)))
				b = append(b, k...)
				v := st.Map[k]
				b = le.AppendUint32(b, uint32(len(v)))
				b = append(b, v...)
			}
		}
	}
	le.PutUint32(b[12:], uint32(len(b)-opHeader))
	return le.AppendUint32(b, crc32.Checksum(b, base.CRC32C))
}

// DecodeOps decodes an operator state blob, in its checkpoint form (ck: no received element)
// or its directory form; file names it in errors. Errors are *base.CorruptionError values
// (layout above); it never panics and allocates at most about len(b) bytes.
func DecodeOps(file string, b []byte, ck bool) (*OpSnapshot, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt(file, int64(off), cause, format, args...)
	}
	le := binary.LittleEndian
	if len(b) < 8 {
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
	}
	if string(b[:8]) != opMagic {
		return nil, bad(base.ErrBadMagic, 0, "magic %q, want %q", b[:8], opMagic)
	}
	if len(b) < opHeader+4 {
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the header and checksum", len(b))
	}
	version := le.Uint16(b[8:])
	if version != opVersion1 && version != opVersion {
		return nil, bad(base.ErrFormatVersion, 8, "format version %d, this code reads %d and %d", version, opVersion1, opVersion)
	}
	if b[10] != opCRC32C {
		return nil, bad(base.ErrChecksumType, 10, "checksum type %d, want %d (CRC32C)", b[10], opCRC32C)
	}
	if b[11] != 0 {
		return nil, bad(nil, 11, "reserved byte %#x is not zero", b[11])
	}
	n := int64(le.Uint32(b[12:]))
	if n > opMaxBlob {
		return nil, bad(nil, 12, "payload of %d bytes, more than %d", n, opMaxBlob)
	}
	if have := int64(len(b)) - opHeader - 4; have != n {
		if have < n {
			return nil, bad(base.ErrTruncated, 12, "payload of %d bytes, %d present", n, have)
		}
		return nil, bad(nil, 12, "payload of %d bytes followed by %d more", n, have-n)
	}
	end := opHeader + int(n)
	if got, want := le.Uint32(b[end:]), crc32.Checksum(b[:end], base.CRC32C); got != want {
		return nil, bad(base.ErrChecksum, end, "crc32c %#08x, computed %#08x", got, want)
	}
	d := opDecoder{b: b[:end], off: opHeader}
	o := &OpSnapshot{Subtask: int(d.u32()), Parallelism: int(d.u32())}
	count := d.u32()
	if d.short {
		return nil, bad(base.ErrTruncated, opHeader, "payload of %d bytes, shorter than its fixed fields", n)
	}
	if o.Parallelism < 1 || o.Parallelism > checkpoint.MaxParallelismLimit || o.Subtask >= o.Parallelism {
		return nil, bad(nil, opHeader, "subtask %d of parallelism %d", o.Subtask, o.Parallelism)
	}
	if int64(count)*10 > int64(end-d.off) {
		return nil, bad(base.ErrTruncated, opHeader+8, "%d states cannot fit in the %d bytes left", count, end-d.off)
	}
	for i := range count {
		at := d.off
		st := &OpState{Kind: OpStateKind(d.u8())}
		reserved := d.u8()
		st.Name = string(d.bytes(int(d.u16())))
		st.Codecs[0] = string(d.bytes(int(d.u16())))
		st.Codecs[1] = string(d.bytes(int(d.u16())))
		items := d.u32()
		if d.short {
			return nil, bad(base.ErrTruncated, at, "state %d runs past the payload", i)
		}
		switch {
		case st.Kind < OpStateList || st.Kind > OpStateBroadcast:
			return nil, bad(nil, at, "state %d: unknown kind %d", i, st.Kind)
		case reserved != 0:
			return nil, bad(nil, at+1, "state %d: reserved byte %#x", i, reserved)
		case st.Name == "":
			return nil, bad(nil, at+2, "state %d: empty name", i)
		case len(o.States) > 0 && o.States[len(o.States)-1].Name >= st.Name:
			return nil, bad(nil, at+2, "state %q after %q: names must increase", st.Name, o.States[len(o.States)-1].Name)
		case st.Codecs[0] == "" || (st.Codecs[1] == "") != (st.Kind != OpStateBroadcast):
			return nil, bad(nil, at, "state %q: codecs %q, %q for a %v state", st.Name, st.Codecs[0], st.Codecs[1], st.Kind)
		}
		itemMin := 5 // flags, length
		switch {
		case st.Kind == OpStateBroadcast:
			itemMin = 8
		case st.Kind == OpStateUnion && version == opVersion:
			itemMin = 13 // flags, id, length
		}
		if int64(items)*int64(itemMin) > int64(end-d.off) {
			return nil, bad(base.ErrTruncated, d.off-4, "state %q: %d items cannot fit in the %d bytes left", st.Name, items, end-d.off)
		}
		if st.Kind == OpStateBroadcast {
			st.Map = make(map[string][]byte, items)
			prev := ""
			for j := range items {
				at := d.off
				k := d.take(int(d.u32()))
				v := d.bytes(int(d.u32()))
				if d.short {
					return nil, bad(base.ErrTruncated, at, "state %q: entry %d runs past the payload", st.Name, j)
				}
				if j > 0 && string(k) <= prev {
					return nil, bad(nil, at, "state %q: entry %d: keys must increase", st.Name, j)
				}
				prev = string(k)
				st.Map[prev] = v
			}
		} else {
			st.Elems = make([][]byte, 0, items)
			if st.Kind == OpStateUnion {
				st.IDs = make([]uint64, 0, items)
			}
			for j := range items {
				at := d.off
				flags := d.u8()
				var id uint64
				if st.Kind == OpStateUnion && version == opVersion {
					id = d.u64()
				}
				e := d.bytes(int(d.u32()))
				if d.short {
					return nil, bad(base.ErrTruncated, at, "state %q: element %d runs past the payload", st.Name, j)
				}
				if flags&^1 != 0 || (flags != 0 && (ck || st.Kind != OpStateUnion || version != opVersion1)) {
					return nil, bad(nil, at, "state %q: element %d: flags %#x", st.Name, j, flags)
				}
				if st.Kind == OpStateUnion {
					if version == opVersion1 {
						id = V1UnionID(o.Subtask, o.Parallelism, st.Name, int(j))
					}
					st.IDs = append(st.IDs, id)
				}
				st.Elems = append(st.Elems, e)
			}
		}
		o.States = append(o.States, st)
	}
	if d.off != end {
		return nil, bad(nil, d.off, "%d bytes after the last state", end-d.off)
	}
	return o, nil
}

// opDecoder reads fixed-width little-endian fields; past the end it returns zeros and sets
// short.
type opDecoder struct {
	b     []byte
	off   int
	short bool
}

func (d *opDecoder) take(n int) []byte {
	if d.short || n > len(d.b)-d.off {
		d.short = true
		return nil
	}
	p := d.b[d.off : d.off+n : d.off+n]
	d.off += n
	return p
}

func (d *opDecoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *opDecoder) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *opDecoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *opDecoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

// bytes returns a copy of the next n bytes (elements outlive the blob).
func (d *opDecoder) bytes(n int) []byte {
	p := d.take(n)
	if p == nil {
		return nil
	}
	return bytes.Clone(p)
}

// OpSource is the operator state of one checkpoint given to Restore.
type OpSource struct {
	Snap *OpSnapshot
	What string // "checkpoint <id> of <owner>", for errors
}

// splitShares returns the contiguous range [lo, hi) of total elements each of n subtasks gets,
// and the start of the next state's round: exactly the split of Flink's
// RoundRobinOperatorStateRepartitioner.repartitionSplitState. The concatenation is cut into n
// contiguous parts of total/n elements, total%n of them one longer; the round starts at
// subtask start, which takes the first part, and the longer parts go first; the next state's
// round starts at the first subtask of this round that got a shorter part, so that over many
// states the longer parts spread. (It is contiguous, not element-wise round robin: the "round
// robin" in Flink's name is that rotation.)
func splitShares(total, n, start int) (ranges [][2]int, next int) {
	base, rem := total/n, total%n
	ranges = make([][2]int, n)
	next = start
	off := 0
	for i := range n {
		idx := (i + start) % n
		k := base
		if rem > 0 {
			k++
			rem--
		} else if rem == 0 {
			next = idx
			rem--
		}
		ranges[idx] = [2]int{off, off + k}
		off += k
	}
	return ranges, next
}

// RedistributeOps is the operator state a Store of subtask index of parallelism gets from the
// checkpoints srcs (every one Restore was given that holds operator state; without lists
// counts those that hold none — manifests of format version 1 or 2), as Flink's
// RoundRobinOperatorStateRepartitioner:
//
//   - even-split lists: the old subtasks' lists concatenated in subtask order, cut by
//     splitShares (states in name order, the rotation running over them — Flink iterates a
//     hash map; a fixed order makes every new subtask compute the same split); at an unchanged
//     parallelism each subtask keeps its own list, as Flink does not repartition then;
//   - union lists: the whole concatenation, each element once by its id (the root's opstate.go,
//     "Union state", invariant 3), the same list for every new subtask;
//   - broadcast: one copy, of the (index mod m)-th of the m checkpoints that hold the state,
//     as Flink's repartitionBroadcastState — every copy is the same, nothing is concatenated.
//
// Lists are redistributed only over the checkpoints of one complete set: when any of them
// holds an element, srcs must carry one parallelism P and each subtask index 0..P-1 once,
// and without must be 0; otherwise ErrIncompleteOperatorState. States of one name must agree
// on kind and codecs (ErrIncompatibleState). The states returned are new; their elements,
// keys and values share the sources' bytes.
func RedistributeOps(srcs []OpSource, without []string, index, parallelism int) (*OpSnapshot, error) {
	out := &OpSnapshot{Subtask: index, Parallelism: parallelism}
	if len(srcs) == 0 {
		return out, nil
	}
	type named struct {
		Kind   OpStateKind
		Codecs [2]string
		What   string
	}
	names := map[string]named{}
	lists := false
	for _, src := range srcs {
		for _, st := range src.Snap.States {
			if n, ok := names[st.Name]; ok && (n.Kind != st.Kind || n.Codecs != st.Codecs) {
				return nil, fmt.Errorf("%w: operator state %q is %v state with codecs %q in %s, %v state with %q in %s",
					ErrIncompatibleState, st.Name, n.Kind, n.Codecs, n.What, st.Kind, st.Codecs, src.What)
			}
			names[st.Name] = named{st.Kind, st.Codecs, src.What}
			lists = lists || (st.Kind != OpStateBroadcast && len(st.Elems) > 0)
		}
	}
	srcs = slices.Clone(srcs)
	slices.SortStableFunc(srcs, func(a, b OpSource) int { return cmp.Compare(a.Snap.Subtask, b.Snap.Subtask) })
	oldP := srcs[0].Snap.Parallelism
	if lists {
		switch {
		case len(without) > 0:
			return nil, fmt.Errorf("%w: %s holds no operator state (written before manifest format version 3) beside checkpoints that hold operator list state",
				ErrIncompleteOperatorState, without[0])
		case len(srcs) != oldP:
			return nil, fmt.Errorf("%w: %d checkpoints given for the %d subtasks of the old job (%s: subtask %d of %d); operator list state needs every subtask's",
				ErrIncompleteOperatorState, len(srcs), oldP, srcs[0].What, srcs[0].Snap.Subtask, oldP)
		}
		for i, src := range srcs {
			if src.Snap.Parallelism != oldP || src.Snap.Subtask != i {
				return nil, fmt.Errorf("%w: %s is subtask %d of parallelism %d where subtask %d of %d is missing (a duplicate, or another job's)",
					ErrIncompleteOperatorState, src.What, src.Snap.Subtask, src.Snap.Parallelism, i, oldP)
			}
		}
	}
	sorted := make([]string, 0, len(names))
	for name := range names {
		sorted = append(sorted, name)
	}
	slices.Sort(sorted)
	splitStart := 0
	for _, name := range sorted {
		n := names[name]
		st := &OpState{Name: name, Kind: n.Kind, Codecs: n.Codecs}
		var parts [][][]byte // the old subtasks' lists, in subtask order
		var partIDs [][]uint64
		var having []*OpState
		for _, src := range srcs {
			i, ok := slices.BinarySearchFunc(src.Snap.States, name, func(s *OpState, name string) int { return strings.Compare(s.Name, name) })
			if !ok {
				parts, partIDs = append(parts, nil), append(partIDs, nil)
				continue
			}
			have := src.Snap.States[i]
			having = append(having, have)
			parts, partIDs = append(parts, have.Elems), append(partIDs, have.IDs)
		}
		switch n.Kind {
		case OpStateBroadcast:
			from := having[index%len(having)]
			st.Map = make(map[string][]byte, len(from.Map))
			for k, v := range from.Map {
				st.Map[k] = v
			}
		case OpStateUnion:
			// Every element any old subtask held, once per id (the root's opstate.go, invariant 3).
			seen := map[uint64]bool{}
			for i, p := range parts {
				for j, e := range p {
					id := partIDs[i][j]
					if !seen[id] {
						seen[id] = true
						st.Elems, st.IDs = append(st.Elems, e), append(st.IDs, id)
					}
				}
			}
		case OpStateList:
			var all [][]byte
			offs := make([]int, len(parts)+1)
			for i, p := range parts {
				all = append(all, p...)
				offs[i+1] = len(all)
			}
			var lo, hi int
			switch {
			case len(all) == 0:
			case oldP == parallelism: // lists imply a complete set: parts[i] is subtask i's
				lo, hi = offs[index], offs[index+1]
			default:
				var r [][2]int
				r, splitStart = splitShares(len(all), parallelism, splitStart)
				lo, hi = r[index][0], r[index][1]
			}
			st.Elems = slices.Clone(all[lo:hi])
		}
		out.States = append(out.States, st)
	}
	return out, nil
}
