package vfs

import (
	"io"
	"io/fs"
	"os"
	"syscall"
)

// File is an open file or directory of an FS.
//
// Files are written by appending: Write writes at the handle's offset, which starts at 0 after
// FS.Create and only moves forward. There is no WriteAt or Truncate on purpose; Strata never
// rewrites bytes in place (a torn tail is detected by the record CRCs and the file is replaced,
// not repaired) and metadata is replaced by write, Sync, Rename, directory Sync.
//
// Errors are *fs.PathError values wrapping a syscall.Errno (fs.ErrClosed after Close), as from
// *os.File; see invariant 7 in doc.go. Every implementation in this package is safe for
// concurrent use; concurrent Read calls on one handle share its offset in an unspecified order,
// whereas ReadAt does not touch the offset.
type File interface {
	// Read reads up to len(p) bytes at the handle's offset and advances it; io.EOF at the end.
	// On a directory handle it fails with syscall.EISDIR.
	io.Reader
	// ReadAt reads len(p) bytes at byte offset off without moving the offset; a short read
	// returns io.EOF, as io.ReaderAt requires.
	io.ReaderAt
	// Write appends p at the handle's offset and advances it. A short write (n < len(p))
	// always comes with an error. Handles from FS.Open and FS.OpenDir are read-only and fail
	// with syscall.EBADF. Written bytes are not durable until Sync.
	io.Writer
	// Close releases the handle. It does not sync: bytes written but not synced are still
	// lost by a crash after a successful Close. A second Close returns fs.ErrClosed.
	io.Closer
	// Sync makes the file's current contents durable (fsync(2)); on a directory handle it
	// makes the directory's current entries durable. See invariants 1 and 2 in doc.go. After
	// a failed Sync the file's durable contents are unknown (invariant 9).
	Sync() error
	// Stat describes the open file; Size is in bytes and includes unsynced writes.
	Stat() (fs.FileInfo, error)
}

// FS is the file-system interface every Strata file goes through, so that tests can swap the
// operating system for MemFS and inject faults with FaultFS.
//
// Names are slash-separated paths as for package os (filepath.Join builds them). Every error is
// an *fs.PathError, or an *os.LinkError for Rename and Link, wrapping the syscall.Errno the
// operating system returns (invariant 7 in doc.go), so errors.Is(err, fs.ErrNotExist) and
// errors.Is(err, syscall.ENOSPC) mean the same for every implementation. Implementations are
// safe for concurrent use by multiple goroutines.
type FS interface {
	// Create creates the named file, or truncates it if it exists (os.Create's O_TRUNC on the
	// same file), and opens it for reading and appending. The new name is durable only once
	// its parent directory is synced (invariant 2). Errors: syscall.ENOENT if the parent is
	// missing, syscall.EISDIR if name is a directory.
	Create(name string) (File, error)
	// Open opens the named file for reading. Errors: syscall.ENOENT (fs.ErrNotExist).
	Open(name string) (File, error)
	// OpenDir opens the named directory so that File.Sync can make its entries durable.
	// Errors: syscall.ENOENT, syscall.ENOTDIR if name is not a directory.
	OpenDir(name string) (File, error)
	// Remove removes the named file or empty directory. The removal is durable only once
	// the parent directory is synced. Errors: syscall.ENOENT, syscall.ENOTEMPTY.
	Remove(name string) error
	// Rename renames oldname to newname atomically, replacing newname if it is a file.
	// Both entries change durably only once both parent directories are synced.
	// Errors (in *os.LinkError): syscall.ENOENT, syscall.EEXIST if newname is a directory
	// (as os.Rename refuses to replace a directory on every platform).
	Rename(oldname, newname string) error
	// Link creates newname as a hard link to the file oldname: both names then share one
	// contents, which is how checkpoints share immutable files. The new entry is durable
	// only once newname's parent directory is synced. Errors (in *os.LinkError):
	// syscall.ENOENT, syscall.EEXIST if newname exists, syscall.EPERM if oldname is a
	// directory.
	Link(oldname, newname string) error
	// MkdirAll creates the directory dir and any missing parents with permission bits perm
	// (before umask); existing directories are fine. Each new directory is durable only once
	// its own parent is synced. Errors: syscall.ENOTDIR if a path component is a file.
	MkdirAll(dir string, perm fs.FileMode) error
	// List returns the names of the entries of directory dir, sorted, without "." and "..".
	// Errors: syscall.ENOENT, syscall.ENOTDIR.
	List(dir string) ([]string, error)
	// Stat describes the named file or directory. Errors: syscall.ENOENT, syscall.ENOTDIR.
	Stat(name string) (fs.FileInfo, error)
	// Lock takes an exclusive, non-blocking lock on the named file, creating it (empty) if it
	// is missing and never truncating it, and holds it until the returned Close (invariant 12
	// in doc.go). While it is held, another Lock of the same file fails at once with
	// syscall.EWOULDBLOCK: from any process for Default (flock(2) LOCK_EX|LOCK_NB), from the
	// same MemFS for MemFS. A process that dies releases its locks; a crash clone holds none.
	// Lock makes nothing durable and the lock file's name is not synced: it is a guard, not
	// data. Errors: syscall.EWOULDBLOCK (errors.Is(err, syscall.EAGAIN) too on Linux),
	// syscall.ENOENT if the parent is missing, syscall.EISDIR if name is a directory.
	Lock(name string) (io.Closer, error)
}

// Default returns the operating system's file system: package os, with File.Sync being
// fsync(2) (F_FULLFSYNC on Darwin, as *os.File.Sync does) and directory sync an fsync of the
// directory opened with OpenDir. The returned FS is stateless and safe for concurrent use.
func Default() FS { return osFS{} }

type osFS struct{}

// The *os.File values returned satisfy File directly; the helpers below only avoid handing out
// a typed nil inside a non-nil interface on error.

func (osFS) Create(name string) (File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) Open(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

func (osFS) OpenDir(name string) (File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.IsDir() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	return f, nil
}

func (osFS) Remove(name string) error                    { return os.Remove(name) }
func (osFS) Rename(oldname, newname string) error        { return os.Rename(oldname, newname) }
func (osFS) Link(oldname, newname string) error          { return os.Link(oldname, newname) }
func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }
func (osFS) Stat(name string) (fs.FileInfo, error)       { return os.Stat(name) }

func (osFS) List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

// Compile-time checks that the implementations satisfy the interfaces.
var (
	_ FS   = osFS{}
	_ FS   = (*MemFS)(nil)
	_ FS   = (*FaultFS)(nil)
	_ File = (*os.File)(nil)
	_ File = (*memFile)(nil)
	_ File = (*faultFile)(nil)
)
