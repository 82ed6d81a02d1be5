package base

import (
	"bytes"
	"fmt"
)

// Step is what one version of a key, fed newest first to a point read of a
// Resolver (ReadKey, ReadMapEntry, ReadClear), contributes to the answer
// (doc.go, "Merge rules").
type Step uint8

const (
	// StepSkip: the version does not take part in this read (a map entry
	// in a key-level read, a version after the answer was complete, a
	// map entry's version older than the map's clear); go on.
	StepSkip Step = iota
	// StepOperand: a list append operand (rule 2): its value is part of
	// the answer, below the newer operands; older versions still count, go
	// on.
	StepOperand
	// StepBase: the version decides with a value (rules 1 and 2): its
	// value is the answer, or the base below the operands seen so far;
	// the answer is complete, stop.
	StepBase
	// StepDelete: the version decides with nothing (a tombstone, a map
	// entry tombstone, a map clear): the operands seen so far, if any,
	// are the whole list; the answer is complete, stop.
	StepDelete
)

// Decision is what a Filter does with one resolved entry.
type Decision uint8

const (
	// FilterKeep emits the entry as it is.
	FilterKeep Decision = iota
	// FilterDrop leaves the entry out of the output.
	FilterDrop
	// FilterRewrite emits the entry the Filter returned instead.
	FilterRewrite
)

// Filter is the Resolver's hook over what survives merging: it is called
// once per resolved entry, in entry order, after the merge rules and after
// tombstones were dropped (Resolver.DropTombstones), and keeps, drops or
// rewrites the entry. A rewrite (TTL: a list batch without its expired
// elements; a map entry's value re-stamped) returns an entry with the same
// Order, Key, UserKey and Seq — the output must stay in entry order; the
// Resolver panics otherwise — and any Kind and Value; its bytes need to stay
// valid only until the Filter's next call. Dropping a tombstone is the
// filter's own responsibility: drop one only when nothing older can lie
// below (lsm.CompactionFilter's bottom). Rescaling clips key groups by
// dropping every entry whose Order lies outside the kept range. A Filter
// runs on the goroutine that feeds the Resolver (a background job) and
// must not keep e.
type Filter func(e *Entry) (Decision, *Entry)

// ResolverStats counts what a Resolver did since it was made or Reset.
type ResolverStats struct {
	In         int64 // entries fed to Add
	Out        int64 // entries passed to Emit
	Hidden     int64 // versions hidden by a newer version or a map clear, and duplicates
	Joined     int64 // list operands joined into a resolved list (rule 3)
	Tombstones int64 // tombstones dropped by DropTombstones (rule 6)
	Dropped    int64 // entries the Filter dropped
	Rewritten  int64 // entries the Filter rewrote
}

// MaxListPiece is the bound, in bytes, on a list piece that a compaction
// joins (Resolver.MaxList, rule 4) in every tier: the default of
// slice.Options.MaxListMerge and of lsm.Options.MaxListPiece. A list longer
// than this stays a chain of pieces (the oldest the base, the newer ones
// append operands), so no compaction builds a value past it — far below the
// 1 GiB entry limit of the table format and the slices' MaxValueSize — and a
// list read of the lower tier holds one piece at a time.
const MaxListPiece = 1 << 20

// Resolver applies Strata's merge rules (doc.go, "Merge rules") — newest
// wins, list operands stack on the newest base below them, a map clear
// hides the older entries of its map, tombstones go only where nothing
// older lies below — in two uses that share the rules:
//
//   - Compaction (Add, Finish): fed a stream in entry order (a
//     MergingIter over the inputs), it emits the resolved entries, in entry
//     order, to Emit, through Filter. It holds the versions of one key only
//     while list operands are unresolved; everything else passes through.
//     slice.Compaction.Run and lsm.CompactionJob.Run use it.
//   - Point reads (StartRead, ReadKey, ReadMapEntry, ReadClear, Answer):
//     fed the versions of one key newest first, it says per version what
//     the version contributes (Step) and when the answer is complete; the
//     caller copies what it needs. No configuration field is used.
//
// The zero value is ready for point reads; a compaction sets Emit (and the
// other fields) before the first Add. Fields must not change during a
// stream. Not safe for concurrent use; a Resolver holds its scratch memory
// for reuse.
type Resolver struct {
	// Bottom says nothing older than the stream's entries can lie below
	// them (the end of a slice chain with no lower tier; no deeper LSM
	// level overlapping): list operands with nothing below become a base
	// (rule 3).
	Bottom bool
	// DropTombstones removes tombstones (KindTombstone,
	// KindMapEntryTombstone) from the output after they hid what they hide
	// (rule 6). Set it only with Bottom. The LSM leaves it false and lets
	// its CompactionFilter decide (lsm.DefaultFilter drops them at the
	// bottom).
	DropTombstones bool
	// MaxList bounds, in bytes, a list piece that compaction joins (rule
	// 4): operands join newest first into pieces of at most MaxList bytes
	// (an operand longer than that is a piece alone), and the oldest piece
	// joins the base below it only if both fit. So no compaction builds a
	// list value longer than max(MaxList, its longest input). 0: no bound
	// (tests; every tier sets MaxListPiece or its own option).
	MaxList int
	// Stable says the bytes of the entries fed to Add stay valid until
	// Finish (immutable slices); otherwise the Resolver copies the few it
	// holds across Add calls (sstable iterators reuse their buffers).
	Stable bool
	// Filter, if not nil, is applied to every resolved entry (Filter).
	Filter Filter
	// Emit receives the output in entry order; the entry and its bytes are
	// valid only during the call. An error stops the stream: Add or Finish
	// returns it.
	Emit func(*Entry) error

	stats ResolverStats

	// The group being resolved: versions of one (Order, Key, UserKey).
	inGroup   bool
	gOrder    uint64
	gKey, gUK []byte
	lastSeq   uint64 // Seq of the group's last version fed (duplicates)
	keyDone   bool   // the group's key-level versions are decided (rule 1)
	entryDone bool   // the group's map-entry versions are decided (rule 1)
	// The run (Order, Key): its map clear (rule 5).
	cleared  bool
	clearSeq uint64
	// While operands are unresolved: them and what survived after them, in
	// feed order (Seq descending), copies unless Stable.
	pend    []pending
	nOps    int // operands in pend
	opBytes int
	arena   []byte
	list    []byte // the joined list (rule 3)
	keyBuf  []byte // gKey and gUK when not Stable

	// Point read state.
	rOps     bool // operands seen
	rStep    Step // the deciding step of the key or map entry (StepSkip: none yet)
	rSeq     uint64
	rCleared bool
	rClear   uint64
}

type pending struct {
	e  Entry
	op bool
}

// Stats returns the counters since the Resolver was made or Reset.
func (r *Resolver) Stats() ResolverStats { return r.stats }

// Reset forgets a stream (the pending group, the counters) but keeps the
// configuration and the scratch memory.
func (r *Resolver) Reset() {
	r.stats = ResolverStats{}
	r.inGroup, r.cleared = false, false
	r.clearPending()
}

// keyStep is rules 1 and 2 for a key-level version: operands stack, the
// first other key-level version decides.
func keyStep(k Kind) Step {
	switch k {
	case KindListAppend:
		return StepOperand
	case KindValue, KindListBase:
		return StepBase
	case KindTombstone:
		return StepDelete
	}
	return StepSkip
}

// entryStep is rule 1 for a map entry's version.
func entryStep(k Kind) Step {
	switch k {
	case KindMapEntry:
		return StepBase
	case KindMapEntryTombstone:
		return StepDelete
	}
	return StepSkip
}

// hides is rule 5: a map clear as of clear hides the map's versions with a
// smaller sequence number (not an equal one).
func hides(clear, seq uint64) bool { return seq < clear }

// isTombstone reports whether k deletes (rule 6).
func isTombstone(k Kind) bool { return k == KindTombstone || k == KindMapEntryTombstone }

// isMapKind reports whether k is a map entry's kind (the second class of
// versions of a group; rule 1).
func isMapKind(k Kind) bool { return k == KindMapEntry || k == KindMapEntryTombstone }

// ---- point reads ----

// StartRead begins a point read of one key, forgetting the previous read.
// Then feed the key's versions newest first — across tiers or levels in
// age order — to ReadKey (a key-level read: value or list), or to
// ReadMapEntry and ReadClear (a map entry: the versions of (map key, user
// key) and of (map key, "") in either order), until a Step says the
// answer is complete or the versions run out, and call Answer.
func (r *Resolver) StartRead() {
	r.rOps, r.rStep, r.rSeq, r.rCleared, r.rClear = false, StepSkip, 0, false, 0
}

// ReadKey feeds the next older version of a key-level read and returns its
// Step: StepOperand for a list append (copy its value; go on), StepBase
// for a value or list base (copy its value; stop), StepDelete for a
// tombstone (stop), StepSkip for a map entry of the map key's empty user
// key or anything after the answer was complete.
func (r *Resolver) ReadKey(e *Entry) Step {
	if r.rStep != StepSkip {
		return StepSkip
	}
	s := keyStep(e.Kind)
	switch s {
	case StepOperand:
		r.rOps = true
	case StepBase, StepDelete:
		r.rStep, r.rSeq = s, e.Seq
	}
	return s
}

// ReadMapEntry feeds the next older version of one map entry (map key,
// user key) and returns its Step: StepBase for a map entry (copy its
// value; stop), StepDelete for a map entry tombstone (stop), StepSkip for
// other kinds (a map key's tombstone when the user key is empty: feed it
// to ReadClear too) and after the first decision. Whether a clear hides
// the decision is known only at Answer.
func (r *Resolver) ReadMapEntry(e *Entry) Step {
	if r.rStep != StepSkip {
		return StepSkip
	}
	s := entryStep(e.Kind)
	if s != StepSkip {
		r.rStep, r.rSeq = s, e.Seq
	}
	return s
}

// ReadClear feeds the next older version of the map key itself (map key,
// empty user key): the first KindTombstone is the map's clear (rule 5),
// StepDelete (stop); every other version is StepSkip.
func (r *Resolver) ReadClear(e *Entry) Step {
	if r.rCleared || e.Kind != KindTombstone {
		return StepSkip
	}
	r.rCleared, r.rClear = true, e.Seq
	return StepDelete
}

// Answer returns the point read's result: status Found when a value or
// operand was seen (and no clear hides the map entry), Deleted when a
// tombstone or a clear decides, Absent when nothing was seen; complete
// reports whether older versions (a lower tier) cannot change it — false
// when the read saw only list operands or nothing, so the caller goes on
// below and the operands stack on what it finds there (rule 3). seq is
// the deciding version's sequence number (0 if none).
func (r *Resolver) Answer() (st Status, complete bool, seq uint64) {
	if r.rCleared && (r.rStep == StepSkip || hides(r.rClear, r.rSeq)) {
		return Deleted, true, r.rClear
	}
	switch r.rStep {
	case StepBase:
		return Found, true, r.rSeq
	case StepDelete:
		if r.rOps {
			return Found, true, r.rSeq
		}
		return Deleted, true, r.rSeq
	}
	if r.rOps {
		return Found, false, 0
	}
	return Absent, false, 0
}

// ---- compaction ----

// Add feeds the next entry of a stream in entry order. Entries of a group
// (equal Order, Key, UserKey) must arrive newest first; an entry with the
// Seq of the group's previous one is a duplicate and is skipped. Errors:
// Emit's.
func (r *Resolver) Add(e *Entry) error {
	r.stats.In++
	if r.inGroup && e.Order == r.gOrder && bytes.Equal(e.Key, r.gKey) {
		if bytes.Equal(e.UserKey, r.gUK) {
			if e.Seq == r.lastSeq {
				r.stats.Hidden++ // the same version from an older source
				return nil
			}
		} else {
			if err := r.endGroup(); err != nil {
				return err
			}
			r.startGroup(e, false)
		}
	} else {
		if r.inGroup {
			if err := r.endGroup(); err != nil {
				return err
			}
		}
		r.startGroup(e, true)
	}
	r.lastSeq = e.Seq
	if e.Kind == KindTombstone && len(e.UserKey) == 0 && !r.cleared {
		r.cleared, r.clearSeq = true, e.Seq // rule 5: the newest one
	}
	if isMapKind(e.Kind) {
		if r.entryDone {
			r.stats.Hidden++
			return nil
		}
		r.entryDone = true
		if r.cleared && hides(r.clearSeq, e.Seq) {
			r.stats.Hidden++
			return nil
		}
		return r.out(e)
	}
	if r.keyDone {
		r.stats.Hidden++
		return nil
	}
	switch keyStep(e.Kind) {
	case StepOperand:
		if r.MaxList > 0 && r.nOps > 0 && r.opBytes+len(e.Value) > r.MaxList {
			// Rule 4: the piece is full; it goes out as an operand (older
			// pieces and the base follow it, with smaller Seqs).
			if err := r.resolveList(nil, false); err != nil {
				return err
			}
		}
		r.hold(e, true)
		r.nOps++
		r.opBytes += len(e.Value)
		return nil
	case StepBase, StepDelete:
		r.keyDone = true
		if len(r.pend) > 0 {
			return r.resolveList(e, true)
		}
	}
	return r.out(e)
}

// Finish resolves the last group. Call it once after the last Add; the
// Resolver is then ready for a new stream. Errors: Emit's.
func (r *Resolver) Finish() error {
	if !r.inGroup {
		return nil
	}
	err := r.endGroup()
	r.inGroup, r.cleared = false, false
	return err
}

func (r *Resolver) startGroup(e *Entry, newRun bool) {
	r.inGroup = true
	r.keyDone, r.entryDone = false, false
	if newRun {
		r.cleared = false
		r.gOrder = e.Order
		if r.Stable {
			r.gKey = e.Key
		} else {
			r.keyBuf = append(r.keyBuf[:0], e.Key...)
			r.gKey = r.keyBuf
		}
	}
	if r.Stable {
		r.gUK = e.UserKey
	} else {
		n := len(r.gKey)
		r.keyBuf = append(r.keyBuf[:n], e.UserKey...)
		r.gKey = r.keyBuf[:n:n]
		r.gUK = r.keyBuf[n:]
	}
}

// endGroup resolves operands left without a base in the group (rule 3).
func (r *Resolver) endGroup() error {
	if len(r.pend) == 0 {
		return nil
	}
	return r.resolveList(nil, true)
}

// out passes a surviving version on: held while operands are unresolved
// (they come first in entry order), emitted otherwise.
func (r *Resolver) out(e *Entry) error {
	if len(r.pend) > 0 {
		r.hold(e, false)
		return nil
	}
	return r.emit(e)
}

func (r *Resolver) hold(e *Entry, op bool) {
	c := *e
	if !r.Stable {
		c.Key, c.UserKey, c.Value = r.copyBytes(e.Key), r.copyBytes(e.UserKey), r.copyBytes(e.Value)
	}
	r.pend = append(r.pend, pending{e: c, op: op})
}

func (r *Resolver) copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	n := len(r.arena)
	r.arena = append(r.arena, b...)
	return r.arena[n:len(r.arena):len(r.arena)]
}

func (r *Resolver) clearPending() {
	clear(r.pend) // drop references into the producer's memory
	r.pend, r.nOps, r.opBytes, r.arena = r.pend[:0], 0, 0, r.arena[:0]
}

// resolveList joins the held operands into one list piece and emits it
// with what was held after the operands, in entry order (rules 2-4). last
// says the group's operands end here: base is then the group's first
// key-level version that is not an operand, or nil when the group has
// none. Without last the piece is full (rule 4) and more, older operands
// follow: it is an operand.
func (r *Resolver) resolveList(base *Entry, last bool) error {
	defer r.clearPending()
	hasBytes := base != nil && (base.Kind == KindListBase || base.Kind == KindValue)
	// The piece is the whole list when nothing older can change it: it
	// joins the base, consumes a tombstone, or lies at the bottom (rule 3).
	join := hasBytes && (r.MaxList <= 0 || r.opBytes+len(base.Value) <= r.MaxList)
	whole := last && (join || (base != nil && !hasBytes) || (base == nil && r.Bottom))
	r.list = r.list[:0]
	if join {
		r.list = append(r.list, base.Value...)
	}
	first := -1
	for i := len(r.pend) - 1; i >= 0; i-- {
		if r.pend[i].op {
			r.list = append(r.list, r.pend[i].e.Value...)
			first = i
			r.stats.Joined++
		}
	}
	if base != nil && !(hasBytes && !join) {
		r.stats.Hidden++ // the base is in the list (or, a tombstone, under it)
	}
	for i := range r.pend {
		p := &r.pend[i]
		if !p.op {
			if err := r.emit(&p.e); err != nil {
				return err
			}
			continue
		}
		if i != first {
			continue
		}
		// The newest operand carries the piece: its Seq, hashes and key.
		l := p.e
		l.Value = r.list
		l.Kind = KindListAppend
		if whole {
			l.Kind = KindListBase
		}
		if err := r.emit(&l); err != nil {
			return err
		}
	}
	if hasBytes && !join {
		return r.emit(base) // rule 4: the base stays as it is, below the pieces
	}
	return nil
}

// emit applies rule 6 and the Filter and hands e to Emit.
func (r *Resolver) emit(e *Entry) error {
	if r.DropTombstones && isTombstone(e.Kind) {
		r.stats.Tombstones++
		return nil
	}
	if r.Filter != nil {
		switch d, ne := r.Filter(e); d {
		case FilterDrop:
			r.stats.Dropped++
			return nil
		case FilterRewrite:
			if ne == nil || ne.Order != e.Order || ne.Seq != e.Seq || !bytes.Equal(ne.Key, e.Key) || !bytes.Equal(ne.UserKey, e.UserKey) {
				panic(fmt.Sprintf("strata: invariant: a Filter rewrote order %#x seq %d out of its place", e.Order, e.Seq))
			}
			r.stats.Rewritten++
			e = ne
		}
	}
	r.stats.Out++
	return r.Emit(e)
}
