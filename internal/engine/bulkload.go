package engine

import (
	"context"
	"fmt"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/fresh"
)

// Bulk load of logical entries (doc.go, "Bulk changelog replay", invariant 24): a canonical
// savepoint's entries restored by the mechanism that replays a changelog tail in bulk — the
// same sort, base.Resolver and L0 install — instead of one Apply per entry.

// BulkEntries collects the changes a restore writes in bulk (BulkLoad): Put, ListReplace,
// ListAppend and MapPut ops, in the order Apply would take them (a list's replace before its
// appends). Their bytes are copied into chunks of bulkChunk bytes and their references into
// chunks of 64 Ki (never moved once written, so nothing is copied as it grows): it holds about
// the sum of their key, user key and value bytes plus 24 bytes a change. Not safe for concurrent use.
type BulkEntries struct {
	chunks [][]byte
	recs   [][]bulkRef // bulkRefs refs each, the last one filling
	n      int
}

const (
	// bulkChunk is the size of a BulkEntries chunk (a larger change gets a chunk of its own).
	bulkChunk = 4 << 20
	// bulkRefBits sets the refs of one BulkEntries ref chunk: 1<<bulkRefBits.
	bulkRefBits = 16
)

// bulkRef is one change of BulkEntries: its chunk and where its key, user key and value lie.
type bulkRef struct {
	chunk, off   uint32
	key, uk, val uint32
	kind         uint8
}

// Add appends change op (its Kind, Key, UserKey and Value; the hashes are computed again by
// the load, which refuses a key that is not a composite key as damage). It panics for an op
// of another kind (an invariant of the caller).
func (b *BulkEntries) Add(op Op) {
	switch op.Kind {
	case OpPut, OpListReplace, OpListAppend, OpMapPut:
	default:
		panic(fmt.Sprintf("strata: invariant: bulk load of op kind %d", op.Kind))
	}
	uk := op.UserKey
	if op.Kind != OpMapPut {
		uk = nil
	}
	n := len(op.Key) + len(uk) + len(op.Value)
	if len(b.chunks) == 0 || cap(b.chunks[len(b.chunks)-1])-len(b.chunks[len(b.chunks)-1]) < n {
		b.chunks = append(b.chunks, make([]byte, 0, max(bulkChunk, n)))
	}
	c := &b.chunks[len(b.chunks)-1]
	if b.n>>bulkRefBits == len(b.recs) {
		b.recs = append(b.recs, make([]bulkRef, 0, 1<<bulkRefBits))
	}
	r := &b.recs[len(b.recs)-1]
	*r = append(*r, bulkRef{chunk: uint32(len(b.chunks) - 1), off: uint32(len(*c)),
		key: uint32(len(op.Key)), uk: uint32(len(uk)), val: uint32(len(op.Value)), kind: uint8(op.Kind)})
	b.n++
	*c = append(append(append(*c, op.Key...), uk...), op.Value...)
}

// Len returns the number of changes added.
func (b *BulkEntries) Len() int { return b.n }

// Record returns change i as a changelog record of seq i+1 (BulkLoad shifts the seqs above
// the Store's).
func (b *BulkEntries) Record(i int, r *changelog.Record) error {
	c := &b.recs[i>>bulkRefBits][i&(1<<bulkRefBits-1)]
	a := b.chunks[c.chunk][c.off:]
	k, u, v := c.key, c.key+c.uk, c.key+c.uk+c.val
	*r = changelog.Record{Kind: c.kind, Seq: uint64(i) + 1, Key: a[:k:k], UserKey: a[k:u:u], Value: a[u:v:v]}
	return nil
}

// Touch reads and returns the first byte of change i (bulkSource: the loads of a group overlap).
func (b *BulkEntries) Touch(i int) byte {
	c := &b.recs[i>>bulkRefBits][i&(1<<bulkRefBits-1)]
	if a := b.chunks[c.chunk]; int(c.off) < len(a) {
		return a[c.off]
	}
	return 0
}

// shiftedSource is a bulkSource whose seqs are those of src plus base.
type shiftedSource struct {
	src  bulkSource
	base uint64
}

func (s shiftedSource) Len() int { return s.src.Len() }

func (s shiftedSource) Touch(i int) byte { return s.src.Touch(i) }

func (s shiftedSource) Record(i int, r *changelog.Record) error {
	err := s.src.Record(i, r)
	r.Seq += s.base
	return err
}

// CanBulkLoad reports whether BulkLoad would write in bulk now: a lower tier and nothing in
// the upper tiers nor in flight (canBulkReplay: no FreshTable record, no sealed segment, so
// no reader of one, and the FreshTable can be replaced to move its seq). Owner only.
func (t *Engine) CanBulkLoad() bool { return t.canBulkReplay() }

// BulkLoad writes the changes of b as a bulk changelog replay writes a log tail (bulkReplay:
// sorted, resolved by base.Resolver, installed as L0 files) and reports true, or writes
// nothing and reports false when CanBulkLoad does not hold (the caller applies them itself).
// The changes get b.Len() new seqs above the Store's, in b's order: the empty FreshTable is
// replaced by one that continues after them, so every later write is newer than each of
// them. The reads after it are those after applying b's changes in order through Apply
// (invariant 24). object names the source in errors. Owner only. Errors: the lower tier's
// (ErrNoSpace, I/O), ctx's; fresh.ErrStartSeq past its bound.
func (t *Engine) BulkLoad(ctx context.Context, b *BulkEntries, object string) (applied int64, ok bool, err error) {
	if !t.CanBulkLoad() {
		return 0, false, nil
	}
	if b.Len() == 0 {
		return 0, true, nil
	}
	base := t.f.Seq()
	f, err := fresh.New(fresh.Options{Pool: t.pool, StartSeq: base + uint64(b.Len())})
	if err != nil {
		return 0, false, err
	}
	old := t.f
	t.f = f
	if err := old.Close(); err != nil {
		return 0, true, err
	}
	// No kick: the restore's persist, which follows, would wait for the L0 files' compactions;
	// they start with the Store's first write instead (Apply kicks the scheduler).
	applied, _, err = t.bulkReplay(ctx, shiftedSource{b, base}, nil, object, false)
	return applied, true, err
}
