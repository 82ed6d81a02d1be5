package lsm

import (
	"errors"
	"io/fs"
	"sync"
	"syscall"

	"github.com/strata-db/strata/internal/vfs"
)

// The table cache (doc.go, "Table cache") bounds the file descriptors the
// DB's table readers hold: a table's sstable.Reader keeps its index and
// filter on the Go heap for as long as a version holds the table, but reads
// its blocks through a tableHandle, which opens the file only when a read
// needs it and leaves it open, least recently used first out, while at most
// Options.MaxOpenFiles handles are open. This is the role of RocksDB's
// max_open_files and Pebble's table cache, cut down to what a Reader that
// keeps its metadata in memory needs: only the descriptor is cached.

// tableCache is the LRU of a DB's open table files. Safe for concurrent use:
// every method takes mu, held for list and counter updates and for the
// Close of an evicted file, never across a read.
type tableCache struct {
	fsys vfs.FS // the DB's file system (fdFS)
	max  int    // open handles above which idle ones are closed (>= 1)

	mu   sync.Mutex
	open int         // handles with an open file (idle or in use)
	lru  tableHandle // sentinel of the open handles, most recently used at next
	// Counters (Metrics): reads that found their file open, those that
	// opened it, and the times the process ran out of descriptors (shed).
	hits, misses, sheds int64
}

// newTableCache returns an empty cache of max files; fs sets the file system it opens tables
// with.
func newTableCache(max int) *tableCache {
	c := &tableCache{max: max}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// fs makes inner, through an fdFS that sheds the cache's idle files when the process runs out
// of descriptors, the file system of the cache and of its DB, and returns it.
func (c *tableCache) fs(inner vfs.FS) vfs.FS {
	c.fsys = fdFS{FS: inner, c: c}
	return c.fsys
}

// fdFS is the file system a DB works through: Options.FS, except that a Create, Open or
// OpenDir refused for want of file descriptors (EMFILE, ENFILE) closes the table cache's idle
// files and is tried once more. So the tables' cached descriptors never starve the DB's own
// writes (a flush, a compaction output, the manifest) when the process limit is lower than
// MaxOpenFiles — after a setrlimit, or with other users of descriptors in the process.
type fdFS struct {
	vfs.FS
	c *tableCache
}

// outOfFDs reports whether err means that the process (EMFILE) or the system (ENFILE) has no
// file descriptor left.
func outOfFDs(err error) bool {
	return err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE))
}

// shed closes every idle open table file.
func (c *tableCache) shed() {
	c.mu.Lock()
	c.evictIdle(0)
	c.sheds++
	c.mu.Unlock()
}

func (f fdFS) Create(name string) (vfs.File, error) {
	file, err := f.FS.Create(name)
	if outOfFDs(err) {
		f.c.shed()
		file, err = f.FS.Create(name)
	}
	return file, err
}

func (f fdFS) Open(name string) (vfs.File, error) {
	file, err := f.FS.Open(name)
	if outOfFDs(err) {
		f.c.shed()
		file, err = f.FS.Open(name)
	}
	return file, err
}

func (f fdFS) OpenDir(name string) (vfs.File, error) {
	file, err := f.FS.OpenDir(name)
	if outOfFDs(err) {
		f.c.shed()
		file, err = f.FS.OpenDir(name)
	}
	return file, err
}

// tableHandle is the vfs.File a table's sstable.Reader reads through: ReadAt
// and Stat borrow the file from the cache (opening it if it was closed to
// stay under MaxOpenFiles) and give it back. Reference counts: refs counts
// the calls in flight, and a file is closed — by eviction or by Close — only
// when refs is 0, so a read never sees its file closed under it.
type tableHandle struct {
	c    *tableCache
	name string

	// Under c.mu.
	f          vfs.File // nil while closed
	refs       int      // ReadAt and Stat calls in flight
	closed     bool     // Close was called: no more reads
	prev, next *tableHandle
}

// openHandle opens name now and returns its handle, open and most recently
// used. Errors are the FS's (fs.ErrNotExist for a missing file).
func (c *tableCache) openHandle(name string) (*tableHandle, error) {
	f, err := c.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	h := &tableHandle{c: c, name: name}
	c.mu.Lock()
	c.misses++
	c.insert(h, f)
	c.evict()
	c.mu.Unlock()
	return h, nil
}

// insert links h, just opened with f, at the front. Under mu.
func (c *tableCache) insert(h *tableHandle, f vfs.File) {
	h.f = f
	c.open++
	h.prev, h.next = &c.lru, c.lru.next
	h.prev.next, h.next.prev = h, h
}

// unlink removes h from the list and closes its file. Under mu.
func (c *tableCache) unlink(h *tableHandle) error {
	h.prev.next, h.next.prev = h.next, h.prev
	h.prev, h.next = nil, nil
	err := h.f.Close()
	h.f = nil
	c.open--
	return err
}

// evict closes idle handles, least recently used first, while more than max
// are open. Handles in use stay open: the cache may exceed max for as long
// as reads hold them. Under mu.
func (c *tableCache) evict() { c.evictIdle(c.max) }

// evictIdle closes idle handles, least recently used first, until at most
// keep are open or none is idle. Under mu.
func (c *tableCache) evictIdle(keep int) {
	for h := c.lru.prev; h != &c.lru && c.open > keep; {
		prev := h.prev
		if h.refs == 0 {
			c.unlink(h) // a close error of a read-only file loses nothing
		}
		h = prev
	}
}

// acquire returns h's file, opened if needed, with a reference the caller
// gives back with release.
func (h *tableHandle) acquire() (vfs.File, error) {
	c := h.c
	c.mu.Lock()
	if h.closed {
		c.mu.Unlock()
		return nil, &fs.PathError{Op: "read", Path: h.name, Err: fs.ErrClosed}
	}
	h.refs++
	if f := h.f; f != nil {
		c.hits++
		if c.lru.next != h { // move to the front
			h.prev.next, h.next.prev = h.next, h.prev
			h.prev, h.next = &c.lru, c.lru.next
			h.prev.next, h.next.prev = h, h
		}
		c.mu.Unlock()
		return f, nil
	}
	c.misses++
	c.mu.Unlock()
	// Opened outside the lock (a syscall); a concurrent acquire of the same
	// handle may open it too, and the later one closes its copy.
	f, err := c.fsys.Open(h.name) // fdFS: sheds idle files on EMFILE
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		h.refs--
		h.closeIfDone()
		return nil, err
	}
	if h.f != nil {
		f.Close()
		return h.f, nil
	}
	c.insert(h, f)
	c.evict()
	return f, nil
}

// release gives back a reference from acquire.
func (h *tableHandle) release() {
	c := h.c
	c.mu.Lock()
	h.refs--
	if h.refs == 0 {
		if !h.closeIfDone() && c.open > c.max {
			c.evict()
		}
	}
	c.mu.Unlock()
}

// closeIfDone closes h's file if Close was called and no read holds it, and
// reports whether it did. Under mu.
func (h *tableHandle) closeIfDone() bool {
	if h.closed && h.refs == 0 && h.f != nil {
		h.c.unlink(h)
		return true
	}
	return false
}

// ReadAt implements io.ReaderAt (vfs.File) for the Reader: the file is
// opened if the cache had closed it. Allocates nothing when it is open.
func (h *tableHandle) ReadAt(p []byte, off int64) (int, error) {
	f, err := h.acquire()
	if err != nil {
		return 0, err
	}
	n, err := f.ReadAt(p, off)
	h.release()
	return n, err
}

// Stat implements vfs.File.
func (h *tableHandle) Stat() (fs.FileInfo, error) {
	f, err := h.acquire()
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	h.release()
	return st, err
}

// Close ends the handle: its file is closed now, or by the last read in
// flight. Reads after it fail with fs.ErrClosed. A second Close returns nil.
func (h *tableHandle) Close() error {
	c := h.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	if h.refs == 0 && h.f != nil {
		return c.unlink(h)
	}
	return nil
}

// Read, Write and Sync are not used on tables (sstable.Reader uses ReadAt
// only); a table handle is read-only.
func (h *tableHandle) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: h.name, Err: syscall.EINVAL}
}

func (h *tableHandle) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: h.name, Err: syscall.EBADF}
}

func (h *tableHandle) Sync() error {
	return &fs.PathError{Op: "sync", Path: h.name, Err: syscall.EBADF}
}

// stats returns the number of open files and the hit and miss counts.
func (c *tableCache) stats() (open int, hits, misses int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.hits, c.misses
}

// shedCount returns how many times an open ran out of descriptors and shed the idle files.
func (c *tableCache) shedCount() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sheds
}
