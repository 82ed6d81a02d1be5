package strata

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/strata-db/strata/internal/engine"
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

// The blob's byte layout, its two versions, its decoder and the redistribution of a Restore
// live in the engine (internal/engine/opstate.go: engine.OpSnapshot, engine.DecodeOps,
// engine.RedistributeOps); an opState here is the engine's OpState with the typed view, the
// codecs it was registered with and its counted bytes.

const (
	// MaxOperatorStateSize bounds the operator state of one Store, in counted bytes (8 MiB):
	// each element costs its encoded length plus 32 bytes, each broadcast entry its key and
	// value plus 64, each state its name and codec identities plus 128 (Go's slice headers,
	// map buckets and allocation rounding, approximately). Operator state is small by
	// contract (Flink's is held on the task's heap and sent through the job manager); what is
	// counted is also charged to the memory budget. A write beyond the bound fails with
	// ErrOperatorStateTooLarge; so does a Restore whose share is larger. Every encoding of it
	// fits a manifest and the persist point (lsm.MaxPersistMeta, 16 MiB, with the registry).
	MaxOperatorStateSize = engine.MaxOperatorStateSize

	opElemCost  = engine.OpElemCost
	opEntryCost = engine.OpEntryCost
)

// opKind is the kind of an operator state (engine.OpStateKind: its values are part of the
// blob's format).
type opKind = engine.OpStateKind

const (
	opList      = engine.OpStateList      // Flink's getListState: SPLIT_DISTRIBUTE
	opUnion     = engine.OpStateUnion     // Flink's getUnionListState: UNION
	opBroadcast = engine.OpStateBroadcast // Flink's getBroadcastState: BROADCAST
)

// opState is one operator state of a Store: registered, or restored and not registered again
// (kept, and checkpointed, as Flink keeps restored operator states). Its stored content is the
// embedded engine.OpState (Name, Kind, Codecs, Elems, IDs, Map).
type opState struct {
	engine.OpState

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
func (st *opState) opBaseCost() int64 { return st.BaseCost() }

// opCost returns the counted bytes of the stored operator state st (engine.OpState.Cost).
func opCost(st *engine.OpState) int64 { return st.Cost() }

// freshUnionID returns the id of an element a subtask adds to a union list (invariant 1).
func freshUnionID() uint64 { return rand.Uint64() }

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

// opSnapshot returns the Store's operator state for encoding (the states are the Store's own:
// encode at once).
func (s *Store) opSnapshot() *engine.OpSnapshot {
	o := &engine.OpSnapshot{Subtask: s.opts.SubtaskIndex, Parallelism: s.opts.Parallelism}
	for _, st := range s.ops {
		o.States = append(o.States, &st.OpState)
	}
	slices.SortFunc(o.States, func(a, b *engine.OpState) int { return strings.Compare(a.Name, b.Name) })
	return o
}

// loadOps installs the operator state recovered from the directory (Open, after Restore) and
// charges it. Errors: ErrIncompatibleStore when it was written by another subtask or
// parallelism than opts say; ErrIncompatibleState when a name is also a keyed state's;
// opCharge's.
func (s *Store) loadOps(o *engine.OpSnapshot) error {
	if o.Subtask != s.opts.SubtaskIndex || o.Parallelism != s.opts.Parallelism {
		return fmt.Errorf("%w: operator state stored by subtask %d of parallelism %d, opened as subtask %d of %d",
			ErrIncompatibleStore, o.Subtask, o.Parallelism, s.opts.SubtaskIndex, s.opts.Parallelism)
	}
	total := int64(0)
	for _, st := range o.States {
		if _, ok := s.persisted[st.Name]; ok {
			return fmt.Errorf("%w: %q is both a keyed and an %v state", ErrIncompatibleState, st.Name, st.Kind)
		}
		total += opCost(st)
	}
	if err := s.opCharge(total); err != nil {
		return err
	}
	for _, st := range o.States {
		s.ops[st.Name] = &opState{OpState: *st, cost: opCost(st)}
	}
	return nil
}
