package strata

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/zeebo/xxh3"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// Operator state (operator.go is the typed API): the non-keyed state of one subtask, as
// Flink's OperatorStateBackend — list state redistributed by even split, union list state,
// broadcast map state. It is small by contract and lives on the Go heap, not in the tiers:
// every element, key and value is its own []byte. It is counted (opCost) and charged to the
// Store's memory budget under memory.PurposeOperatorState, and bounded by
// MaxOperatorStateSize per Store.
//
// Where it goes:
//
//   - a checkpoint: the blob below, in its checkpoint form (since version 2 the same bytes as
//     the directory form; a version 1 checkpoint form has no received elements), inside the
//     manifest (checkpoint.Manifest.OperatorState), written whole at every checkpoint, native
//     or changelog (Flink's changelog backend snapshots operator state fully too);
//   - the Store's directory (Close, Open): the blob in its directory form (version 1: received
//     elements flagged) inside the state registry (internal/engine/registry.go, registry version
//     2), so it is part of the LSM's persist point, atomically with the keyed state.
//
// Union state: every element a subtask holds is in its checkpoints, without duplication.
// As Flink's, each subtask's checkpoint stores its union list as the subtask holds it, and a
// Restore gives every new subtask the union of all. Unlike Flink, which concatenates the
// lists (N subtasks that leave a restored union alone store it N times, and each restore
// multiplies it: flink-agents #824), every union element carries an identity, a 64-bit id
// stored with it: a restore concatenates the old subtasks' lists in subtask order and keeps
// the first element of each id. So an element survives as long as ANY subtask holds it (an
// earlier scheme stored only the elements a subtask "owned" by even split, and lost those it
// kept through Update but did not own: 1 → 2 → 1 gave [a d] of [a b c d]), and a union that
// N subtasks hand back unchanged is restored once.
//
// Invariants of the ids (union lists; even-split and broadcast states carry none):
//
//  1. An element a subtask adds (Add, AddAll, an element of Update equal to no element held
//     before) gets a fresh id drawn from math/rand/v2: ids of distinct elements collide with
//     probability about n²/2⁶⁵ for n elements (8 MiB of operator state bounds n to 2¹⁸:
//     below 10⁻⁸), and a collision drops one element of the two at the next restore.
//  2. Update keeps the id of an element it is handed back: an element of the new list equal
//     (bytewise) to an element held before and not matched yet takes that element's id, so
//     "Get, change, Update" keeps the union of the subtasks deduplicated.
//  3. A restore keeps ids: every new subtask holds the same restored elements under the same
//     ids, in the same order (the order of the old subtasks, then of their lists).
//  4. Blobs of version 1 carry no ids: a restore or Open derives each element's id from the
//     blob's subtask, parallelism, state name and the element's index (xxh3), so the
//     elements of one set of version 1 checkpoints (one per old subtask) get distinct ids.
//     Received elements of a version 1 directory form get ids of their own too: a restore
//     after such an Open may hold them twice (never lose them).

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
//	codec0: the identity (codecID) of the element codec (lists) or key codec (map); codec1:
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
// Rules: 1 <= parallelism <= 32768, subtask < parallelism; states in strictly increasing
// name order, names not empty; codec0 not empty; codec1 empty unless kind 3, not empty then;
// map entries in strictly increasing key order; R only on union items of the directory form;
// no byte after the last state. Every field has one encoding, so a blob of version 2 that
// decodes re-encodes to the same bytes (FuzzOperatorStateDecode). encode writes version 2 when
// a union list state is present, version 1 otherwise (the bytes of Stores without union state
// do not change); decodeOps reads both. Checked in the order magic
// (ErrBadMagic; fewer than 8 bytes: ErrTruncated), header size (ErrTruncated), version
// (ErrFormatVersion), checksum type (ErrChecksumType), reserved byte, length (ErrTruncated if
// the bytes end early), CRC32C (ErrChecksum), then the payload (a field running past it:
// ErrTruncated; a rule broken: ErrCorruption alone) — each a *base.CorruptionError naming the
// blob and the byte offset in it. testdata/opstate-v1.bin (decoded only) and
// testdata/opstate-v2.bin are the golden files.

const (
	opMagic    = "STRATAOP"
	opVersion1 = 1 // union items without ids; part of the format; do not change
	opVersion  = 2 // union items with ids; part of the format; do not change
	opCRC32C   = 1 // checksum type; part of the format
	opHeader   = 16
	opMaxBlob  = 64 << 20 // = checkpoint.MaxBlob: the blob must fit a manifest

	// MaxOperatorStateSize bounds the operator state of one Store, in counted bytes (8 MiB):
	// each element costs its encoded length plus 32 bytes, each broadcast entry its key and
	// value plus 64, each state its name and codec identities plus 128 (Go's slice headers,
	// map buckets and allocation rounding, approximately). Operator state is small by
	// contract (Flink's is held on the task's heap and sent through the job manager); what is
	// counted is also charged to the memory budget. A write beyond the bound fails with
	// ErrOperatorStateTooLarge; so does a Restore whose share is larger. Every encoding of it
	// fits a manifest and the persist point (lsm.MaxPersistMeta, 16 MiB, with the registry).
	MaxOperatorStateSize = 8 << 20

	opElemCost  = 32
	opEntryCost = 64
	opStateCost = 128
)

// opKind is the kind of an operator state. The values are written in the operator state
// blob: part of the format; do not change.
type opKind uint8

const (
	opList      opKind = 1 // Flink's getListState: SPLIT_DISTRIBUTE
	opUnion     opKind = 2 // Flink's getUnionListState: UNION
	opBroadcast opKind = 3 // Flink's getBroadcastState: BROADCAST
)

func (k opKind) String() string {
	switch k {
	case opList:
		return "operator list (even split)"
	case opUnion:
		return "operator union list"
	case opBroadcast:
		return "broadcast"
	}
	return fmt.Sprintf("opKind(%d)", uint8(k))
}

// opState is one operator state of a Store: registered, or restored and not registered again
// (kept, and checkpointed, as Flink keeps restored operator states).
type opState struct {
	name   string
	kind   opKind
	codecs [2]string // codec identities (codecID)

	elems [][]byte // lists: the elements in order
	ids   []uint64 // union lists: ids[i] is the identity of elems[i] (see "Union state"); nil otherwise
	m     map[string][]byte

	view    any    // the typed state (*OperatorListState[T], *BroadcastState[K, V]); nil until registered
	vcodecs [2]any // the codecs it was registered with
	cost    int64  // counted bytes, charged to the budget
}

// opElemsCost returns the counted bytes of list elements.
func opElemsCost(elems [][]byte) int64 {
	n := int64(0)
	for _, e := range elems {
		n += int64(len(e)) + opElemCost
	}
	return n
}

// opBaseCost is what a state costs besides its items.
func (st *opState) opBaseCost() int64 {
	return int64(len(st.name)+len(st.codecs[0])+len(st.codecs[1])) + opStateCost
}

// recount returns the counted bytes of st.
func (st *opState) recount() int64 {
	n := st.opBaseCost() + opElemsCost(st.elems)
	for k, v := range st.m {
		n += int64(len(k)+len(v)) + opEntryCost
	}
	return n
}

// hasElems reports whether a list state holds an element.
func (st *opState) hasElems() bool { return len(st.elems) > 0 }

// freshUnionID returns the id of an element a subtask adds to a union list (invariant 1).
func freshUnionID() uint64 { return rand.Uint64() }

// v1UnionID derives the id of element i of union list name in a version 1 blob of subtask of
// parallelism (invariant 4).
func v1UnionID(subtask, parallelism int, name string, i int) uint64 {
	b := make([]byte, 0, 16+len(name))
	b = binary.LittleEndian.AppendUint32(b, uint32(subtask))
	b = binary.LittleEndian.AppendUint32(b, uint32(parallelism))
	b = binary.LittleEndian.AppendUint64(b, uint64(i))
	return xxh3.Hash(append(b, name...))
}

// opCharge accounts delta counted bytes of operator state: a growth is checked against
// MaxOperatorStateSize and charged to the budget, a shrink refunded. A charge the budget
// refuses waits for background work to free memory as a refused keyed write does
// (backpressure, at most Options.BackpressureTimeout): operator state is charged as a writer's
// purpose, which the FreshTable's segments may have filled. Errors: ErrOperatorStateTooLarge,
// ErrMemoryBudget (after the wait), the backpressure's; nothing is charged then.
func (s *Store) opCharge(delta int64) error {
	switch {
	case delta < 0:
		s.budget.Refund(-delta, memory.PurposeOperatorState)
	case delta > 0:
		if s.opBytes+delta > MaxOperatorStateSize {
			return fmt.Errorf("%w: %d bytes more would make %d, the bound is %d", ErrOperatorStateTooLarge,
				delta, s.opBytes+delta, MaxOperatorStateSize)
		}
		for {
			err := s.budget.Charge(delta, memory.PurposeOperatorState)
			if err == nil {
				break
			}
			if err = s.e.Backpressure(err); err != nil {
				return fmt.Errorf("strata: operator state of %d bytes more: %w", delta, err)
			}
		}
	}
	s.opBytes += delta
	return nil
}

// opSnapshot is a decoded (or about to be encoded) operator state blob.
type opSnapshot struct {
	subtask, parallelism int
	states               []*opState // by name
}

// opSnapshot returns the Store's operator state for encoding (the states are the Store's own:
// encode at once).
func (s *Store) opSnapshot() *opSnapshot {
	o := &opSnapshot{subtask: s.opts.SubtaskIndex, parallelism: s.opts.Parallelism}
	for _, st := range s.ops {
		o.states = append(o.states, st)
	}
	slices.SortFunc(o.states, func(a, b *opState) int { return strings.Compare(a.name, b.name) })
	return o
}

// encode returns the blob of o (layout above), in version 2 when it holds a union list state,
// else in version 1. The checkpoint form (ck) and the directory form are the same bytes since
// version 2 (ck is kept for the callers' clarity): every element a subtask holds is stored.
func (o *opSnapshot) encode(ck bool) []byte {
	_ = ck
	le := binary.LittleEndian
	b := make([]byte, opHeader, 256)
	copy(b, opMagic)
	version := uint16(opVersion1)
	for _, st := range o.states {
		if st.kind == opUnion {
			version = opVersion
		}
	}
	le.PutUint16(b[8:], version)
	b[10] = opCRC32C
	b = le.AppendUint32(b, uint32(o.subtask))
	b = le.AppendUint32(b, uint32(o.parallelism))
	b = le.AppendUint32(b, uint32(len(o.states)))
	for _, st := range o.states {
		b = append(b, byte(st.kind), 0)
		for _, str := range []string{st.name, st.codecs[0], st.codecs[1]} {
			b = le.AppendUint16(b, uint16(len(str)))
			b = append(b, str...)
		}
		switch st.kind {
		case opList, opUnion:
			elems := st.elems
			b = le.AppendUint32(b, uint32(len(elems)))
			for i, e := range elems {
				b = append(b, 0) // flags
				if st.kind == opUnion {
					b = le.AppendUint64(b, st.ids[i])
				}
				b = le.AppendUint32(b, uint32(len(e)))
				b = append(b, e...)
			}
		case opBroadcast:
			keys := make([]string, 0, len(st.m))
			for k := range st.m {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			b = le.AppendUint32(b, uint32(len(keys)))
			for _, k := range keys {
				b = le.AppendUint32(b, uint32(len(k)))
				b = append(b, k...)
				v := st.m[k]
				b = le.AppendUint32(b, uint32(len(v)))
				b = append(b, v...)
			}
		}
	}
	le.PutUint32(b[12:], uint32(len(b)-opHeader))
	return le.AppendUint32(b, crc32.Checksum(b, base.CRC32C))
}

// decodeOps decodes an operator state blob, in its checkpoint form (ck: no received element)
// or its directory form; file names it in errors. Errors are *base.CorruptionError values
// (layout above); it never panics and allocates at most about len(b) bytes.
func decodeOps(file string, b []byte, ck bool) (*opSnapshot, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt(file, int64(off), cause, format, args...)
	}
	le := binary.LittleEndian
	if len(b) < 8 {
		return nil, bad(ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
	}
	if string(b[:8]) != opMagic {
		return nil, bad(ErrBadMagic, 0, "magic %q, want %q", b[:8], opMagic)
	}
	if len(b) < opHeader+4 {
		return nil, bad(ErrTruncated, 0, "%d bytes, shorter than the header and checksum", len(b))
	}
	version := le.Uint16(b[8:])
	if version != opVersion1 && version != opVersion {
		return nil, bad(ErrFormatVersion, 8, "format version %d, this code reads %d and %d", version, opVersion1, opVersion)
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
			return nil, bad(ErrTruncated, 12, "payload of %d bytes, %d present", n, have)
		}
		return nil, bad(nil, 12, "payload of %d bytes followed by %d more", n, have-n)
	}
	end := opHeader + int(n)
	if got, want := le.Uint32(b[end:]), crc32.Checksum(b[:end], base.CRC32C); got != want {
		return nil, bad(ErrChecksum, end, "crc32c %#08x, computed %#08x", got, want)
	}
	d := opDecoder{b: b[:end], off: opHeader}
	o := &opSnapshot{subtask: int(d.u32()), parallelism: int(d.u32())}
	count := d.u32()
	if d.short {
		return nil, bad(ErrTruncated, opHeader, "payload of %d bytes, shorter than its fixed fields", n)
	}
	if o.parallelism < 1 || o.parallelism > UpperBoundMaxParallelism || o.subtask >= o.parallelism {
		return nil, bad(nil, opHeader, "subtask %d of parallelism %d", o.subtask, o.parallelism)
	}
	if int64(count)*10 > int64(end-d.off) {
		return nil, bad(ErrTruncated, opHeader+8, "%d states cannot fit in the %d bytes left", count, end-d.off)
	}
	for i := range count {
		at := d.off
		st := &opState{kind: opKind(d.u8())}
		reserved := d.u8()
		st.name = string(d.bytes(int(d.u16())))
		st.codecs[0] = string(d.bytes(int(d.u16())))
		st.codecs[1] = string(d.bytes(int(d.u16())))
		items := d.u32()
		if d.short {
			return nil, bad(ErrTruncated, at, "state %d runs past the payload", i)
		}
		switch {
		case st.kind < opList || st.kind > opBroadcast:
			return nil, bad(nil, at, "state %d: unknown kind %d", i, st.kind)
		case reserved != 0:
			return nil, bad(nil, at+1, "state %d: reserved byte %#x", i, reserved)
		case st.name == "":
			return nil, bad(nil, at+2, "state %d: empty name", i)
		case len(o.states) > 0 && o.states[len(o.states)-1].name >= st.name:
			return nil, bad(nil, at+2, "state %q after %q: names must increase", st.name, o.states[len(o.states)-1].name)
		case st.codecs[0] == "" || (st.codecs[1] == "") != (st.kind != opBroadcast):
			return nil, bad(nil, at, "state %q: codecs %q, %q for a %v state", st.name, st.codecs[0], st.codecs[1], st.kind)
		}
		itemMin := 5 // flags, length
		switch {
		case st.kind == opBroadcast:
			itemMin = 8
		case st.kind == opUnion && version == opVersion:
			itemMin = 13 // flags, id, length
		}
		if int64(items)*int64(itemMin) > int64(end-d.off) {
			return nil, bad(ErrTruncated, d.off-4, "state %q: %d items cannot fit in the %d bytes left", st.name, items, end-d.off)
		}
		if st.kind == opBroadcast {
			st.m = make(map[string][]byte, items)
			prev := ""
			for j := range items {
				at := d.off
				k := d.take(int(d.u32()))
				v := d.bytes(int(d.u32()))
				if d.short {
					return nil, bad(ErrTruncated, at, "state %q: entry %d runs past the payload", st.name, j)
				}
				if j > 0 && string(k) <= prev {
					return nil, bad(nil, at, "state %q: entry %d: keys must increase", st.name, j)
				}
				prev = string(k)
				st.m[prev] = v
			}
		} else {
			st.elems = make([][]byte, 0, items)
			if st.kind == opUnion {
				st.ids = make([]uint64, 0, items)
			}
			for j := range items {
				at := d.off
				flags := d.u8()
				var id uint64
				if st.kind == opUnion && version == opVersion {
					id = d.u64()
				}
				e := d.bytes(int(d.u32()))
				if d.short {
					return nil, bad(ErrTruncated, at, "state %q: element %d runs past the payload", st.name, j)
				}
				if flags&^1 != 0 || (flags != 0 && (ck || st.kind != opUnion || version != opVersion1)) {
					return nil, bad(nil, at, "state %q: element %d: flags %#x", st.name, j, flags)
				}
				if st.kind == opUnion {
					if version == opVersion1 {
						id = v1UnionID(o.subtask, o.parallelism, st.name, int(j))
					}
					st.ids = append(st.ids, id)
				}
				st.elems = append(st.elems, e)
			}
		}
		st.cost = st.recount()
		o.states = append(o.states, st)
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

// loadOps installs the operator state recovered from the directory (Open, after Restore) and
// charges it. Errors: ErrIncompatibleStore when it was written by another subtask or
// parallelism than opts say; ErrIncompatibleState when a name is also a keyed state's;
// opCharge's.
func (s *Store) loadOps(o *opSnapshot) error {
	if o.subtask != s.opts.SubtaskIndex || o.parallelism != s.opts.Parallelism {
		return fmt.Errorf("%w: operator state stored by subtask %d of parallelism %d, opened as subtask %d of %d",
			ErrIncompatibleStore, o.subtask, o.parallelism, s.opts.SubtaskIndex, s.opts.Parallelism)
	}
	total := int64(0)
	for _, st := range o.states {
		if _, ok := s.persisted[st.name]; ok {
			return fmt.Errorf("%w: %q is both a keyed and an %v state", ErrIncompatibleState, st.name, st.kind)
		}
		total += st.cost
	}
	if err := s.opCharge(total); err != nil {
		return err
	}
	for _, st := range o.states {
		s.ops[st.name] = st
	}
	return nil
}

// opSource is the operator state of one checkpoint given to Restore.
type opSource struct {
	snap *opSnapshot
	what string // "checkpoint <id> of <owner>", for errors
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

// redistributeOps is the operator state a Store of subtask index of parallelism gets from the
// checkpoints srcs (every one Restore was given that holds operator state; without lists
// counts those that hold none — manifests of format version 1 or 2), as Flink's
// RoundRobinOperatorStateRepartitioner:
//
//   - even-split lists: the old subtasks' lists concatenated in subtask order, cut by
//     splitShares (states in name order, the rotation running over them — Flink iterates a
//     hash map; a fixed order makes every new subtask compute the same split); at an unchanged
//     parallelism each subtask keeps its own list, as Flink does not repartition then;
//   - union lists: the whole concatenation, each element once by its id (see "Union state"
//     above), the same list for every new subtask;
//   - broadcast: one copy, of the (index mod m)-th of the m checkpoints that hold the state,
//     as Flink's repartitionBroadcastState — every copy is the same, nothing is concatenated.
//
// Lists are redistributed only over the checkpoints of one complete set: when any of them
// holds an element, srcs must carry one parallelism P and each subtask index 0..P-1 once,
// and without must be 0; otherwise ErrIncompleteOperatorState. States of one name must agree
// on kind and codecs (ErrIncompatibleState).
func redistributeOps(srcs []opSource, without []string, index, parallelism int) (*opSnapshot, error) {
	out := &opSnapshot{subtask: index, parallelism: parallelism}
	if len(srcs) == 0 {
		return out, nil
	}
	type named struct {
		kind   opKind
		codecs [2]string
		what   string
	}
	names := map[string]named{}
	lists := false
	for _, src := range srcs {
		for _, st := range src.snap.states {
			if n, ok := names[st.name]; ok && (n.kind != st.kind || n.codecs != st.codecs) {
				return nil, fmt.Errorf("%w: operator state %q is %v state with codecs %q in %s, %v state with %q in %s",
					ErrIncompatibleState, st.name, n.kind, n.codecs, n.what, st.kind, st.codecs, src.what)
			}
			names[st.name] = named{st.kind, st.codecs, src.what}
			lists = lists || (st.kind != opBroadcast && st.hasElems())
		}
	}
	srcs = slices.Clone(srcs)
	slices.SortStableFunc(srcs, func(a, b opSource) int { return cmp.Compare(a.snap.subtask, b.snap.subtask) })
	oldP := srcs[0].snap.parallelism
	if lists {
		switch {
		case len(without) > 0:
			return nil, fmt.Errorf("%w: %s holds no operator state (written before manifest format version 3) beside checkpoints that hold operator list state",
				ErrIncompleteOperatorState, without[0])
		case len(srcs) != oldP:
			return nil, fmt.Errorf("%w: %d checkpoints given for the %d subtasks of the old job (%s: subtask %d of %d); operator list state needs every subtask's",
				ErrIncompleteOperatorState, len(srcs), oldP, srcs[0].what, srcs[0].snap.subtask, oldP)
		}
		for i, src := range srcs {
			if src.snap.parallelism != oldP || src.snap.subtask != i {
				return nil, fmt.Errorf("%w: %s is subtask %d of parallelism %d where subtask %d of %d is missing (a duplicate, or another job's)",
					ErrIncompleteOperatorState, src.what, src.snap.subtask, src.snap.parallelism, i, oldP)
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
		st := &opState{name: name, kind: n.kind, codecs: n.codecs}
		var parts [][][]byte // the old subtasks' lists, in subtask order
		var partIDs [][]uint64
		var having []*opState
		for _, src := range srcs {
			i, ok := slices.BinarySearchFunc(src.snap.states, name, func(s *opState, name string) int { return strings.Compare(s.name, name) })
			if !ok {
				parts, partIDs = append(parts, nil), append(partIDs, nil)
				continue
			}
			have := src.snap.states[i]
			having = append(having, have)
			parts, partIDs = append(parts, have.elems), append(partIDs, have.ids)
		}
		switch n.kind {
		case opBroadcast:
			from := having[index%len(having)]
			st.m = make(map[string][]byte, len(from.m))
			for k, v := range from.m {
				st.m[k] = v
			}
		case opUnion:
			// Every element any old subtask held, once per id (invariant 3).
			seen := map[uint64]bool{}
			for i, p := range parts {
				for j, e := range p {
					id := partIDs[i][j]
					if !seen[id] {
						seen[id] = true
						st.elems, st.ids = append(st.elems, e), append(st.ids, id)
					}
				}
			}
		case opList:
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
			st.elems = slices.Clone(all[lo:hi])
		}
		st.cost = st.recount()
		out.states = append(out.states, st)
	}
	return out, nil
}
