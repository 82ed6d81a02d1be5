package engine

import (
	"bytes"
	"context"
	"fmt"

	"github.com/strata-db/strata/changelog"
	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
)

// replaySource applies the records of one restored manifest's changelog segments for key
// groups r, each once: in bulk while the upper tiers are empty (canBulkReplay, bulkReplay) —
// lazily with lazyTail (queueTail: the records collected come back as applied) —, else
// through Apply in seq order, skipping those a later record supersedes (replayKeep). It
// returns the records applied and skipped (superseded).
func (t *Engine) replaySource(ctx context.Context, s checkpoint.Storage, m *checkpoint.Manifest, segs []checkpoint.Object, r changelog.KeyGroupRange) (applied, skipped int64, err error) {
	// The objects are read and checked at once on the scheduler's workers and the owner,
	// into one off-heap buffer (huge pages) when the storage reads into ours: released when
	// the records are applied, or for a lazy tail when its driver is done (releaseSources).
	b, err := changelog.CollectParallel(ctx, s, segs, r, 0, m.LastSeq, changelog.CollectOptions{OffHeap: true,
		Run: func(n int, f func(int) error) error { return t.forEachParallel("changelog collect", n, f) }})
	if err != nil {
		return 0, 0, err
	}
	if t.lazyTail && t.canBulkReplay() {
		// A lazy restore's tail: written in the background, installed at the first call
		// that needs it (tail.go; doc.go, invariant 32). The Resolver's counts come then.
		if err := t.queueTail(b, segs[0].Name); err != nil {
			b.Release()
			return 0, 0, err
		}
		return int64(b.Len()), 0, nil
	}
	defer b.Release() // every record is applied or written into files by then; an unmap error leaves the mapping, nothing else
	if t.canBulkReplay() {
		// Every record goes to the sort: the Resolver drops what a later record supersedes
		// (about 1 µs a record cheaper than replayKeep's hash table, which Apply needs).
		return t.bulkReplay(ctx, b, nil, segs[0].Name, true)
	}
	keep, err := replayKeep(b, segs[0].Name)
	if err != nil {
		return 0, 0, err
	}
	var rec changelog.Record
	for i, k := range keep {
		if !k {
			skipped++
			continue
		}
		if err := b.Record(i, &rec); err != nil {
			return applied, skipped, err
		}
		h, _, _ := base.HashCompositeKey(rec.Key) // checked by replayKeep
		op := Op{Kind: OpKind(rec.Kind), Hash: h, Key: rec.Key, UserKey: rec.UserKey, Value: rec.Value}
		if op.Kind == OpMapPut || op.Kind == OpMapRemove {
			op.UserHash = base.HashUserKey(rec.UserKey)
		}
		if err := t.Apply(op); err != nil {
			return applied, skipped, err
		}
		applied++
		if applied&1023 == 0 {
			if err := ctx.Err(); err != nil {
				return applied, skipped, err
			}
		}
	}
	return applied, skipped, nil
}

// replayKeep marks the records of b a restore must apply (true) and those a later record of
// the same composite key makes irrelevant (false) — replaying only the last write of a key
// updated many times since the materialization:
//   - Put, Delete, ListReplace and ListDelete set the whole state of their key: every earlier
//     Put, Delete, ListAppend, ListReplace and ListDelete of the key is superseded;
//   - MapClear supersedes every earlier map op of the key; MapPut and MapRemove supersede the
//     earlier MapPut and MapRemove of their user key.
//
// A record of any other kind is kept and supersedes nothing, so an OpKind added later is
// replayed in full until it gets a rule here (TestReplayKeep). Map ops and the others never
// supersede one another. One pass, newest first; memory: about 60 bytes per distinct key,
// 8 per record, and the user keys of map ops.
// Errors: a *base.CorruptionError naming object for a record without a composite key.
func replayKeep(b *changelog.Batch, object string) ([]bool, error) {
	n := b.Len()
	keep := make([]bool, n)
	// One tracker per distinct key, found through an open-addressing table on the key's hash;
	// one pass, newest record first.
	type tracker struct {
		key           []byte
		whole, mapAll bool
		userKeys      map[string]struct{}
	}
	type slot struct {
		h uint64 // the key's hash, probed without touching the tracker
		t int32  // tracker index + 1; 0: empty
	}
	var trs []tracker
	bits := 1
	for 1<<bits < 2*n {
		bits++
	}
	slots := make([]slot, 1<<bits)
	mask := uint64(len(slots) - 1)
	var r changelog.Record
	for i := n - 1; i >= 0; i-- {
		if err := b.Record(i, &r); err != nil {
			return nil, err
		}
		h, _, ok := base.HashCompositeKey(r.Key)
		if !ok {
			return nil, base.Corrupt(object, -1, nil, "changelog record of seq %d has no composite key", r.Seq)
		}
		s := (h * 0x9e3779b97f4a7c15) >> (64 - bits) // Fibonacci hashing: the key hash's low bits are not spread
		for slots[s].t != 0 && !(slots[s].h == h && bytes.Equal(trs[slots[s].t-1].key, r.Key)) {
			s = (s + 1) & mask
		}
		if slots[s].t == 0 {
			trs = append(trs, tracker{key: r.Key})
			slots[s] = slot{h, int32(len(trs))}
		}
		tr := &trs[slots[s].t-1]
		switch OpKind(r.Kind) {
		case OpPut, OpDelete, OpListReplace, OpListDelete:
			keep[i] = !tr.whole
			tr.whole = true
		case OpListAppend:
			keep[i] = !tr.whole
		case OpMapClear:
			keep[i] = !tr.mapAll
			tr.mapAll = true
		case OpMapPut, OpMapRemove:
			if tr.mapAll {
				break
			}
			if tr.userKeys == nil {
				tr.userKeys = map[string]struct{}{}
			}
			if _, seen := tr.userKeys[string(r.UserKey)]; !seen {
				keep[i] = true
				tr.userKeys[string(r.UserKey)] = struct{}{}
			}
		default:
			keep[i] = true
		}
	}
	return keep, nil
}

// replayError wraps a replay failure of checkpoint id.
func replayError(id uint64, err error) error {
	return fmt.Errorf("strata: restore of checkpoint %d: changelog: %w", id, err)
}
