package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
)

// The restore of canonical savepoints (the root's savepoint_canonical.go writes them;
// checkpoint/doc.go, "Canonical savepoint layout"): Restore step 7 writes the logical entries
// of the Store's key groups under each state's effective id of the restored registry — in
// bulk (BulkLoad) while the upper tiers are empty, else through Apply — and their timers into
// the timer queues (AddTimer).

// restoreCanonical restores the entries and timers of the canonical savepoints among sources
// for the engine's key groups, under the ids of reg (the restored registry: restoreIDs gave
// them). The entries go in bulk (BulkLoad: the changes Apply would take, sorted, resolved by
// base.Resolver and installed as L0 files, as a changelog tail is replayed) while the engine
// allows it (CanBulkLoad: nothing in the upper tiers), else through Apply; both give the same
// reads (the root's TestSavepointCanonicalBulk). A bulk load holds the changes of every
// canonical object of the key groups in memory (about their bytes) until it writes them.
// Errors: ErrCorruption naming the object, the storage's, Apply's (ErrValueTooLarge for an
// element larger than a quarter of a segment), BulkLoad's, ctx's. Owner only.
func (t *Engine) restoreCanonical(ctx context.Context, storage checkpoint.Storage, sources []*checkpoint.Manifest, reg *Registry) (entries int64, timers int, err error) {
	kg := t.tm.kg
	var be *BulkEntries
	if t.CanBulkLoad() {
		be = &BulkEntries{}
	}
	var first string
	for _, m := range sources {
		for _, o := range m.Objects {
			if o.Kind != checkpoint.KindCanonical || int(o.KeyGroups.End) < kg.Start || int(o.KeyGroups.Start) > kg.End {
				continue
			}
			if first == "" {
				first = o.Name
			}
			n, tm, err := t.restoreCanonicalObject(ctx, storage, o, reg, be)
			entries, timers = entries+n, timers+tm
			if err != nil {
				return entries, timers, err
			}
		}
	}
	if be == nil || be.Len() == 0 {
		return entries, timers, nil
	}
	if _, ok, err := t.BulkLoad(ctx, be, first); err != nil || ok {
		return entries, timers, err
	}
	return entries, timers, errors.New("strata: invariant: a canonical restore's bulk load was refused after CanBulkLoad")
}

// restoreCanonicalObject restores the entries (into be when not nil, else through Apply) and
// timers of canonical object o for the engine's key groups.
func (t *Engine) restoreCanonicalObject(ctx context.Context, storage checkpoint.Storage, o checkpoint.Object, reg *Registry, be *BulkEntries) (entries int64, timers int, err error) {
	r, err := checkpoint.ReadCanonical(ctx, storage, o.Name, o.Size)
	if err != nil {
		return 0, 0, err
	}
	meta := r.Meta()
	if meta.MaxParallelism != reg.MaxParallelism {
		return 0, 0, base.Corrupt(o.Name, -1, nil, "max parallelism %d where its manifest says %d", meta.MaxParallelism, reg.MaxParallelism)
	}
	kg := t.tm.kg
	// Each state's own id and its ids by key group (its aliases), by meta index.
	type target struct {
		id   uint16
		ids  []uint16 // by key group - kg.Start; nil: id everywhere
		kind StateKind
	}
	tg := make([]target, len(meta.States))
	for i, st := range meta.States {
		p, ok := reg.States[st.Name]
		if !ok || p.Kind != StateKind(st.Kind) {
			return 0, 0, base.Corrupt(o.Name, -1, nil, "state %q of kind %v, which the restored registry does not hold as such", st.Name, st.Kind)
		}
		tg[i] = target{id: p.ID, ids: aliasIDs(reg.Aliases[st.Name], p.ID, kg), kind: p.Kind}
	}
	var ck, val []byte
	put := func(kind OpKind, h uint64, uk, v []byte) error {
		if be != nil {
			be.Add(Op{Kind: kind, Key: ck, UserKey: uk, Value: v})
			return nil
		}
		op := Op{Kind: kind, Hash: h, Key: ck, Value: v}
		if kind == OpMapPut {
			op.UserKey, op.UserHash = uk, base.HashUserKey(uk)
		}
		return t.Apply(op)
	}
	entryFn := func(e *checkpoint.CanonicalEntry) error {
		tgt := tg[e.State]
		id := tgt.id
		if tgt.ids != nil {
			id = tgt.ids[int(e.KeyGroup)-kg.Start]
		}
		ck = base.AppendCompositeKey(ck[:0], e.KeyGroup, id, e.Key, e.Namespace)
		h, _, _ := base.HashCompositeKey(ck)
		ttl := meta.States[e.State].TTL
		val = val[:0]
		var err error
		switch tgt.kind {
		case KindList:
			for i, el := range e.Elements {
				n := len(el)
				if ttl {
					n += base.TSLen
				}
				val = binary.AppendUvarint(val, uint64(n))
				if ttl {
					val = base.AppendTS(val, e.ElementTTLs[i])
				}
				val = append(val, el...)
			}
			err = t.canonicalList(put, h, val)
		case KindMap:
			if ttl {
				val = base.AppendTS(val, e.TTL)
			}
			val = append(val, e.Value...)
			err = put(OpMapPut, h, e.UserKey, val)
		default:
			if ttl {
				val = base.AppendTS(val, e.TTL)
			}
			val = append(val, e.Value...)
			err = put(OpPut, h, nil, val)
		}
		if err != nil {
			return err
		}
		if entries++; entries&1023 == 0 {
			return ctx.Err()
		}
		return nil
	}
	timerFn := func(tm *checkpoint.CanonicalTimer) error {
		timers++
		return t.AddTimer(o.Name, meta.States[tm.Service].Name, TimerDomain(tm.Domain),
			Timer{KeyGroup: int(tm.KeyGroup), KeyHash: tm.KeyHash, Key: tm.Key, Namespace: tm.Namespace, Timestamp: tm.Timestamp})
	}
	err = r.Scan(kg, entryFn, timerFn)
	return entries, timers, err
}

// canonicalList writes a restored list (batch: its framed elements) as the root's ListState
// Update does: one OpListReplace of the first part, then OpListAppends, each part at most an
// eighth of a segment (whole elements; an element larger than that is a part alone). An
// element larger than a quarter of a segment, which the FreshTable cannot take in one
// record, fails with ErrValueTooLarge before anything is written.
func (t *Engine) canonicalList(put func(kind OpKind, h uint64, uk, v []byte) error, h uint64, batch []byte) error {
	max := t.segSize / 8
	if len(batch) > max {
		if err := CheckListElems(batch, t.segSize/4); err != nil {
			return err
		}
	}
	kind := OpListReplace
	for len(batch) > 0 {
		n := ListPiece(batch, max)
		if err := put(kind, h, nil, batch[:n]); err != nil {
			return err
		}
		kind = OpListAppend
		batch = batch[n:]
	}
	return nil
}

// aliasIDs returns a state's effective ids by key group of kg (index: key group - kg.Start)
// given its own id and its aliases as; nil when it has none (id everywhere).
func aliasIDs(as []IDAlias, id uint16, kg checkpoint.KeyGroupRange) []uint16 {
	if len(as) == 0 {
		return nil
	}
	ids := make([]uint16, kg.End-kg.Start+1)
	for j := range ids {
		ids[j] = id
	}
	for _, a := range as {
		for k := int(a.Lo); k <= int(a.Hi); k++ {
			ids[k-kg.Start] = a.ID
		}
	}
	return ids
}

// ListPiece returns the length of the first piece of the framed list batch (a uvarint length
// and the bytes of each element) to write as one list record: all of it when it is at most max
// bytes, else its longest prefix of whole elements within max, or its first element alone when
// that one is longer. The typed API's list writes and the canonical restore cut long lists
// with it, so that no list record exceeds what the FreshTable takes. Panics on broken framing:
// the caller framed the batch.
func ListPiece(batch []byte, max int) int {
	if len(batch) <= max {
		return len(batch)
	}
	n := 0
	for n < len(batch) {
		ln, m := binary.Uvarint(batch[n:])
		if m <= 0 {
			panic("strata: invariant: list batch framing broken")
		}
		end := n + m + int(ln)
		if end > max && n > 0 {
			break
		}
		n = end
	}
	return n
}

// CheckListElems returns an error wrapping ErrValueTooLarge when an element of the framed list
// batch is longer, framing included, than limit bytes (what the FreshTable takes in one
// record: a quarter of a segment), else nil: a long list is cut into pieces (ListPiece)
// between elements, so one too large for a record must be refused before any piece is
// written. Panics on broken framing: the caller framed the batch.
func CheckListElems(batch []byte, limit int) error {
	for len(batch) > 0 {
		ln, m := binary.Uvarint(batch)
		if m <= 0 {
			panic("strata: invariant: list batch framing broken")
		}
		if n := uint64(m) + ln; n > uint64(limit) {
			return fmt.Errorf("%w: list element of %d bytes (framed) > %d", ErrValueTooLarge, n, limit)
		}
		batch = batch[m+int(ln):]
	}
	return nil
}
