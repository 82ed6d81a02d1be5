package engine

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm"
)

// Restore with rescaling (doc.go, "Checkpoints").
//
// A restore builds a new LsmStore directory from the table objects of one or more checkpoints
// and lets Open recover it: no entry is read or rewritten. Each source's tables are fetched
// once (a hard link from a local checkpoint directory, a ranged copy otherwise) and imported
// at the level they held, the memory table as the newest L0 file of its source, each CLIPPED
// to the order hashes of the key groups it may answer for: its own recorded range ∩ its
// checkpoint's key groups ∩ the new Store's. The clip is the table's range in the LsmStore's
// version (lsm "Import"), so reads never see entries outside it and compactions drop them —
// scale-out (one source, a sub-range) and scale-in (several sources, disjoint ranges) are the
// same operation. Sources must not overlap inside the new range (the caller checks): two
// tables of one level from two sources would then overlap, and which one is newer is unknown.

// restoreResult describes a restore.
type restoreResult struct {
	// Tables maps the LSM file numbers the restore created to the objects they came from, as
	// clipped: the base of the first incremental checkpoint after the restore
	// (SetCheckpointBase).
	Tables map[uint64]checkpoint.Object
	// Bytes is the size of the imported objects; Linked of them were hard links, Copied copies.
	Bytes          int64
	Linked, Copied int
	// Skipped counts the table objects outside the new key-group range.
	Skipped int
}

// restoreLazy is restore that does not wait for the tables' bytes (doc.go, "Lazy restore"):
// each table object is hard-linked without its CRC32C check (a DirStorage on fsys) or not
// fetched at all, and registered with the returned LazyFS, through which lsm.Import reads the
// tables' footers and indexes and through which the restored engine must be opened
// (Options.FS); Engine.StartPrefetch then makes the files local. Errors: as restore's, but a
// table's CRC32C is not checked here (a mismatch is found by the prefetch).
func restoreLazy(ctx context.Context, fsys vfs.FS, dir string, maxParallelism int, kg checkpoint.KeyGroupRange,
	s checkpoint.Storage, sources []*checkpoint.Manifest, meta []byte) (restoreResult, *LazyFS, error) {
	l := newLazyFS(fsys, s, filepath.Join(dir, "lsm"))
	res, err := restore(ctx, fsys, dir, maxParallelism, kg, s, sources, meta, l)
	if err != nil {
		return res, nil, err
	}
	return res, l, nil
}

// restore writes dir/lsm (which must not hold an LsmStore) from the table objects of sources,
// stored in s, clipped to the key groups kg of maxParallelism, with meta as the persist point's
// metadata (the restored state registry) and the largest LastSeq of the sources, lazily when l
// is not nil (restoreLazy); Open(dir) then recovers the state (Restore, step 4 of doc.go's
// "The restore sequence"). On error the files written are removed; a crash may leave dir/lsm
// without CURRENT, which the RESTORING marker keeps Open from (invariant 26).
//
// Errors: ErrCorruption (a *base.CorruptionError naming the object) for an object whose size
// or checksum differs from its manifest, checkpoint.ErrNotFound for a missing one, ctx's, the
// storage's and fsys's errors, lsm.Import's.
func restore(ctx context.Context, fsys vfs.FS, dir string, maxParallelism int, kg checkpoint.KeyGroupRange,
	s checkpoint.Storage, sources []*checkpoint.Manifest, meta []byte, l *LazyFS) (res restoreResult, err error) {
	lsmDir := filepath.Join(dir, "lsm")
	if err := fsys.MkdirAll(lsmDir, 0o755); err != nil {
		return res, lowerError(err)
	}
	if err := syncParents(fsys, lsmDir); err != nil {
		return res, lowerError(err)
	}
	var made []string
	defer func() {
		if err != nil {
			for _, p := range made {
				fsys.Remove(p)
			}
		}
	}()
	stride := base.Stride(maxParallelism)
	slo, shi := OrderRange(stride, kg)
	res.Tables = map[uint64]checkpoint.Object{}
	var tables []lsm.ImportTable
	var lastSeq uint64
	num := uint64(1)
	for _, m := range sources {
		if int(m.MaxParallelism) != maxParallelism {
			return res, fmt.Errorf("strata: restore: checkpoint %d has max parallelism %d, not %d", m.ID, m.MaxParallelism, maxParallelism)
		}
		mlo, mhi := OrderRange(stride, m.KeyGroups)
		lastSeq = max(lastSeq, m.LastSeq)
		for _, o := range m.Objects {
			if o.Kind != checkpoint.KindTable {
				continue
			}
			lo, hi := max(o.MinOrder, mlo, slo), min(o.MaxOrder, mhi, shi)
			if lo > hi {
				res.Skipped++
				continue
			}
			path := lsm.TablePath(lsmDir, num)
			var linked bool
			if l != nil {
				linked, err = checkpointfs.LinkFile(ctx, s, o, fsys, path)
				if err == nil {
					l.add(path, o, linked)
				}
			} else {
				linked, err = checkpointfs.GetFile(ctx, s, o, fsys, path)
			}
			if err != nil {
				return res, fmt.Errorf("strata: restore of checkpoint %d: %w", m.ID, err)
			}
			made = append(made, path)
			if linked {
				res.Linked++
			} else {
				res.Copied++
			}
			res.Bytes += o.Size
			tables = append(tables, lsm.ImportTable{Num: num, Level: int(o.Level), MinOrder: lo, MaxOrder: hi})
			o.MinOrder, o.MaxOrder = lo, hi
			o.KeyGroups = kgOfOrders(stride, lo, hi, kg)
			res.Tables[num] = o
			num++
		}
	}
	if err := vfs.SyncDir(fsys, lsmDir); err != nil {
		return res, lowerError(err)
	}
	ifs := fsys
	if l != nil {
		if err := l.warm(ctx); err != nil {
			return res, err
		}
		ifs = l
	}
	if err := lsm.Import(lsm.Options{FS: ifs, Dir: lsmDir, Name: "lsm"}, tables, lastSeq, meta); err != nil {
		return res, lowerError(err)
	}
	return res, nil
}
