// Package vfs is the file-system interface every Strata file goes through: the operating system
// for production (Default), an in-memory file system that knows what was synced (MemFS), and a
// wrapper that injects errors and crashes (FaultFS). The LSM tier, the changelog and checkpoint
// storage open files only through FS, so that every one of their failure paths can be driven
// from a test. The design follows Pebble's vfs.MemFS (strict mode) and vfs/errorfs; the code is
// our own.
//
// # Terms
//
//   - Node: a file or directory itself (an inode). A directory entry maps a name to a node;
//     Rename moves an entry, Link adds a second entry for the same node.
//   - Synced contents: the bytes a file had at its last successful File.Sync.
//   - Synced entries: the name→node map a directory had at its last successful File.Sync on a
//     handle of that directory (FS.OpenDir, or FS.Open of the directory).
//   - Crash clone: what a power loss or a killed process leaves, as MemFS.CrashClone builds it.
//   - Write operation: one that changes what a crash keeps (WriteOps): Create, Remove, Rename,
//     Link, MkdirAll, File.Write, File.Sync.
//
// # What MemFS keeps per node
//
//	file node                              directory node
//	+--------+---------------------------+  +----------------+---------------------------+
//	| data   | live bytes (reads see     |  | children       | live entries, name → node |
//	|        | these)                    |  |                | (List and lookups)        |
//	| synced | bytes at the last Sync    |  | syncedChildren | entries at the last Sync  |
//	| stale  | a byte below len(synced)  |  +----------------+---------------------------+
//	|        | changed since then        |
//	+--------+---------------------------+
//
//	Sync(file): synced = data          (append-only: copies only data[len(synced):])
//	Sync(dir):  syncedChildren = children (the map, not the children's contents)
//
//	CrashClone:  root ──syncedChildren──► dir ──syncedChildren──► file: data = synced
//	             (anything reachable only through live entries is gone)
//
// # Invariants
//
//  1. A file's contents are durable only up to its last successful File.Sync, on any handle of
//     that file. Write, Close and a Sync of the parent directory make no bytes durable.
//  2. A directory entry — the name a Create, MkdirAll, Rename or Link made, or the absence a
//     Remove or Rename left — is durable only once the directory holding it is synced after the
//     change. A file Sync does not make its name durable, and a directory Sync does not make its
//     files' contents durable. A Rename across directories needs both directories synced; until
//     both are, a crash may keep the file under neither, either or both names (each side
//     follows its own directory). Hence the protocol for metadata: write a new file, Sync it,
//     Rename it over the old name, Sync the directory.
//  3. A crash clone holds, starting from the root "/" (which always survives), for every
//     directory its synced entries and for every file reached through them its synced contents;
//     nothing else. An unsynced removal or rename is undone: the old name comes back, with the
//     file's synced contents.
//  4. Synced contents belong to the node, not the name: write, Sync, Rename, directory Sync keeps
//     the bytes under the new name; two names linked to one node stay one node in the clone.
//     Create of an existing file truncates that node in place (O_TRUNC), so until the file is
//     synced again a crash clone shows the old synced bytes.
//  5. Everything in a crash clone is synced: CrashClone of a clone equals the clone. The
//     original MemFS and its open handles are unchanged by CrashClone.
//  6. Open handles of a removed or renamed file keep reading and writing the node, as after
//     unlink(2) on the operating system; such writes are lost by a crash unless the node is
//     still reachable through synced entries.
//  7. Error identity: every error from Default and MemFS is an *fs.PathError, or an
//     *os.LinkError for Rename and Link, wrapping the syscall.Errno that Linux returns (table
//     under Errors below), so errors.Is gives the same answer for both.
//  8. An error injected by FaultFS is an *fs.PathError (an *os.LinkError for Rename and Link)
//     whose Op is the Op's name and whose Err is an *InjectedError wrapping the chosen cause, so
//     errors.Is(err, ErrInjected) and errors.Is(err, cause) both hold — for example
//     errors.Is(err, syscall.ENOSPC). The failed operation does not reach the inner FS, with two
//     exceptions: a short write first writes exactly len(p)/2 bytes, and Close always closes the
//     inner file.
//  9. A failed Sync leaves the file's durable contents unknown; callers must not retry Sync and
//     trust the result (on Linux a failed fsync may drop the dirty pages and report success the
//     next time). They abandon the file and rewrite its contents into a new one. FaultFS models
//     the failure as "nothing became durable".
//  10. FaultFS counts every attempted operation, failed and injected ones included (Count).
//     Fault.Nth counts the operations that match the fault's Ops and Path since Inject; CrashAt(n)
//     counts WriteOps since CrashAt. Once crashed, every operation except Close fails with
//     ErrCrashed and nothing more reaches the inner FS, so the inner MemFS's CrashClone is the
//     state at the crash point.
//  11. Every FS and File here is safe for concurrent use by multiple goroutines. MemFS takes one
//     lock per operation, so its operations are linearizable; ReadAt, Stat and List share it.
//  12. Lock is an exclusive, non-blocking advisory lock on a file, held by the returned Closer:
//     a second Lock of the same file while it is held fails at once with syscall.EWOULDBLOCK
//     (Default: flock(2) LOCK_EX|LOCK_NB, so across processes and across descriptors of one
//     process; MemFS: an in-process table of locked nodes, so across users of one MemFS). The
//     lock is process state, not disk state: a killed process holds none, CrashClone holds
//     none, and FaultFS passes Lock through as OpLock (not a WriteOp) and always releases the
//     inner lock on Close. Stores lock their directory's LOCK file so that two Stores, in one
//     process or two, never share a directory.
//
// # Errors
//
// The causes both Default and MemFS report (invariant 7):
//
//	missing file or parent                    ENOENT     errors.Is(err, fs.ErrNotExist)
//	a path component is a file                ENOTDIR
//	Create of a directory, Read of one        EISDIR
//	Remove of a non-empty directory           ENOTEMPTY
//	Rename onto a directory, Link onto a name EEXIST     errors.Is(err, fs.ErrExist)
//	Link of a directory                       EPERM      errors.Is(err, fs.ErrPermission)
//	Write on a handle from Open or OpenDir    EBADF
//	Lock of a file another Lock holds         EWOULDBLOCK (= EAGAIN on Linux and Darwin)
//	any call on a closed File                 fs.ErrClosed
//
// FaultFS adds ErrInjected and ErrCrashed (errors.go), and whatever cause a Fault names.
//
// # What is not modelled
//
// MemFS keeps exactly the synced state; real disks may keep more (some unsynced writes, in
// any order, and torn sectors). Code that is correct under CrashClone may therefore still see,
// after a real crash, a file longer than its last Sync with garbage or zeros in the tail — which
// is why every record carries a CRC32C and readers stop at the first bad one. Timestamps,
// permissions beyond the mode bits, symbolic links and disk space are not modelled; file locks
// (Lock) are modelled only as exclusion within one MemFS.
package vfs
