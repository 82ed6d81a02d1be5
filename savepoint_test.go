package strata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
)

// spEnv is a ckEnv with a second DirStorage for savepoints.
func spStorage(t *testing.T, e *ckEnv) *checkpoint.DirStorage {
	t.Helper()
	sp, err := checkpointfs.NewDirStorage(e.fs, filepath.Join(e.root, "savepoints"))
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// restoreFrom is ckEnv.restore from another storage.
func (e *ckEnv) restoreFrom(storage checkpoint.Storage, kg *KeyGroupRange, mode RestoreMode, handles ...CheckpointHandle) (*modelRun, error) {
	o := e.opts
	o.KeyGroups = kg
	o.Checkpoint.RestoreMode = mode
	o.Checkpoint.Storage = nil // defaults to the storage restored from
	s, err := Restore(e.newDir(), o, storage, handles...)
	if err != nil {
		return nil, err
	}
	return e.run(s), nil
}

// TestSavepointNative: a native savepoint holds exactly the state at its cut, owns every
// object it names (none under the Store's lineage), survives the Store's checkpoint garbage
// collection, and restores into 1, 2 and 3 Stores (rescaling) in both restore modes; the
// Store's own checkpoints go on as before.
func TestSavepointNative(t *testing.T) {
	ctx := context.Background()
	const maxP = 128
	e := newCkEnv(t, vfs.Default(), t.TempDir(), maxP)
	sp := spStorage(t, e)
	r := e.open(nil)
	r.writes(raceScale(8000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	h1, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(2000)) // in memory at the savepoint
	hs, err := r.st.s.Savepoint(ctx, sp, SavepointNative, 2, []byte("pos-2"))
	if err != nil {
		t.Fatal(err)
	}
	if hs.Owner != SavepointOwner(h1.Owner) || hs.ID != 2 || string(hs.InputPosition) != "pos-2" {
		t.Fatalf("savepoint handle %+v", hs)
	}
	m := r.m.clone()
	// Writes after the savepoint, then checkpoints whose GC deletes checkpoint 2 of the Store.
	r.writes(raceScale(2000))
	for id := uint64(3); id <= 4; id++ {
		if _, err := r.st.s.Checkpoint(ctx, id, nil); err != nil {
			t.Fatal(err)
		}
		if err := r.st.s.NotifyCheckpointComplete(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.st.s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(ctx, e.st, h1.Owner, 2); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("the Store's checkpoint 2 (aborted after the savepoint's copy): %v, want collected", err)
	}
	r.st.s.Close()
	man, err := checkpoint.ReadManifest(ctx, sp, hs.Owner, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(man.Objects) == 0 || man.Parent != 0 {
		t.Fatalf("savepoint manifest: %d objects, parent %d", len(man.Objects), man.Parent)
	}
	for _, o := range man.Objects {
		if !strings.HasPrefix(o.Name, checkpoint.OwnerPrefix(hs.Owner)+"chk-") {
			t.Fatalf("savepoint object %s is not its own", o.Name)
		}
	}
	for _, mode := range []RestoreMode{NoClaim, Claim} {
		for _, par := range []int{1, 2, 3} {
			t.Run(fmt.Sprintf("mode=%v/parallelism=%d", mode, par), func(t *testing.T) {
				e.t = t
				for i := range par {
					kg := ComputeKeyGroupRangeForOperatorIndex(maxP, par, i)
					p, err := e.restoreFrom(sp, &kg, mode, hs)
					if err != nil {
						t.Fatal(err)
					}
					if err := p.st.checkOwned(m); err != nil {
						p.st.s.Close()
						t.Fatalf("part %d of %d (%v): %v", i, par, kg, err)
					}
					if err := p.st.s.Close(); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	e.t = t
	// A restored Store checkpoints (in NO_CLAIM mode, a full checkpoint of its own).
	p, err := e.restoreFrom(sp, nil, NoClaim, hs)
	if err != nil {
		t.Fatal(err)
	}
	defer p.st.s.Close()
	if _, err := p.st.s.Checkpoint(ctx, 10, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.st.s.Savepoint(ctx, sp, SavepointKind(9), 11, nil); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("unknown kind: %v, want ErrInvalidOptions", err)
	}
}

// TestSavepointDamaged: a savepoint whose object or manifest is damaged fails its restore with
// ErrCorruption, never restores other data; a checkpoint damaged under the savepoint's copy
// fails the savepoint with ErrCorruption and commits none.
func TestSavepointDamaged(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	sp := spStorage(t, e)
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(raceScale(3000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(500))
	hs, err := r.st.s.Savepoint(ctx, sp, SavepointNative, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	man, err := checkpoint.ReadManifest(ctx, sp, hs.Owner, 1)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{checkpoint.ManifestName(hs.Owner, 1)}
	for _, o := range man.Objects {
		names = append(names, o.Name)
	}
	for _, name := range names {
		path := filepath.Join(e.root, "savepoints", filepath.FromSlash(name))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		orig := append([]byte(nil), b...)
		b[len(b)/2] ^= 0x40
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if p, err := e.restoreFrom(sp, nil, NoClaim, hs); !errors.Is(err, ErrCorruption) {
			if p != nil {
				p.st.s.Close()
			}
			t.Fatalf("restore with %s damaged: %v, want ErrCorruption", name, err)
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A table of the Store's checkpoint damaged while the savepoint copies it.
	d := &damagingStorage{Storage: e.st}
	r.st.s.opts.Checkpoint.Storage = d
	d.on.Store(true)
	if _, err := r.st.s.Savepoint(ctx, sp, SavepointNative, 2, nil); !errors.Is(err, ErrCorruption) {
		t.Fatalf("savepoint of a damaged checkpoint: %v, want ErrCorruption", err)
	}
	d.on.Store(false)
	if _, err := LoadCheckpoint(ctx, sp, hs.Owner, 2); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Fatalf("savepoint 2 after a damaged copy: %v, want none", err)
	}
	// The first savepoint still restores.
	p, err := e.restoreFrom(sp, nil, NoClaim, hs)
	if err != nil {
		t.Fatal(err)
	}
	p.st.s.Close()
}

// damagingStorage flips a bit of every ranged read while on.
type damagingStorage struct {
	checkpoint.Storage
	on atomic.Bool
}

func (d *damagingStorage) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	b, err := d.Storage.GetRange(ctx, name, off, length)
	if err == nil && d.on.Load() && len(b) > 0 {
		b = append([]byte(nil), b...)
		b[len(b)/2] ^= 1
	}
	return b, err
}

// crashingStorage fails every write after the first n.
type crashingStorage struct {
	checkpoint.Storage
	n atomic.Int64
}

var errCrash = errors.New("test: crash")

func (c *crashingStorage) write() error {
	if c.n.Add(-1) < 0 {
		return errCrash
	}
	return nil
}

func (c *crashingStorage) Put(ctx context.Context, name string, data []byte) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Storage.Put(ctx, name, data)
}

func (c *crashingStorage) PutReader(ctx context.Context, name string, r io.Reader, size int64) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Storage.PutReader(ctx, name, r, size)
}

func (c *crashingStorage) Create(ctx context.Context, name string, data []byte) error {
	if err := c.write(); err != nil {
		return err
	}
	return c.Storage.Create(ctx, name, data)
}

// TestSavepointCrash: a savepoint cut short at any of its writes leaves no savepoint that
// restores, and the Store's checkpoints and state are untouched: its last completed
// checkpoint restores, and a later savepoint of the same Store succeeds.
func TestSavepointCrash(t *testing.T) {
	ctx := context.Background()
	e := newCkEnv(t, vfs.Default(), t.TempDir(), 128)
	sp := spStorage(t, e)
	r := e.open(nil)
	defer r.st.s.Close()
	r.writes(raceScale(3000))
	if err := r.pushDown(0); err != nil {
		t.Fatal(err)
	}
	r.writes(raceScale(500))
	h1, err := r.st.s.Checkpoint(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.st.s.NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	m1 := r.m.clone()
	id := uint64(2)
	for n := int64(0); ; n++ {
		c := &crashingStorage{Storage: sp}
		c.n.Store(n)
		h, err := r.st.s.Savepoint(ctx, c, SavepointNative, id, nil)
		if err == nil {
			if n == 0 {
				t.Fatal("a savepoint with no write succeeded")
			}
			p, err := e.restoreFrom(sp, nil, NoClaim, h)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.st.checkAll(r.m); err != nil {
				t.Fatalf("savepoint after %d failed attempts: %v", n, err)
			}
			p.st.s.Close()
			t.Logf("savepoint complete after %d crashed attempts", n)
			break
		}
		if !errors.Is(err, errCrash) {
			t.Fatalf("crash after %d writes: %v", n, err)
		}
		if _, err := LoadCheckpoint(ctx, sp, SavepointOwner(h1.Owner), id); !errors.Is(err, checkpoint.ErrNotFound) {
			t.Fatalf("crash after %d writes left savepoint %d: %v", n, id, err)
		}
		if n > 100 {
			t.Fatal("savepoint never completes")
		}
		id++
	}
	if err := r.st.s.WaitCheckpointGC(); err != nil {
		t.Fatal(err)
	}
	p, err := e.restoreFrom(e.st, nil, NoClaim, h1)
	if err != nil {
		t.Fatal(err)
	}
	defer p.st.s.Close()
	if err := p.st.checkAll(m1); err != nil {
		t.Fatalf("checkpoint 1 after the crashed savepoints: %v", err)
	}
}
