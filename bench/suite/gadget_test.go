package suite

import (
	"encoding/binary"
	"testing"

	"github.com/strata-db/strata/bench/peers"
)

// Gadget-style window workloads (CASP-Systems-BU/Gadget, EuroSys'22,
// configs/config.txt defaults): source keys Zipf s=1 over 1M, exponential
// event-time gaps with rate 10, tumbling windows of length 5 (about 50
// events per window), 10-byte keys and values, events in order (Gadget's
// 0-2 % out-of-order events and lateness are not modelled). One op is one
// event, including its share of the window-close work.
//
//	incremental: per event get + put of the (key, window) accumulator;
//	             on window close get + delete of every key of the window.
//	holistic:    per event append to the (key, window) list;
//	             on window close get (iterate) + delete of every list.

const (
	gadgetKeys   = 1_000_000
	gadgetEvents = 1 << 21
)

type gadgetOp struct {
	ev      Events
	lastWin []int32 // per source key: last window it has state in, +1 (0 = none)
	open    []int32 // keys with state in the current window
	cur     int32   // current window (offset included)
	keyBuf  [10]byte
	nsBuf   [8]byte
	val     [10]byte
}

var gadgetStream *Events

func newGadgetOp() *gadgetOp {
	if gadgetStream == nil {
		e := GadgetEvents(gadgetKeys, 1, 10, 5, gadgetEvents, 11)
		gadgetStream = &e
	}
	return &gadgetOp{ev: *gadgetStream, lastWin: make([]int32, gadgetKeys), open: make([]int32, 0, 1024), cur: -1}
}

// key returns the state key of source key id in window w: 10-byte key
// (2 zero bytes + 8-byte id) in namespace w (8 bytes).
func (g *gadgetOp) key(id, w int32) peers.Key {
	binary.BigEndian.PutUint64(g.keyBuf[2:], uint64(id))
	binary.BigEndian.PutUint64(g.nsBuf[:], uint64(w))
	return peers.Key{K: g.keyBuf[:], NS: g.nsBuf[:]}
}

// event returns the i-th event, windows continuing to grow when the stream
// wraps, and reports whether it opened a new window (after closing the
// previous one with closeFn).
func (g *gadgetOp) event(i int, closeFn func(id, w int32)) (id, w int32, first bool) {
	j := i % gadgetEvents
	lap := int32(i / gadgetEvents)
	last := g.ev.Windows[gadgetEvents-1] + 1
	id, w = g.ev.Keys[j], g.ev.Windows[j]+lap*last
	if w != g.cur {
		for _, k := range g.open {
			closeFn(k, g.cur)
		}
		g.open = g.open[:0]
		g.cur = w
	}
	if g.lastWin[id] != w+1 {
		g.lastWin[id] = w + 1
		g.open = append(g.open, id)
		first = true
	}
	return id, w, first
}

func BenchmarkGadget(b *testing.B) {
	for _, kind := range []string{"incremental", "holistic"} {
		b.Run("window="+kind+"/keys="+SizeLabel(gadgetKeys), func(b *testing.B) {
			forImpls(b, *flagBudget, func(peers.Store) {}, func(b *testing.B, l *lazyStore) {
				g := newGadgetOp()
				var st peers.Store
				closeInc := func(id, w int32) {
					k := g.key(id, w)
					v, _ := st.ValueGet(k)
					sink += len(v)
					st.ValueDelete(k)
				}
				closeHol := func(id, w int32) {
					k := g.key(id, w)
					c, _ := st.ListIterate(k)
					sink += c
					st.ListClear(k)
				}
				if kind == "incremental" {
					leaf(b, l, "op=event", func(s peers.Store, i int) {
						st = s
						id, w, _ := g.event(i, closeInc)
						k := g.key(id, w)
						v, ok := st.ValueGet(k)
						if ok {
							copy(g.val[:], v)
						} else {
							g.val = [10]byte{}
						}
						binary.BigEndian.PutUint64(g.val[2:], binary.BigEndian.Uint64(g.val[2:])+1)
						st.ValuePut(k, g.val[:])
					})
					return
				}
				leaf(b, l, "op=event", func(s peers.Store, i int) {
					st = s
					id, w, _ := g.event(i, closeHol)
					binary.BigEndian.PutUint64(g.val[2:], uint64(i))
					st.ListAdd(g.key(id, w), g.val[:])
				})
			})
		})
	}
}
