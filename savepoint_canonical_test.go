package strata

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// TestSavepointCanonical: a canonical savepoint holds exactly the state at its call (writes
// after it are not in it), lists one canonical object, restores into 1, 2 and 3 Stores
// (rescaling) in both restore modes and back from 2 into 1 (its Stores' canonical
// savepoints), reads the same as a native savepoint of the same state restored, and a restored
// Store checkpoints on.
func TestSavepointCanonical(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	sp := spStorage(t, e)
	r := e.open(nil)
	r.writes(raceScale(8000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(2000)) // in memory at the savepoint
	hc, err := r.st.s.Savepoint(ctx, sp, SavepointCanonical, 2, []byte("pos-2"))
	if err != nil {
		t.Fatal(err)
	}
	if hc.Owner != SavepointOwner(r.st.s.owner()) || hc.ID != 2 || string(hc.InputPosition) != "pos-2" {
		t.Fatalf("savepoint handle %+v", hc)
	}
	hn, err := r.st.s.Savepoint(ctx, sp, SavepointNative, 3, []byte("pos-2"))
	if err != nil {
		t.Fatal(err)
	}
	m := r.m.clone()
	r.writes(raceScale(2000)) // not in either savepoint
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, sp, hc.Owner, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Objects) != 1 || man.Objects[0].Kind != checkpoint.KindCanonical {
		t.Fatalf("canonical savepoint manifest lists %+v", man.Objects)
	}
	for _, mode := range []RestoreMode{NoClaim, Claim} {
		for _, par := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("mode=%v/parallelism=%d", mode, par), func(t *testing.T) {
				e.t = t
				for i := range par {
					kg := ComputeKeyGroupRangeForOperatorIndex(maxP, par, i)
					p, err := e.restoreFrom(sp, &kg, mode, hc)
					if err != nil {
						t.Fatal(err)
					}
					if err := p.st.checkOwned(m); err != nil {
						p.st.s.Close()
						t.Fatalf("part %d of %d (%v): %v", i, par, kg, err)
					}
					if par == 2 && mode == NoClaim && p.st.s.RestoreStats().CanonicalEntries == 0 {
						t.Errorf("part %d: no canonical entries restored", i)
					}
					if err := p.st.s.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	e.t = t
	// Canonical and native restored read the same; 2 → 1 through canonical savepoints of
	// the two halves.
	pn, err := e.restoreFrom(sp, nil, NoClaim, hn)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := e.restoreFrom(sp, nil, NoClaim, hc)
	if err != nil {
		t.Fatal(err)
	}
	if err := pn.st.checkOwned(m); err != nil {
		t.Fatalf("native: %v", err)
	}
	if err := pc.st.checkOwned(m); err != nil {
		t.Fatalf("canonical: %v", err)
	}
	if err := pc.st.checkSameAs(pn.st); err != nil {
		t.Fatalf("canonical vs native: %v", err)
	}
	pn.st.s.Close()
	defer pc.st.s.Close()
	var halves []CheckpointHandle
	for i := range 2 {
		kg := ComputeKeyGroupRangeForOperatorIndex(maxP, 2, i)
		o := e.opts
		o.KeyGroups, o.Checkpoint.Owner = &kg, fmt.Sprintf("half-%d", i)
		o.SubtaskIndex, o.Parallelism = i, 2
		o.Checkpoint.Storage = nil
		s, err := Restore(e.newDir(), o, sp, hc)
		if err != nil {
			t.Fatal(err)
		}
		p := e.run(s)
		h, err := p.st.s.Savepoint(ctx, sp, SavepointCanonical, 5, nil)
		if err != nil {
			t.Fatal(err)
		}
		halves = append(halves, h)
		p.st.s.Close()
	}
	one, err := e.restoreFrom(sp, nil, NoClaim, halves...)
	if err != nil {
		t.Fatal(err)
	}
	if err := one.st.checkOwned(m); err != nil {
		t.Fatalf("2 → 1: %v", err)
	}
	one.st.s.Close()
	// The restored Store goes on: a checkpoint of its own.
	if _, err := pc.st.s.Checkpoint(ctx, 10, nil); err != nil {
		t.Fatal(err)
	}
}

// checkSameAs compares every slot's state of st with o's (both hold every key group).
func (st *modelStates) checkSameAs(o *modelStates) error {
	for slot := range st.u.slots() {
		a, okA, errA := st.val.Get(st.key(slot))
		b, okB, errB := o.val.Get(o.key(slot))
		if errA != nil || errB != nil || okA != okB || string(a) != string(b) {
			return fmt.Errorf("slot %d: value %q %v %v vs %q %v %v", slot, a, okA, errA, b, okB, errB)
		}
		na, _ := st.mp.IsEmpty(st.key(slot))
		nb, _ := o.mp.IsEmpty(o.key(slot))
		if na != nb {
			return fmt.Errorf("slot %d: map empty %v vs %v", slot, na, nb)
		}
	}
	return nil
}

// TestSavepointCanonicalDamaged: a canonical savepoint object with a flipped byte or cut
// short fails its restore with ErrCorruption naming the object; another format version is
// ErrFormatVersion; the restore leaves no Store.
func TestSavepointCanonicalDamaged(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 32)
	r := e.open(nil)
	r.writes(raceScale(2000))
	sp := spStorage(t, e)
	h, err := r.st.s.Savepoint(ctx, sp, SavepointCanonical, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, sp, h.Owner, h.ID)
	if err != nil {
		t.Fatal(err)
	}
	obj := man.Objects[0]
	good, err := sp.Get(ctx, obj.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		bytes func() []byte
		cause error
	}{
		{"flipped", func() []byte { b := append([]byte(nil), good...); b[len(b)/2] ^= 1; return b }, ErrChecksum},
		{"truncated", func() []byte { return good[:len(good)-10] }, ErrTruncated},
		{"version", func() []byte {
			b := append([]byte(nil), good...)
			binary.LittleEndian.PutUint16(b[8:], 9)
			return b
		}, ErrFormatVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			if err := sp.Delete(ctx, obj.Name); err != nil {
				t.Fatal(err)
			}
			if err := sp.Put(ctx, obj.Name, tc.bytes()); err != nil {
				t.Fatal(err)
			}
			_, err := e.restoreFrom(sp, nil, NoClaim, h)
			var ce *base.CorruptionError
			if !errors.Is(err, ErrCorruption) || !errors.Is(err, tc.cause) || !errors.As(err, &ce) || ce.File != obj.Name {
				t.Fatalf("restore of a damaged savepoint: %v, want ErrCorruption (%v) naming %s", err, tc.cause, obj.Name)
			}
		})
	}
}
