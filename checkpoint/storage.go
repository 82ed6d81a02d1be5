package checkpoint

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/strata-db/strata/internal/vfs"
)

// Storage holds a checkpoint's objects: immutable, uniquely named byte strings (doc.go,
// "Storage protocol"). It is the interface an object store (S3, GCS, Azure Blob) implements
// without change; DirStorage implements it over a local directory.
//
// Names are validated by ValidateName; every method returns a *NameError (ErrInvalidName) for a
// bad one before doing anything. Every method takes a context first and returns ctx.Err()
// (wrapped) once it notices the context is done; an operation cut short by the context leaves
// each object either absent or complete, as a crash does.
//
// Consistency promised by every implementation (what S3 has promised since December 2020):
//
//   - Atomic objects: a reader sees an object either absent or with all of its bytes, never a
//     part; so does a crash at any point of a Put, PutReader or Create.
//   - Read-after-write: once Put, PutReader or Create returned nil, Get, GetRange and List in
//     any process see the object, and it survives a crash of the writer (it is durable).
//   - Delete-then-read: once Delete returned nil, Get reports ErrNotFound.
//   - List may be eventually consistent on some object stores (S3 before 2020, other
//     S3-compatible stores today): a List may miss an object a Put just wrote, or still show
//     one a Delete just removed. Garbage collection is designed for that (doc.go, "Garbage
//     collection"): it never deletes because an object is missing from a List, only what a
//     List shows and no retained manifest reaches, and only after a grace period.
//
// Implementations are safe for concurrent use by multiple goroutines. Package
// checkpoint/storagetest checks an implementation against this contract (DirStorage and
// checkpoint/s3 run it).
type Storage interface {
	// Put stores data as the object name. Objects are immutable and names are never reused
	// (invariant 1 in doc.go), so Put is called once per name; should it be called again, the
	// object is replaced atomically (last writer wins, as an S3 PUT). The caller may reuse
	// data once Put returns.
	Put(ctx context.Context, name string, data []byte) error

	// PutReader stores exactly size bytes read from r as the object name, with Put's
	// semantics, without holding the whole object in memory. If r ends before size bytes the
	// object is not stored and the error wraps io.ErrUnexpectedEOF; bytes after size are not
	// read.
	PutReader(ctx context.Context, name string, r io.Reader, size int64) error

	// Create stores data as the object name only if no object of that name exists, atomically:
	// of any number of concurrent Creates of one name, in any processes, exactly one succeeds
	// and the others fail with an error wrapping ErrExists, as an S3 PUT with
	// "If-None-Match: *" (conditional writes, 2024). It is the commit primitive: a manifest is
	// written with Create, so a checkpoint id is committed at most once and a zombie writer
	// that lost the race is fenced (doc.go, invariant 2).
	Create(ctx context.Context, name string, data []byte) error

	// Get returns the whole object. Errors: ErrNotFound.
	Get(ctx context.Context, name string) ([]byte, error)

	// GetRange returns length bytes of the object starting at byte offset off (an S3 ranged
	// GET). A range not inside the object (off < 0, length < 0, off+length > size) fails with
	// ErrRange. Errors: ErrNotFound, ErrRange.
	GetRange(ctx context.Context, name string, off, length int64) ([]byte, error)

	// List returns every object whose name begins with prefix (a plain string prefix, as S3's
	// ListObjectsV2; "" lists everything), sorted by name in byte order. Objects being written
	// (temporaries, uploads in progress) are never listed. See the type's comment for its
	// consistency. Errors: ErrInvalidName for a prefix no valid name can begin with.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)

	// Delete removes the object. It is idempotent: deleting a missing object succeeds (as S3's
	// DELETE), so a garbage collector cut short by a crash simply runs again.
	Delete(ctx context.Context, name string) error
}

// ObjectInfo describes one object in a List result.
type ObjectInfo struct {
	// Name is the object's full name.
	Name string
	// Size is its length in bytes.
	Size int64
	// Created is when the object was stored, or a later time — never an earlier one, so an age
	// computed from it is at most the true age and a grace period errs on the side of keeping
	// (S3: LastModified; DirStorage: the later of the file's modification and status-change
	// times). The zero time means unknown (MemFS keeps no times); GC then treats the object as
	// young unless its grace period is zero.
	Created time.Time
}

// Cleaner is implemented by a Storage that can leave temporaries behind after a crash
// (DirStorage). GC calls Cleanup on the owner's prefix with its grace period; object stores,
// whose unfinished uploads are invisible and expire by a lifecycle rule, need not implement it.
type Cleaner interface {
	// Cleanup removes the temporaries under prefix (a name prefix, as for List) whose age at
	// now is at least minAge and which no Put of this storage is still writing, and returns how
	// many it removed. A temporary of unknown age is removed only when minAge <= 0.
	Cleanup(ctx context.Context, prefix string, now time.Time, minAge time.Duration) (int, error)
}

// linkFS is implemented by a vfs.FS that wraps another (the engine's LazyFS): LinkFS returns
// the file system that holds path's bytes as a plain file, if one does, so that putFile can
// hard-link it into a DirStorage on that file system; otherwise putFile reads path through the
// wrapper.
type linkFS interface {
	LinkFS(path string) (vfs.FS, bool)
}

// putFile stores the file at path on fsys as the object name, with Put's semantics. When s is
// a *DirStorage on the same file system, the object is a hard link to the file rather than a
// copy (as Pebble's Checkpoint links its immutable sstables), falling back to a copy where the
// link is refused (EXDEV across devices, EPERM); otherwise the file is streamed through
// s.PutReader. Either way the object is complete and durable when putFile returns (a linked
// file is fsynced first). The file must not change afterwards: a linked object shares its
// bytes. Errors: those of fsys (fs.ErrNotExist for a missing file) and of s.
func putFile(ctx context.Context, s Storage, name string, fsys vfs.FS, path string) error {
	if w, ok := fsys.(linkFS); ok {
		if inner, ok := w.LinkFS(path); ok {
			fsys = inner
		}
	}
	if d, ok := s.(*DirStorage); ok {
		return d.putFile(ctx, name, fsys, path)
	}
	if err := ValidateName(name); err != nil {
		return err
	}
	f, err := fsys.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := s.PutReader(ctx, name, io.NewSectionReader(f, 0, fi.Size()), fi.Size()); err != nil {
		return fmt.Errorf("checkpoint: put %s from %s: %w", name, path, err)
	}
	return nil
}

// PutFile stores the file at path on the operating system's file system as the object name,
// with Put's semantics: hard-linked when s is a *DirStorage on the same device (as Pebble's
// Checkpoint links its immutable sstables), falling back to a copy where the link is refused
// (EXDEV, EPERM), streamed through s.PutReader otherwise. The object is complete and durable
// when PutFile returns; the file must not change afterwards, as a linked object shares its
// bytes. Errors: fs.ErrNotExist for a missing file, the file system's and s's errors.
func PutFile(ctx context.Context, s Storage, name, path string) error {
	return putFile(ctx, s, name, vfs.Default(), path)
}
