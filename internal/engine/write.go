package engine

import (
	"fmt"

	"github.com/strata-db/strata/internal/base"
)

// OpKind is the kind of a state change (Op). Every change the engine applies is one of these;
// the changelog will record them by this value: part of the format; do not change the values.
type OpKind uint8

const (
	// OpPut sets the value of Key (value, reducing and aggregating state).
	OpPut OpKind = 1
	// OpDelete removes the value of Key (a tombstone).
	OpDelete OpKind = 2
	// OpListAppend appends the framed elements in Value to the list Key (a merge operand).
	OpListAppend OpKind = 3
	// OpListReplace replaces the list Key by the framed elements in Value.
	OpListReplace OpKind = 4
	// OpListDelete removes the list Key.
	OpListDelete OpKind = 5
	// OpMapPut sets UserKey of the map Key to Value.
	OpMapPut OpKind = 6
	// OpMapRemove removes UserKey from the map Key.
	OpMapRemove OpKind = 7
	// OpMapClear removes every entry of the map Key.
	OpMapClear OpKind = 8

	numOpKinds = 9 // one past the last OpKind; TestApplyEveryOp covers each below it
)

// String returns the operation's name, for errors and tests.
func (k OpKind) String() string {
	switch k {
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpListAppend:
		return "list-append"
	case OpListReplace:
		return "list-replace"
	case OpListDelete:
		return "list-delete"
	case OpMapPut:
		return "map-put"
	case OpMapRemove:
		return "map-remove"
	case OpMapClear:
		return "map-clear"
	}
	return fmt.Sprintf("op(%d)", uint8(k))
}

// Op is one state change. Key is a composite key (base.AppendCompositeKey) with Hash its
// base.CompositeHash; UserKey and UserHash (base.HashUserKey) are set for OpMapPut and
// OpMapRemove only; Value for OpPut, OpListAppend, OpListReplace and OpMapPut. The byte slices
// are read during Apply only (the engine copies what it keeps).
type Op struct {
	Kind     OpKind
	Hash     uint64
	UserHash uint64
	Key      []byte
	UserKey  []byte
	Value    []byte
}

// Apply applies one state change: the engine's single write path. In order, it
//
//  1. reports a sticky background failure, resets the read arena (values read before it are
//     no longer valid) and installs finished background work (one atomic load when there is
//     none), stalling while L0 is full (before);
//  2. with the changelog on, reserves the change's room in the log (reserveLog: one atomic
//     load while room is reserved; a full log buffer is backpressure, nothing applied);
//  3. drops the row-cache copy of a value key that is deleted, and writes the FreshTable; a
//     write refused for memory waits for background work and retries (backpressure), until
//     Options.BackpressureTimeout; then appends the change to the changelog;
//  4. refreshes the row-cache copy of a value key that is put (write-through; after the write,
//     so a refused Put changes nothing);
//  5. queues the transform of segments the write sealed, and every sweepWrites writes looks
//     whether a TTL sweep tick is due (after; sweep.go).
//
// Errors: ErrKeyTooLarge, ErrValueTooLarge (nothing written), ErrMemoryBudget (after
// backpressure; nothing written), a background failure (ErrNoSpace, ErrCorruption, I/O errors),
// ErrClosed. Owner goroutine only; allocates nothing.
func (t *Engine) Apply(op Op) error {
	if t.cost.on {
		return t.sampledApply(op)
	}
	if err := t.before(); err != nil {
		return err
	}
	if t.cl != nil && !t.cl.replaying {
		if err := t.reserveLog(&op); err != nil {
			return err
		}
	}
	if op.Kind == OpDelete {
		t.dropRow(op.Hash, op.Key)
	}
	for {
		err := t.write(&op)
		if err == nil {
			break
		}
		if err = t.backpressure(err); err != nil {
			return err
		}
	}
	if t.cl != nil && !t.cl.replaying {
		if t.cost.split {
			t.cost.log -= mono()
		}
		err := t.logChange(&op)
		if t.cost.split {
			t.cost.log += mono()
		}
		if err != nil {
			return err
		}
	}
	if t.cl == nil || !t.cl.replaying { // bytes changed (TaskCost.AppliedBytes)
		t.cost.applied += int64(len(op.Key) + len(op.UserKey) + len(op.Value))
		t.cost.applies++
	}
	if op.Kind == OpPut && t.rc != nil && t.rc.n > 0 {
		t.rc.refresh(t.orderOf(op.Key, op.Hash), op.Key, op.Value)
	}
	t.after()
	return nil
}

// write applies op to the FreshTable (step 3 of Apply, one attempt).
func (t *Engine) write(op *Op) error {
	f := t.f
	switch op.Kind {
	case OpPut:
		return f.Put(op.Hash, op.Key, op.Value)
	case OpDelete:
		return f.Delete(op.Hash, op.Key)
	case OpListAppend:
		return f.ListAppend(op.Hash, op.Key, op.Value)
	case OpListReplace:
		return f.ListReplace(op.Hash, op.Key, op.Value)
	case OpListDelete:
		return f.ListDelete(op.Hash, op.Key)
	case OpMapPut:
		return f.MapPut(op.Hash, op.Key, op.UserHash, op.UserKey, op.Value)
	case OpMapRemove:
		return f.MapRemove(op.Hash, op.Key, op.UserHash, op.UserKey)
	case OpMapClear:
		return f.MapClear(op.Hash, op.Key)
	}
	panic("strata: invariant: unknown state change " + op.Kind.String())
}

// dropRow forgets the row-cache copy of a value key about to be written (rowcache.go,
// invariant 2). Free while the cache is empty (no value was read from the lower tier).
func (t *Engine) dropRow(h uint64, key []byte) {
	if t.rc != nil && t.rc.n > 0 {
		t.rc.drop(t.orderOf(key, h), key)
	}
}

// orderOf returns the order hash of a composite key with hash h (its key group is its first two
// bytes; base.AppendCompositeKey).
func (t *Engine) orderOf(key []byte, h uint64) uint64 {
	return base.OrderHash(uint16(key[0])<<8|uint16(key[1]), t.stride, h)
}

// CheckSizes returns the error Apply would refuse a write of key, map user key userKey and
// value (or list batch) with for their sizes alone — ErrKeyTooLarge, ErrValueTooLarge — or
// nil: the FreshTable's limits (fresh.Table.CheckSizes). The root's hot tier asks it at the
// call of a write it keeps, so the error comes where the call is (root doc.go, "Hot tier").
// Allocates nothing unless it returns an error. Owner goroutine only.
func (t *Engine) CheckSizes(key, userKey, value []byte) error {
	return t.f.CheckSizes(key, userKey, value)
}
