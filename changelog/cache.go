package changelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// Cache fetches each changelog object once for all the restores of a process that read it,
// whatever their number — the fix of FLINK-27155, where every operator of a TaskManager
// downloaded the same changelog file again on restore (Flink's changelog local cache,
// dstl.dfs.download.local-cache.idle-timeout-ms). A rescaled job restores several Stores from
// one checkpoint, and a shared Writer puts the records of many Stores in one object: without
// the cache each of them reads the object (its footer and the segments of its key groups).
//
// Invariants:
//  1. An object is fetched whole, once, by the first reader that asks for it; readers that
//     ask meanwhile wait for that fetch and share its result (its error too, after which the
//     entry is gone and the next reader fetches again). Nothing is fetched in the background:
//     the Cache starts no goroutine.
//  2. Each reader (Cache.Reader) holds a reference on every object it read until its Close;
//     an object is deleted from the local directory only with no reference, after
//     IdleTimeout without one (checked on every Reader call and Close), or at Cache.Close.
//  3. The cached bytes are the object's bytes: readers check segment CRCs and the footer as
//     they do on the Storage itself, so a damaged local copy is an ErrCorruption, never
//     wrong records.
//
// Objects are keyed by name: names are never reused within a Storage and carry a random
// part across owners (checkpoint's invariant 1). Safe for concurrent use.
type Cache struct {
	fs   vfs.FS
	dir  string
	idle time.Duration
	now  func() time.Time

	mu     sync.Mutex
	ents   map[string]*cacheEntry
	next   uint64
	closed bool
	st     CacheStats
}

// CacheStats are a Cache's figures.
type CacheStats struct {
	Fetches      int64 // objects fetched from storage
	FetchedBytes int64 // their bytes
	Hits         int64 // object reads served by an entry another reader fetched or was fetching
	Evictions    int64 // entries deleted (idle, or Close)
	Entries      int   // objects in the cache now
	Bytes        int64 // their bytes on local disk
}

// cacheEntry is one cached object; fields below ready are set once before ready closes.
type cacheEntry struct {
	name     string
	refs     int
	lastUsed time.Time
	ready    chan struct{}
	path     string
	f        vfs.File
	size     int64
	err      error
}

// DefaultCacheIdle is how long an object nobody reads stays cached: Flink's default idle
// timeout of its changelog download cache, 10 minutes.
const DefaultCacheIdle = 10 * time.Minute

// NewCache returns a Cache keeping its files in dir (created if missing; files left there by
// an earlier process are removed). idle is how long an unreferenced object stays (0: deleted
// at its last release; negative: DefaultCacheIdle). Errors: the file system's.
func NewCache(dir string, idle time.Duration) (*Cache, error) {
	return newCache(vfs.Default(), dir, idle)
}

func newCache(fsys vfs.FS, dir string, idle time.Duration) (*Cache, error) {
	if dir == "" {
		return nil, errors.New("changelog: cache: no directory")
	}
	if idle < 0 {
		idle = DefaultCacheIdle
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("changelog: cache: %w", err)
	}
	names, err := fsys.List(dir)
	if err != nil {
		return nil, fmt.Errorf("changelog: cache: %w", err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, cacheSuffix) {
			if err := fsys.Remove(filepath.Join(dir, n)); err != nil {
				return nil, fmt.Errorf("changelog: cache: remove a stale file: %w", err)
			}
		}
	}
	return &Cache{fs: fsys, dir: dir, idle: idle, now: time.Now, ents: map[string]*cacheEntry{}}, nil
}

// cacheSuffix ends the name of every file of a Cache's directory.
const cacheSuffix = ".clcache"

// Stats returns the Cache's figures.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.st
	st.Entries = len(c.ents)
	for _, e := range c.ents {
		if isClosed(e.ready) && e.err == nil {
			st.Bytes += e.size
		}
	}
	return st
}

// Close deletes every cached file nobody reads; the objects readers still hold are deleted
// at their Close. Reads of objects a reader does not hold yet fail. Errors: the first failure
// to remove a file.
func (c *Cache) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var first error
	for name, e := range c.ents {
		if e.refs > 0 || !isClosed(e.ready) {
			continue // deleted at the last release (evictIdle)
		}
		if err := c.drop(name, e); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Reader returns a Storage that serves Get and GetRange of s's objects from the Cache
// (fetching each once) and passes every other call to s. Close it when the replay ends: it
// releases the objects it read. One goroutine at a time.
func (c *Cache) Reader(s checkpoint.Storage) *CacheReader {
	return &CacheReader{Storage: s, c: c, held: map[string]*cacheEntry{}}
}

// CacheReader reads objects through a Cache (Cache.Reader).
type CacheReader struct {
	checkpoint.Storage
	c    *Cache
	held map[string]*cacheEntry
}

// Get returns the whole object, from the Cache. Errors: the Storage's (ErrNotFound), the
// local file system's, ctx's while waiting for another reader's fetch.
func (r *CacheReader) Get(ctx context.Context, name string) ([]byte, error) {
	e, err := r.entry(ctx, name)
	if err != nil {
		return nil, err
	}
	return r.read(e, 0, e.size)
}

// GetRange returns length bytes at off of the object, from the Cache. Errors: Get's, and
// checkpoint.ErrRange for a range outside the object.
func (r *CacheReader) GetRange(ctx context.Context, name string, off, length int64) ([]byte, error) {
	e, err := r.entry(ctx, name)
	if err != nil {
		return nil, err
	}
	if off < 0 || length < 0 || off+length > e.size {
		return nil, fmt.Errorf("%w: %s [%d, +%d) of %d bytes", checkpoint.ErrRange, name, off, length, e.size)
	}
	return r.read(e, off, length)
}

// Close releases every object the reader read (invariant 2).
func (r *CacheReader) Close() {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for name, e := range r.held {
		e.refs--
		e.lastUsed = now
		delete(r.held, name)
	}
	c.evictIdle(now)
}

// ReadRangeInto implements checkpoint.RangeReaderInto: GetRange into p (len(p) bytes at off).
// Errors: GetRange's.
func (r *CacheReader) ReadRangeInto(ctx context.Context, name string, off int64, p []byte) error {
	e, err := r.entry(ctx, name)
	if err != nil {
		return err
	}
	if length := int64(len(p)); off < 0 || off+length > e.size {
		return fmt.Errorf("%w: %s [%d, +%d) of %d bytes", checkpoint.ErrRange, name, off, length, e.size)
	}
	return r.readInto(e, off, p)
}

func (r *CacheReader) read(e *cacheEntry, off, length int64) ([]byte, error) {
	b := make([]byte, length)
	if err := r.readInto(e, off, b); err != nil {
		return nil, err
	}
	return b, nil
}

func (r *CacheReader) readInto(e *cacheEntry, off int64, b []byte) error {
	n, err := e.f.ReadAt(b, off)
	switch {
	case n == len(b):
		return nil
	case errors.Is(err, io.EOF):
		return base.Corrupt(e.name, off+int64(n), base.ErrTruncated, "the cached copy %s ends before %d bytes", e.path, e.size)
	default:
		return fmt.Errorf("changelog: cache: read %s: %w", e.name, err)
	}
}

// entry returns the ready entry of name, held by r, fetching it if no reader has.
func (r *CacheReader) entry(ctx context.Context, name string) (*cacheEntry, error) {
	if e := r.held[name]; e != nil {
		return e, nil
	}
	c := r.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errors.New("changelog: cache: closed")
	}
	e := c.ents[name]
	fetch := e == nil
	if fetch {
		c.next++
		e = &cacheEntry{name: name, ready: make(chan struct{}),
			path: filepath.Join(c.dir, strconv.FormatUint(c.next, 10)+cacheSuffix)}
		c.ents[name] = e
	} else {
		c.st.Hits++
	}
	e.refs++
	c.mu.Unlock()
	if fetch {
		c.fetch(ctx, r.Storage, e)
	} else {
		select {
		case <-e.ready:
		case <-ctx.Done():
			c.release(e)
			return nil, ctx.Err()
		}
	}
	if e.err != nil {
		c.release(e)
		return nil, e.err
	}
	r.held[name] = e
	return e, nil
}

// fetch reads object e.name from s into its local file and opens it (invariant 1).
func (c *Cache) fetch(ctx context.Context, s checkpoint.Storage, e *cacheEntry) {
	data, err := s.Get(ctx, e.name)
	if err == nil {
		err = c.writeFile(e.path, data)
	}
	if err == nil {
		e.f, err = c.fs.Open(e.path)
	}
	c.mu.Lock()
	if err != nil {
		e.err = err
		c.fs.Remove(e.path)
		delete(c.ents, e.name) // the next reader fetches again
	} else {
		e.size = int64(len(data))
		c.st.Fetches++
		c.st.FetchedBytes += e.size
	}
	close(e.ready)
	c.mu.Unlock()
}

// writeFile writes data as the file path (no sync: a cache does not outlive its process).
func (c *Cache) writeFile(path string, data []byte) error {
	f, err := c.fs.Create(path)
	if err != nil {
		return fmt.Errorf("changelog: cache: %w", err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		c.fs.Remove(path)
		return fmt.Errorf("changelog: cache: %w", err)
	}
	return nil
}

// release drops one reference of e (a failed or abandoned read).
func (c *Cache) release(e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	e.lastUsed = c.now()
	c.evictIdle(e.lastUsed)
}

// evictIdle deletes the unreferenced entries idle for the Cache's timeout (c.mu held).
func (c *Cache) evictIdle(now time.Time) {
	for name, e := range c.ents {
		if e.refs == 0 && isClosed(e.ready) && (c.closed || now.Sub(e.lastUsed) >= c.idle) {
			c.drop(name, e)
		}
	}
}

// drop closes and removes e's file and forgets it (c.mu held).
func (c *Cache) drop(name string, e *cacheEntry) error {
	delete(c.ents, name)
	if e.err != nil {
		return nil
	}
	c.st.Evictions++
	if e.f != nil {
		e.f.Close()
	}
	if err := c.fs.Remove(e.path); err != nil {
		return fmt.Errorf("changelog: cache: %w", err)
	}
	return nil
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
