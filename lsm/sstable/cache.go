package sstable

import (
	"fmt"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/strata-db/strata/memory"
)

// Cache holds verified data blocks of many files in fixed-size frames of one
// off-heap Region (memory.Budget.Map, memory.PurposeBlockCache), so cached
// blocks count against the store's MemoryBudget and cost the Go heap only a
// small descriptor per frame. A block is checked once, when it is loaded
// (CRC32C and full decode, doc.go invariant 5); hits read it in place.
//
// The lookup table is split into shards by hash of (file ID, block offset),
// each a mutex and a chained hash table of frame indices; the frames
// themselves form one pool with one CLOCK hand, so every frame serves every
// shard (no shard thrashes while another has room). A hit takes its shard's
// mutex once to pin the frame and an atomic decrement to unpin it. A miss
// takes the clock mutex, picks a victim among unpinned frames not referenced
// since the hand last passed, unlinks it under its shard's mutex, reads and
// verifies the block into it outside every lock, and publishes it. If every
// frame is pinned the read falls back to a private buffer (it never blocks
// and never fails for lack of frames). Blocks longer than the frame size are
// never cached. Lock order: clock mutex, then a shard mutex; a hit takes only
// a shard mutex.
//
// A Cache is safe for concurrent use by any number of Readers and goroutines,
// except Close, which must not run concurrently with any other use.
type Cache struct {
	region    *memory.Region
	mem       []byte
	frameSize int
	frames    []frame
	shards    []cacheShard
	shardBits uint8
	clockMu   sync.Mutex
	hand      int // CLOCK hand; guarded by clockMu
	closed    atomic.Bool
}

// frame describes one frame. refs and clock are atomic. fileID and off
// change only under the clock mutex while the frame is in no chain; state and
// next are guarded by the mutex of the shard that (fileID, off) hashes to.
type frame struct {
	refs   atomic.Int32
	clock  atomic.Bool // referenced since the hand last passed
	state  uint8       // frameFree, frameLoading, frameValid
	next   int32       // next frame in the hash chain, -1 = end
	fileID uint64
	off    uint64
}

const (
	frameFree    = 0 // holds nothing; in no chain
	frameLoading = 1 // pinned by its loader; in no chain
	frameValid   = 2 // holds a verified block; in its bucket's chain
)

type cacheShard struct {
	mu      sync.Mutex
	buckets []int32 // chain heads, -1 = empty; len is a power of two
	hits    int64
	misses  int64
	_       [64]byte // keep shards' mutexes on separate cache lines
}

// NewCache maps a block cache of capacity bytes (rounded down to whole
// frames of blockSize bytes, then up to whole pages) through b, accounted to
// memory.PurposeBlockCache. blockSize is the largest block the cache holds;
// it should be the WriterOptions.BlockSize of the files it serves (0 means
// DefaultBlockSize). Errors: ErrInvalidOptions if blockSize is negative or
// above 1 GiB or capacity is below one frame; memory.ErrMemoryBudget (wrapped)
// if the budget cannot hold it.
func NewCache(b *memory.Budget, capacity int64, blockSize int) (*Cache, error) {
	if blockSize == 0 {
		blockSize = DefaultBlockSize
	}
	if blockSize < 0 || blockSize > 1<<30 {
		return nil, fmt.Errorf("%w: cache block size %d bytes", ErrInvalidOptions, blockSize)
	}
	nframes := capacity / int64(blockSize)
	if nframes < 1 || nframes > 1<<30 {
		return nil, fmt.Errorf("%w: cache capacity %d bytes holds %d frames of %d bytes", ErrInvalidOptions,
			capacity, nframes, blockSize)
	}
	// Shards: about 4 per CPU, at most 64, each with at least 8 frames.
	nshards := min(4*runtime.GOMAXPROCS(0), 64, int(nframes/8))
	shardBits := uint8(0)
	if nshards > 1 {
		shardBits = uint8(bits.Len(uint(nshards)) - 1)
	}
	nshards = 1 << shardBits
	region, err := b.Map(int(nframes)*blockSize, memory.PurposeBlockCache)
	if err != nil {
		return nil, fmt.Errorf("block cache of %d frames of %d bytes: %w", nframes, blockSize, err)
	}
	c := &Cache{region: region, mem: region.Bytes(), frameSize: blockSize,
		frames: make([]frame, nframes), shards: make([]cacheShard, nshards), shardBits: shardBits}
	nb := 1 << bits.Len(uint(nframes/int64(nshards)))
	for i := range c.shards {
		s := &c.shards[i]
		s.buckets = make([]int32, nb)
		for j := range s.buckets {
			s.buckets[j] = -1
		}
	}
	for i := range c.frames {
		c.frames[i].next = -1
	}
	return c, nil
}

// FrameSize returns the frame size in bytes: the longest block the cache
// holds.
func (c *Cache) FrameSize() int { return c.frameSize }

// CacheStats is a snapshot of a Cache's counters.
type CacheStats struct {
	Frames   int   // number of frames
	Bytes    int64 // bytes mapped for frames (accounted to memory.PurposeBlockCache)
	Resident int   // frames holding a block
	Hits     int64 // lookups served from a frame
	Misses   int64 // lookups that read the file (whether or not a frame was free)
}

// Stats returns the cache's counters. Safe for concurrent use; it takes each
// shard's mutex in turn.
func (c *Cache) Stats() CacheStats {
	st := CacheStats{Frames: len(c.frames), Bytes: int64(len(c.mem))}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Hits += s.hits
		st.Misses += s.misses
		for _, f := range s.buckets {
			for ; f >= 0; f = c.frames[f].next {
				st.Resident++
			}
		}
		s.mu.Unlock()
	}
	return st
}

// Close unmaps the frames and returns their bytes to the budget. It must not
// run concurrently with any other use of the cache or of a Reader using it;
// Readers must not be used with the cache afterwards. A second Close is a
// no-op.
func (c *Cache) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	c.mem = nil
	return c.region.Release()
}

// EvictFile drops the unpinned blocks of fileID from the cache (Reader.Close
// calls it). Blocks pinned by a running read stay until CLOCK evicts them.
// Safe for concurrent use; it takes each shard's mutex in turn and scans its
// frames.
func (c *Cache) EvictFile(fileID uint64) {
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for b := range s.buckets {
			p := &s.buckets[b]
			for *p >= 0 {
				fr := &c.frames[*p]
				if fr.fileID == fileID && fr.refs.Load() == 0 {
					*p, fr.next, fr.state = fr.next, -1, frameFree
					continue
				}
				p = &fr.next
			}
		}
		s.mu.Unlock()
	}
}

func cacheHash(fileID, off uint64) uint64 { return mix64(fileID*0x9E3779B97F4A7C15 ^ off) }

func (c *Cache) shardOf(h uint64) *cacheShard {
	if c.shardBits == 0 {
		return &c.shards[0]
	}
	return &c.shards[h>>(64-c.shardBits)]
}

// buf returns frame f's bytes.
func (c *Cache) buf(f int32) []byte {
	o := int(f) * c.frameSize
	return c.mem[o : o+c.frameSize : o+c.frameSize]
}

// acquire returns the frame holding block (fileID, off), pinned, with hit
// true; or, on a miss, a frame reserved and pinned for the caller to load
// (then publish or abort), with hit false; or -1 if every frame is pinned or
// recently referenced twice over a full sweep.
func (c *Cache) acquire(fileID, off uint64) (f int32, hit bool) {
	h := cacheHash(fileID, off)
	s := c.shardOf(h)
	b := h & uint64(len(s.buckets)-1)
	s.mu.Lock()
	for f = s.buckets[b]; f >= 0; f = c.frames[f].next {
		fr := &c.frames[f]
		if fr.fileID == fileID && fr.off == off {
			fr.refs.Add(1)
			if !fr.clock.Load() {
				fr.clock.Store(true)
			}
			s.hits++
			s.mu.Unlock()
			return f, true
		}
	}
	s.misses++
	s.mu.Unlock()
	return c.victim(fileID, off), false
}

// victim runs the CLOCK hand to a frame that is unpinned and not referenced
// since the hand last passed, takes it out of its chain, and reserves it for
// (fileID, off), pinned; -1 if none is found in two sweeps.
func (c *Cache) victim(fileID, off uint64) int32 {
	c.clockMu.Lock()
	defer c.clockMu.Unlock()
	n := len(c.frames)
	for i := 0; i < 2*n; i++ {
		f := int32(c.hand)
		if c.hand++; c.hand == n {
			c.hand = 0
		}
		fr := &c.frames[f]
		if fr.refs.Load() != 0 || fr.clock.Swap(false) {
			continue
		}
		// fr's key cannot change (we hold clockMu); its shard guards the rest.
		s := c.shardOf(cacheHash(fr.fileID, fr.off))
		s.mu.Lock()
		if fr.refs.Load() != 0 || fr.state == frameLoading {
			s.mu.Unlock()
			continue
		}
		if fr.state == frameValid {
			c.unlink(s, f)
		}
		fr.state, fr.fileID, fr.off = frameLoading, fileID, off
		fr.refs.Store(1)
		s.mu.Unlock()
		return f
	}
	return -1
}

// publish makes a loaded frame visible to other readers, unless another
// reader published the same block meanwhile (the frame then stays private
// and is freed). The frame stays pinned by the caller.
func (c *Cache) publish(f int32) {
	fr := &c.frames[f]
	h := cacheHash(fr.fileID, fr.off)
	s := c.shardOf(h)
	b := h & uint64(len(s.buckets)-1)
	s.mu.Lock()
	for g := s.buckets[b]; g >= 0; g = c.frames[g].next {
		if c.frames[g].fileID == fr.fileID && c.frames[g].off == fr.off {
			fr.state = frameFree
			s.mu.Unlock()
			return
		}
	}
	fr.state = frameValid
	fr.clock.Store(true)
	fr.next = s.buckets[b]
	s.buckets[b] = f
	s.mu.Unlock()
}

// abort frees a frame whose load failed, and unpins it.
func (c *Cache) abort(f int32) {
	fr := &c.frames[f]
	s := c.shardOf(cacheHash(fr.fileID, fr.off))
	s.mu.Lock()
	fr.state = frameFree
	s.mu.Unlock()
	fr.refs.Add(-1)
}

// release unpins a frame.
func (c *Cache) release(f int32) { c.frames[f].refs.Add(-1) }

// unlink removes valid frame f from its chain; the shard's mutex is held.
func (c *Cache) unlink(s *cacheShard, f int32) {
	fr := &c.frames[f]
	b := cacheHash(fr.fileID, fr.off) & uint64(len(s.buckets)-1)
	p := &s.buckets[b]
	for *p >= 0 {
		if *p == f {
			*p = fr.next
			fr.next = -1
			return
		}
		p = &c.frames[*p].next
	}
	panic("strata: invariant: sstable cache frame missing from its hash chain")
}
