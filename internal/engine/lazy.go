package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/checkpointfs"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/scheduler"
)

// Lazy restore (doc.go, "Lazy restore", invariants 19 to 23).

// The states of a lazy file (invariant 19: they only move forward).
const (
	lazyLinked int32 = iota
	lazyRemote
	lazyLocal
	lazyCorrupt
)

// DefaultPrefetchLanes is how many files a LazyFS's prefetch has in flight at most when every
// file is linked (each lane reads a local file for its CRC32C: disk and CPU bound).
const DefaultPrefetchLanes = 4

// DefaultRemotePrefetchLanes is how many files a LazyFS's prefetch has in flight at most when
// any file is remote (each lane mostly waits for the storage: an object store gives many slow
// streams; doc.go, "Lazy restore"), unless Options.RemotePrefetchLanes says otherwise.
const DefaultRemotePrefetchLanes = 16

// lazyChunk is the range the prefetch reads per GetRange call (as checkpoint's getFile).
const lazyChunk = 4 << 20

// Prefetch retry backoff (invariant 21).
const (
	lazyRetryMin = 10 * time.Millisecond
	lazyRetryMax = time.Second
)

// lazyEntry is one restored table file.
type lazyEntry struct {
	path    string
	obj     checkpoint.Object
	state   atomic.Int32
	removed atomic.Bool // the LsmStore removed its name
	promote atomic.Bool // a read promoted it (invariant 25)
	mu      sync.Mutex  // serialises Remove against the prefetch's rename
	err     error       // the corruption, set before state becomes lazyCorrupt
	meta    atomic.Pointer[lazyMeta]
}

// lazyMeta holds a remote file's first and last bytes, read by warm before lsm.Import opens
// the table: the header, and the footer with the filter and index before it — what every open
// of the table reads, twice per restore (Import, then Open) — so that opening a remote table
// costs no round trip. Dropped once the file is local.
type lazyMeta struct {
	head    []byte // bytes [0, len(head))
	tailOff int64
	tail    []byte // bytes [tailOff, size)
}

// lazyHead and lazyTail size a lazyMeta: the header is a few bytes; the filter and index
// are about 2 % of a table (10 bits of filter and a few bytes of index per 130-byte entry),
// so a tail of 1/32 of the file, at least 64 KiB, holds them for the LsmStore's tables; an
// open that reads before the tail reads the storage instead.
const (
	lazyHead    = 4 << 10
	lazyTailMin = 64 << 10
	lazyWarmers = 8 // warm's concurrent reads
)

// LazyFS is the vfs.FS of a lazily restored engine: Inner, except for the table files a
// restoreLazy registered, which it serves as lazy files until they are local (doc.go, "Lazy
// restore"). Safe for concurrent use.
type LazyFS struct {
	vfs.FS
	storage checkpoint.Storage
	dir     string // the LsmStore's directory
	lanes   int

	mu      sync.Mutex
	entries map[string]*lazyEntry // by path; only grows
	queue   []*lazyEntry          // not yet taken by the prefetch
	urgent  int                   // queue[:urgent] are promoted files, in promotion order
	pending int                   // entries neither local nor corrupt nor removed
	running int                   // prefetch lanes in flight
	done    func() error
	doneRan bool
	sched   *scheduler.Scheduler // the prefetch's, from StartPrefetch to close

	remoteReads, remoteBytes, fetched, verified, retries, corrupt, local, promoted atomic.Int64
	finished, prefetching                                                          atomic.Bool
	lastErr                                                                        atomic.Pointer[string]
}

// LazyStats describes a lazy restore's prefetch (Engine.LazyStats).
type LazyStats struct {
	// Files is the number of lazy files; Local of them are complete and verified, Corrupt
	// were found damaged on arrival (their reads fail with ErrCorruption).
	Files, Local, Corrupt int
	// RemoteReads and RemoteBytes count the reads served by ranged reads of the storage.
	RemoteReads, RemoteBytes int64
	// FetchedBytes is what the prefetch copied in; VerifiedBytes what it checked in place
	// (hard-linked files).
	FetchedBytes, VerifiedBytes int64
	// Retries counts the prefetch's retries after transient storage errors; LastError is
	// the last such error ("" for none).
	Retries   int64
	LastError string
	// Promoted counts the files moved to the head of the prefetch queue by a read that went
	// to the storage (invariant 25).
	Promoted int64
	// Done is true once every file is local and the directory is complete.
	Done bool
}

func newLazyFS(inner vfs.FS, s checkpoint.Storage, dir string) *LazyFS {
	return &LazyFS{FS: inner, storage: s, dir: dir, lanes: DefaultPrefetchLanes, entries: map[string]*lazyEntry{}}
}

func (l *LazyFS) add(path string, o checkpoint.Object, linked bool) {
	e := &lazyEntry{path: filepath.Clean(path), obj: o}
	if !linked {
		e.state.Store(lazyRemote)
	}
	l.mu.Lock()
	l.entries[e.path] = e
	l.queue = append(l.queue, e)
	l.pending++
	l.mu.Unlock()
}

func (l *LazyFS) entry(name string) *lazyEntry {
	l.mu.Lock()
	e := l.entries[filepath.Clean(name)]
	l.mu.Unlock()
	if e == nil || e.removed.Load() {
		return nil
	}
	return e
}

// Stats returns the prefetch's figures so far.
func (l *LazyFS) Stats() LazyStats {
	l.mu.Lock()
	n := len(l.entries)
	l.mu.Unlock()
	st := LazyStats{Files: n, Local: int(l.local.Load()), Corrupt: int(l.corrupt.Load()),
		RemoteReads: l.remoteReads.Load(), RemoteBytes: l.remoteBytes.Load(),
		FetchedBytes: l.fetched.Load(), VerifiedBytes: l.verified.Load(), Retries: l.retries.Load(),
		Promoted: l.promoted.Load(), Done: l.finished.Load()}
	if p := l.lastErr.Load(); p != nil {
		st.LastError = *p
	}
	return st
}

// Open implements vfs.FS: a lazy file for a registered table that is not local yet.
func (l *LazyFS) Open(name string) (vfs.File, error) {
	e := l.entry(name)
	if e == nil || e.state.Load() == lazyLocal {
		return l.FS.Open(name)
	}
	return &lazyFile{l: l, e: e}, nil
}

// Stat implements vfs.FS: a remote file has its object's size.
func (l *LazyFS) Stat(name string) (fs.FileInfo, error) {
	if e := l.entry(name); e != nil && e.state.Load() == lazyRemote {
		return lazyInfo{name: filepath.Base(e.path), size: e.obj.Size}, nil
	}
	return l.FS.Stat(name)
}

// List implements vfs.FS: the remote files of dir are listed as if they were there.
func (l *LazyFS) List(dir string) ([]string, error) {
	names, err := l.FS.List(dir)
	if err != nil {
		return names, err
	}
	dir = filepath.Clean(dir)
	l.mu.Lock()
	for _, e := range l.entries {
		if filepath.Dir(e.path) == dir && !e.removed.Load() && e.state.Load() != lazyLocal && e.state.Load() != lazyLinked {
			base := filepath.Base(e.path)
			if i := sort.SearchStrings(names, base); i == len(names) || names[i] != base {
				names = append(names, base)
				sort.Strings(names)
			}
		}
	}
	l.mu.Unlock()
	return names, nil
}

// Remove implements vfs.FS: a lazy file leaves the prefetch; a remote one has only a name.
func (l *LazyFS) Remove(name string) error {
	e := l.entry(name)
	if e == nil {
		return l.FS.Remove(name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l.mu.Lock() // settle decides under it too: pending drops once per entry
	if !e.removed.Load() {
		e.removed.Store(true)
		e.meta.Store(nil) // open lazy files read the storage from now on
		if st := e.state.Load(); st != lazyLocal && st != lazyCorrupt {
			l.pending--
		}
	}
	l.mu.Unlock()
	err := l.FS.Remove(name)
	if err != nil && errors.Is(err, fs.ErrNotExist) && e.state.Load() == lazyRemote {
		return nil
	}
	return err
}

// Link implements vfs.FS: EXDEV for a file that is not local (invariant 23), so that a
// checkpoint copies it through Open.
func (l *LazyFS) Link(oldname, newname string) error {
	if e := l.entry(oldname); e != nil && e.state.Load() != lazyLocal {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EXDEV}
	}
	return l.FS.Link(oldname, newname)
}

// LinkFS returns the inner FS for a file that is not a lazy file or is local (checkpoint's
// putFile then hard-links it into a DirStorage on that FS), false otherwise.
func (l *LazyFS) LinkFS(name string) (vfs.FS, bool) {
	if e := l.entry(name); e != nil && e.state.Load() != lazyLocal {
		return nil, false
	}
	return l.FS, true
}

// lazyInfo is the fs.FileInfo of a remote file.
type lazyInfo struct {
	name string
	size int64
}

func (i lazyInfo) Name() string       { return i.name }
func (i lazyInfo) Size() int64        { return i.size }
func (i lazyInfo) Mode() fs.FileMode  { return 0o444 }
func (i lazyInfo) ModTime() time.Time { return time.Time{} }
func (i lazyInfo) IsDir() bool        { return false }
func (i lazyInfo) Sys() any           { return nil }

// lazyFile is a read-only handle of a lazy file (invariant 19).
type lazyFile struct {
	l      *LazyFS
	e      *lazyEntry
	mu     sync.Mutex // local, off, closed
	local  vfs.File
	fast   atomic.Pointer[vfs.File] // local once opened: reads of a local file take no lock
	off    int64
	closed bool
}

// localFile returns the handle of the local file, opening it once; nil when it cannot be
// opened (removed since: the object still serves).
func (f *lazyFile) localFile() (vfs.File, error) {
	if p := f.fast.Load(); p != nil {
		return *p, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, &fs.PathError{Op: "read", Path: f.e.path, Err: fs.ErrClosed}
	}
	if f.local == nil {
		lf, err := f.l.FS.Open(f.e.path)
		if err != nil {
			return nil, nil
		}
		f.local = lf
		f.fast.Store(&lf)
	}
	return f.local, nil
}

// ReadAt implements io.ReaderAt.
func (f *lazyFile) ReadAt(p []byte, off int64) (int, error) {
	switch f.e.state.Load() {
	case lazyLocal, lazyLinked:
		lf, err := f.localFile()
		if err != nil {
			return 0, err
		}
		if lf != nil {
			return lf.ReadAt(p, off)
		}
	case lazyCorrupt:
		return 0, f.e.err
	}
	return f.l.readRemote(f.e, p, off)
}

// readRemote reads p at off from the object (or its lazyMeta), short with io.EOF at its end.
func (l *LazyFS) readRemote(e *lazyEntry, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: e.path, Err: syscall.EINVAL}
	}
	n := min(int64(len(p)), e.obj.Size-off)
	if n <= 0 {
		return 0, io.EOF
	}
	if m := e.meta.Load(); m != nil && off+n <= int64(len(m.head)) {
		copy(p, m.head[off:off+n])
	} else if m != nil && m.tail != nil && off >= m.tailOff {
		copy(p, m.tail[off-m.tailOff:off-m.tailOff+n])
	} else {
		l.promoteEntry(e)
		b, err := checkpoint.GetObjectRange(context.Background(), l.storage, e.obj.Name, e.obj.Size, off, n)
		if err != nil {
			return 0, err
		}
		if int64(len(b)) != n {
			return 0, base.Corrupt(e.obj.Name, off, base.ErrTruncated, "range of %d bytes read as %d", n, len(b))
		}
		l.remoteReads.Add(1)
		l.remoteBytes.Add(n)
		copy(p, b)
	}
	if n < int64(len(p)) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// promoteEntry moves e, once, to the head of the prefetch queue after the files promoted
// before it (invariant 25); nothing when a lane took it already.
// Reads before the prefetch starts (the restore's own: lsm.Import, Open) promote nothing.
func (l *LazyFS) promoteEntry(e *lazyEntry) {
	if !l.prefetching.Load() || e.promote.Load() || !e.promote.CompareAndSwap(false, true) {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.queue, e)
	if i < 0 {
		return // taken
	}
	l.promoted.Add(1)
	if i < l.urgent {
		return
	}
	copy(l.queue[l.urgent+1:i+1], l.queue[l.urgent:i])
	l.queue[l.urgent] = e
	l.urgent++
}

// Read implements io.Reader at the handle's offset.
func (f *lazyFile) Read(p []byte) (int, error) {
	f.mu.Lock()
	off := f.off
	f.mu.Unlock()
	n, err := f.ReadAt(p, off)
	f.mu.Lock()
	f.off += int64(n)
	f.mu.Unlock()
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

// Write implements vfs.File: read-only.
func (f *lazyFile) Write([]byte) (int, error) {
	return 0, &fs.PathError{Op: "write", Path: f.e.path, Err: syscall.EBADF}
}

// Sync implements vfs.File: the local file's, nothing for a remote one (invariant 23).
func (f *lazyFile) Sync() error {
	if f.e.state.Load() == lazyRemote {
		return nil
	}
	lf, err := f.localFile()
	if err != nil || lf == nil {
		return err
	}
	return lf.Sync()
}

// Stat implements vfs.File.
func (f *lazyFile) Stat() (fs.FileInfo, error) {
	return lazyInfo{name: filepath.Base(f.e.path), size: f.e.obj.Size}, nil
}

// Close implements io.Closer.
func (f *lazyFile) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return fs.ErrClosed
	}
	f.closed = true
	f.fast.Store(nil)
	if f.local != nil {
		return f.local.Close()
	}
	return nil
}

// warm reads the lazyMeta of every remote file, lazyWarmers at a time on a scheduler of its
// own (closed before it returns): the tables' opens by lsm.Import and Open then need no round
// trip. A failed read leaves its file without a lazyMeta (its opens read the storage); only
// ctx's error is returned.
func (l *LazyFS) warm(ctx context.Context) error {
	l.mu.Lock()
	var remote []*lazyEntry
	for _, e := range l.queue {
		if e.state.Load() == lazyRemote {
			remote = append(remote, e)
		}
	}
	l.mu.Unlock()
	if len(remote) == 0 {
		return nil
	}
	sched, err := scheduler.New(scheduler.Options{Workers: min(lazyWarmers, len(remote))})
	if err != nil {
		return err
	}
	defer sched.Close()
	var hs []*scheduler.Handle
	for _, e := range remote {
		h, err := sched.Submit(scheduler.Upload, "lazy-restore warm", func(tctx context.Context) error {
			size := e.obj.Size
			m := &lazyMeta{}
			hn := min(size, lazyHead)
			tn := min(size-hn, max(lazyTailMin, size/32))
			b, err := checkpoint.GetObjectRange(ctx, l.storage, e.obj.Name, size, 0, hn)
			if err != nil || int64(len(b)) != hn {
				return nil
			}
			m.head = b
			if tn > 0 {
				b, err := checkpoint.GetObjectRange(ctx, l.storage, e.obj.Name, size, size-tn, tn)
				if err == nil && int64(len(b)) == tn {
					m.tailOff, m.tail = size-tn, b
				}
			}
			e.meta.Store(m)
			return nil
		})
		if err != nil {
			return err
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		h.Wait()
	}
	return ctx.Err()
}

// StartPrefetch starts l's prefetch (doc.go, "Lazy restore") on a scheduler of its own with
// l's lanes as workers, so that the lanes, which mostly wait for the storage, never hold a
// worker of the engine's (a compaction's, a checkpoint upload's); Engine.Close closes it. done
// runs once every file is local, on a prefetch worker. The prefetch ends early at Close (the
// directory stays incomplete, invariant 22); when a file is found corrupt it goes on with the
// others but never calls done. Errors: scheduler.New's.
func (e *Engine) StartPrefetch(l *LazyFS, done func() error) error {
	l.mu.Lock()
	l.done = done
	for _, f := range l.queue {
		if f.state.Load() == lazyRemote {
			l.lanes = max(e.remoteLanes, 1)
			break
		}
	}
	n := min(l.lanes, len(l.queue))
	l.running = n
	l.mu.Unlock()
	l.prefetching.Store(true)
	if n == 0 {
		e.lazy.Store(l)
		return l.finish()
	}
	sched, err := scheduler.New(scheduler.Options{Workers: n})
	if err != nil {
		return err
	}
	l.sched = sched
	e.lazy.Store(l)
	for range n {
		if err := l.submit(sched); err != nil {
			return err
		}
	}
	return nil
}

// close stops the prefetch and waits for its lanes.
func (l *LazyFS) close() error {
	if l.sched == nil {
		return nil
	}
	return l.sched.Close()
}

// LazyStats returns the figures of the engine's lazy restore (zero when it had none).
func (e *Engine) LazyStats() LazyStats {
	if l := e.lazy.Load(); l != nil {
		return l.Stats()
	}
	return LazyStats{}
}

// submit queues one prefetch task: it takes one file, fetches or verifies it, and queues its
// successor, so that higher-priority work gets a worker between two files.
func (l *LazyFS) submit(s *scheduler.Scheduler) error {
	_, err := s.Submit(scheduler.Upload, "lazy-restore prefetch", func(ctx context.Context) error {
		l.mu.Lock()
		var e *lazyEntry
		for len(l.queue) > 0 && e == nil {
			e, l.queue = l.queue[0], l.queue[1:]
			l.urgent = max(l.urgent-1, 0)
			if e.removed.Load() {
				e = nil
			}
		}
		l.mu.Unlock()
		if e == nil {
			l.mu.Lock()
			l.running--
			last := l.running == 0
			l.mu.Unlock()
			if last {
				return l.finish()
			}
			return nil
		}
		if err := l.prefetch(ctx, e); err != nil {
			return err // the context: Close
		}
		if err := l.submit(s); err != nil {
			return err
		}
		return nil
	})
	return err
}

// finish completes the directory once every file is local (invariant 22).
func (l *LazyFS) finish() error {
	l.mu.Lock()
	ready := l.pending == 0 && !l.doneRan && l.corrupt.Load() == 0
	if ready {
		l.doneRan = true
	}
	done := l.done
	l.mu.Unlock()
	if !ready {
		return nil
	}
	if err := vfs.SyncDir(l.FS, l.dir); err != nil {
		l.noteErr(err)
		return err
	}
	if done != nil {
		if err := done(); err != nil {
			l.noteErr(err)
			return err
		}
	}
	l.finished.Store(true)
	return nil
}

func (l *LazyFS) noteErr(err error) {
	s := err.Error()
	l.lastErr.Store(&s)
}

// prefetch moves e to local or corrupt, retrying transient errors; it fails only with the
// context's error.
func (l *LazyFS) prefetch(ctx context.Context, e *lazyEntry) error {
	wait := lazyRetryMin
	for {
		if e.removed.Load() {
			return nil
		}
		var err error
		if e.state.Load() == lazyLinked {
			err = l.verify(e)
		} else {
			err = l.fetch(ctx, e)
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, base.ErrCorruption) || errors.Is(err, checkpoint.ErrNotFound) {
			if !errors.Is(err, base.ErrCorruption) {
				err = base.Corrupt(e.obj.Name, 0, err, "the object a restored manifest lists is missing")
			}
			e.err = err
			l.settle(e, lazyCorrupt)
			l.noteErr(err)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.retries.Add(1)
		l.noteErr(err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, lazyRetryMax)
	}
}

// settle moves e to its final state and counts it.
func (l *LazyFS) settle(e *lazyEntry, st int32) {
	l.mu.Lock()
	e.state.Store(st)
	e.meta.Store(nil)
	if !e.removed.Load() {
		l.pending--
	}
	l.mu.Unlock()
	if st == lazyCorrupt {
		l.corrupt.Add(1)
	} else {
		l.local.Add(1)
	}
}

// verify checks a linked file's CRC32C in place.
func (l *LazyFS) verify(e *lazyEntry) error {
	crc, size, err := checkpointfs.FileCRC(l.FS, e.path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && e.removed.Load() {
			return nil
		}
		return err
	}
	l.verified.Add(size)
	if size != e.obj.Size {
		return base.Corrupt(e.obj.Name, min(size, e.obj.Size), base.ErrTruncated, "object is %d bytes, the manifest records %d", size, e.obj.Size)
	}
	if crc != e.obj.CRC {
		return base.Corrupt(e.obj.Name, 0, base.ErrChecksum, "crc32c %#08x, the manifest records %#08x", crc, e.obj.CRC)
	}
	l.settle(e, lazyLocal)
	return nil
}

// fetch copies a remote file in beside its name, checks it and renames it into place.
func (l *LazyFS) fetch(ctx context.Context, e *lazyEntry) (err error) {
	tmp := e.path + ".lazy"
	f, err := l.FS.Create(tmp)
	if err != nil {
		return err
	}
	defer func() {
		if f != nil {
			f.Close()
		}
		if err != nil {
			l.FS.Remove(tmp)
		}
	}()
	var crc uint32
	for off := int64(0); off < e.obj.Size; {
		n := min(int64(lazyChunk), e.obj.Size-off)
		b, err := checkpoint.GetObjectRange(ctx, l.storage, e.obj.Name, e.obj.Size, off, n)
		if err != nil {
			return err
		}
		if int64(len(b)) != n {
			return base.Corrupt(e.obj.Name, off, base.ErrTruncated, "range of %d bytes read as %d", n, len(b))
		}
		if _, err := f.Write(b); err != nil {
			return fmt.Errorf("strata: lazy restore of %s: %w", e.obj.Name, err)
		}
		crc = crc32.Update(crc, base.CRC32C, b)
		off += n
		l.fetched.Add(n)
	}
	if crc != e.obj.CRC {
		return base.Corrupt(e.obj.Name, 0, base.ErrChecksum, "crc32c %#08x, the manifest records %#08x", crc, e.obj.CRC)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	err = f.Close()
	f = nil
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.removed.Load() {
		l.FS.Remove(tmp)
		return nil
	}
	if err := l.FS.Rename(tmp, e.path); err != nil {
		return err
	}
	l.settle(e, lazyLocal)
	return nil
}
