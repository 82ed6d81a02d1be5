package timer

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"math"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/memory"
)

// Source is one queue a snapshot freezes: the timers of Service in Domain.
type Source struct {
	Service string
	Domain  Domain
	Queue   *Queue
}

// Snapshot is the timers of some queues frozen at a cut (doc.go, "Snapshots"): Freeze and
// Release on the owner goroutine, WriteTo on any one goroutine in between.
type Snapshot struct {
	srcs     []frozenSource
	owned    []ownedRegion // regions of groups rebuilt while frozen (owner appends)
	released bool
	timers   int
}

// ownedRegion is a region a snapshot holds for WriteTo, and the queue it goes back to.
type ownedRegion struct {
	q *Queue
	r *memory.Region
}

type frozenSource struct {
	service string
	name    []byte // service's bytes
	domain  Domain
	groups  []frozenGroup // by key group
}

// frozenGroup is a view of a frozen group's region, read by WriteTo.
type frozenGroup struct {
	g     *group
	kg    int
	near  []entry // the heap's [0, n)
	far   []entry // and its far entries
	arena []byte
	live  int
	bytes int // live record bytes
}

// Freeze freezes every group with timers of srcs, which must be in strictly increasing
// (Service, Domain) order with names of 1..65535 bytes. O(key groups); nothing is copied.
// A group already frozen by a snapshot not yet released is a broken invariant (one snapshot
// at a time: the engine runs one checkpoint at a time). Owner goroutine.
func Freeze(srcs []Source) *Snapshot { return capture(srcs, true) }

func capture(srcs []Source, freeze bool) *Snapshot {
	s := &Snapshot{}
	for i, src := range srcs {
		if src.Service == "" || len(src.Service) > 0xffff ||
			(i > 0 && blockCmp(srcs[i-1].Service, srcs[i-1].Domain, src.Service, src.Domain) >= 0) {
			panic(fmt.Sprintf("strata: invariant: timer.Freeze: source %d (%q, %v) out of order", i, src.Service, src.Domain))
		}
		fs := frozenSource{service: src.Service, name: []byte(src.Service), domain: src.Domain}
		for _, g := range src.Queue.groups {
			if g == nil || g.live == 0 {
				continue
			}
			if freeze {
				if g.frozen != nil {
					panic(fmt.Sprintf("strata: invariant: key group %d of timer service %q frozen twice", g.kg, src.Service))
				}
				g.frozen = s
			}
			fs.groups = append(fs.groups, frozenGroup{g: g, kg: g.kg, near: g.near(), far: g.far(), arena: g.arena,
				live: g.live, bytes: g.recBytes})
			s.timers += g.live
		}
		s.srcs = append(s.srcs, fs)
	}
	return s
}

// entries returns the near entries followed by the far ones (an iterator: no allocation).
func (fg *frozenGroup) entries() func(yield func(int, entry) bool) {
	return func(yield func(int, entry) bool) {
		for i, e := range fg.near {
			if !yield(i, e) {
				return
			}
		}
		for i, e := range fg.far {
			if !yield(len(fg.near)+i, e) {
				return
			}
		}
	}
}

// Capture returns a snapshot of srcs (ordered as for Freeze) that freezes nothing: it reads
// the queues' regions in place, so it is valid only until the queues next change — for a
// WriteTo on the owner goroutine right away (the Store's timer file at Close), beside a
// snapshot of a checkpoint still being written. Release it like any snapshot.
func Capture(srcs []Source) *Snapshot { return capture(srcs, false) }

// Timers returns the number of timers frozen.
func (s *Snapshot) Timers() int { return s.timers }

// Release unfreezes the groups not rebuilt since Freeze and gives the regions of those that
// were back to their queues (spare regions for the next snapshot's rebuilds, or released). Idempotent. Owner goroutine, after WriteTo returned (or was never called).
func (s *Snapshot) Release() {
	if s.released {
		return
	}
	s.released = true
	for _, fs := range s.srcs {
		for _, fg := range fs.groups {
			if fg.g.frozen == s {
				fg.g.frozen = nil
			}
		}
	}
	for _, o := range s.owned {
		o.q.putSpare(o.r) // kept for the next snapshot's rebuilds, or released
	}
	s.owned, s.srcs = nil, nil
}

// Section is where WriteTo wrote the section of one key group: bytes [Offset, Offset+Length)
// of its output, with their CRC32C, the number of timers and their smallest and largest
// timestamps.
type Section struct {
	KeyGroup       int
	Offset, Length int64
	CRC            uint32
	Timers         int
	MinTimestamp   int64
	MaxTimestamp   int64
}

// sectionWriter writes through a buffer, counting bytes and the running section's CRC32C.
type sectionWriter struct {
	w   *bufio.Writer
	crc hash.Hash32
	off int64
	err error
	b   [16]byte
}

func (w *sectionWriter) write(p []byte) {
	if w.err != nil {
		return
	}
	_, w.err = w.w.Write(p)
	w.crc.Write(p)
	w.off += int64(len(p))
}

// WriteTo writes one section per key group with timers, key groups ascending, each holding
// one block per source with timers in it, to w; the bytes are those AppendSection gives for
// the same blocks, timers in heap order. It returns the sections written, in order. Errors:
// w's, ctx's (checked every 4096 timers), a key group whose section would pass 4 GiB. Any one
// goroutine, between Freeze and Release; it reads frozen memory only.
func (s *Snapshot) WriteTo(ctx context.Context, w io.Writer) ([]Section, error) {
	if s.released {
		panic("strata: invariant: timer snapshot written after Release")
	}
	sw := &sectionWriter{w: bufio.NewWriterSize(w, 256<<10), crc: crc32.New(base.CRC32C)}
	le := binary.LittleEndian
	next := make([]int, len(s.srcs)) // per source: index of its next group
	var out []Section
	count := 0
	for {
		kg := -1
		for i, fs := range s.srcs {
			if j := next[i]; j < len(fs.groups) && (kg < 0 || fs.groups[j].kg < kg) {
				kg = fs.groups[j].kg
			}
		}
		if kg < 0 {
			break
		}
		// The section's blocks: the sources' groups of kg.
		payload, blocks, timers := int64(sectionFixed), 0, 0
		for i, fs := range s.srcs {
			if j := next[i]; j < len(fs.groups) && fs.groups[j].kg == kg {
				payload += int64(blockFixed+len(fs.service)) + int64(fs.groups[j].bytes)
				blocks++
				timers += fs.groups[j].live
			}
		}
		if payload > MaxSectionPayload {
			return nil, fmt.Errorf("the timers of key group %d take %d bytes, more than a section holds (%d)", kg, payload, int64(MaxSectionPayload))
		}
		sec := Section{KeyGroup: kg, Offset: sw.off, Timers: timers, MinTimestamp: math.MaxInt64, MaxTimestamp: math.MinInt64}
		sw.crc.Reset()
		copy(sw.b[:], sectionMagic)
		le.PutUint16(sw.b[8:], sectionVersion)
		sw.b[10], sw.b[11] = sectionCRC32C, 0
		le.PutUint32(sw.b[12:], uint32(payload))
		sw.write(sw.b[:16])
		le.PutUint16(sw.b[0:], uint16(kg))
		le.PutUint16(sw.b[2:], 0)
		le.PutUint32(sw.b[4:], uint32(blocks))
		sw.write(sw.b[:8])
		for i, fs := range s.srcs {
			j := next[i]
			if j >= len(fs.groups) || fs.groups[j].kg != kg {
				continue
			}
			next[i]++
			fg := &fs.groups[j]
			le.PutUint16(sw.b[0:], uint16(len(fs.service)))
			sw.write(sw.b[:2])
			sw.write(fs.name)
			sw.b[0], sw.b[1] = byte(fs.domain), 0
			le.PutUint32(sw.b[2:], uint32(fg.live))
			sw.write(sw.b[:6])
			written := 0
			for _, e := range fg.entries() {
				hdr := fg.arena[e.ref : e.ref+recHeader]
				nsl := le.Uint16(hdr[14:])
				if nsl&deadBit != 0 {
					continue // a ghost
				}
				sz := recSize(int(le.Uint16(hdr[12:])), int(nsl))
				sw.write(fg.arena[e.ref : int(e.ref)+sz])
				sec.MinTimestamp, sec.MaxTimestamp = min(sec.MinTimestamp, e.ts), max(sec.MaxTimestamp, e.ts)
				written++
				if count++; count%4096 == 0 {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
				}
			}
			if written != fg.live {
				panic(fmt.Sprintf("strata: invariant: frozen key group %d of timer service %q holds %d live timers, counted %d", kg, fs.service, written, fg.live))
			}
		}
		le.PutUint32(sw.b[:], sw.crc.Sum32()) // the trailer: the CRC32C of the bytes before it
		sw.write(sw.b[:4])
		sec.Length = sw.off - sec.Offset
		sec.CRC = sw.crc.Sum32() // the whole section's, trailer included (a manifest entry's)
		out = append(out, sec)
	}
	if sw.err == nil {
		sw.err = sw.w.Flush()
	}
	if sw.err != nil {
		return nil, sw.err
	}
	return out, nil
}
