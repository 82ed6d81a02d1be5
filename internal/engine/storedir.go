package engine

import (
	"path/filepath"

	"github.com/strata-db/strata/internal/vfs"
)

// The files of a Store's directory the root's Open and Restore look at beside the tiers': the
// RESTORING marker and the writer file (writerfile.go). The engine owns every file of the
// directory (DESIGN §4a); the root names them and their file system through these.

// FS is the file system a Store's directory goes through (internal/vfs's FS: the operating
// system's, or a test's in-memory or fault-injecting one).
type FS = vfs.FS

// DefaultFS returns the operating system's file system.
func DefaultFS() FS { return vfs.Default() }

// RestoringMarker is the file Restore keeps in its directory until the restored state is
// persisted (and, for a lazy restore, every table is local): Open refuses a directory holding
// it (the root's ErrRestoreIncomplete). Empty.
const RestoringMarker = "RESTORING"

// MarkRestoring creates dir and its durable RESTORING marker (Restore, before anything else).
// Errors: the file system's.
func MarkRestoring(fsys FS, dir string) error {
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := fsys.Create(filepath.Join(dir, RestoringMarker))
	if err != nil {
		return err
	}
	if err := vfs.SyncClose(f, nil); err != nil {
		return err
	}
	return vfs.SyncDir(fsys, dir)
}

// FinishRestoring removes dir's RESTORING marker durably (the directory is complete).
// Errors: the file system's.
func FinishRestoring(fsys FS, dir string) error {
	if err := fsys.Remove(filepath.Join(dir, RestoringMarker)); err != nil {
		return err
	}
	return vfs.SyncDir(fsys, dir)
}

// RemoveRestored removes what a failed Restore wrote under dir (dir/lsm and its files, timer
// files, the writer file, the RESTORING marker last), best effort: what it cannot remove, the
// marker still names as incomplete.
func RemoveRestored(fsys interface {
	List(string) ([]string, error)
	Remove(string) error
}, dir string) {
	defer fsys.Remove(filepath.Join(dir, RestoringMarker))
	fsys.Remove(filepath.Join(dir, WriterFileName))
	names, _ := fsys.List(dir)
	for _, n := range names {
		if ValidTimerFile(n) {
			fsys.Remove(filepath.Join(dir, n))
		}
	}
	for _, sub := range []string{"lsm", "checkpoint-tmp"} {
		p := dir + "/" + sub
		names, _ := fsys.List(p)
		for _, n := range names {
			fsys.Remove(p + "/" + n)
		}
		fsys.Remove(p)
	}
}
