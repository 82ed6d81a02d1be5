package sstable

import (
	"math/bits"

	"github.com/strata-db/strata/internal/base"
)

// slotsFor returns log2 of the number of hash-index slots for a block with
// runs distinct Orders: the smallest power of two above runs·4/3, so the load
// factor stays at or below 3/4 and at least one slot is always empty (a probe
// for an absent Order ends at an empty slot).
func slotsFor(runs int) uint8 {
	need := runs + runs/3 + 1
	return uint8(bits.Len(uint(need - 1)))
}

// slotWidthFor returns the byte width of a hash-index slot for a block whose
// entries take dataLen bytes: slots hold entry offset + 1 (0 = empty).
func slotWidthFor(dataLen int) int {
	if dataLen < 1<<16-1 {
		return 2
	}
	return 4
}

// slotOf returns the home slot of order in a table of 1<<log2 slots
// (Fibonacci hashing: the Orders of one block share their top bits).
func slotOf(order uint64, log2 uint8) uint32 {
	if log2 == 0 {
		return 0
	}
	return uint32((order * 0x9E3779B97F4A7C15) >> (64 - log2))
}

// blockSize returns the encoded length of a data block holding dataLen bytes
// of entries with runs distinct Orders.
func blockSize(dataLen, runs int) int {
	return dataLen + (1<<slotsFor(runs))*slotWidthFor(dataLen) + dataFooterSize + trailerSize
}

// run is the first entry of one Order in the block being built.
type run struct {
	order uint64
	off   uint32
}

// finishBlock appends the hash index, data footer and trailer to a block
// whose entries are dst[start:], given its runs and entry count.
func finishBlock(dst []byte, start int, runs []run, entries int) []byte {
	dataLen := len(dst) - start
	log2 := slotsFor(len(runs))
	width := slotWidthFor(dataLen)
	nslots := 1 << log2
	base := len(dst)
	dst = append(dst, make([]byte, nslots*width)...)
	slots := dst[base:]
	mask := uint32(nslots - 1)
	for _, r := range runs {
		s := slotOf(r.order, log2)
		for getSlot(slots, width, s) != 0 {
			s = (s + 1) & mask
		}
		putSlot(slots, width, s, r.off+1)
	}
	dst = le.AppendUint32(dst, uint32(dataLen))
	dst = le.AppendUint32(dst, uint32(entries))
	dst = append(dst, log2, byte(width), 0, 0)
	return appendTrailer(dst, start, blockData)
}

func getSlot(slots []byte, width int, s uint32) uint32 {
	if width == 2 {
		return uint32(le.Uint16(slots[2*s:]))
	}
	return le.Uint32(slots[4*s:])
}

func putSlot(slots []byte, width int, s uint32, v uint32) {
	if width == 2 {
		le.PutUint16(slots[2*s:], uint16(v))
		return
	}
	le.PutUint32(slots[4*s:], v)
}

// block is a view of a verified data block: its entries and hash index.
// It aliases the bytes it was parsed from.
type block struct {
	data    []byte // entries, dataLen bytes
	slots   []byte // 1<<log2 slots of width bytes
	width   int
	log2    uint8
	entries int
}

// parseBlock checks a whole data block (payload and trailer) — CRC, type,
// data footer shape — and returns a view of it. It does not decode entries;
// validate does. Offsets in errors are relative to the block's start.
func parseBlock(raw []byte) (block, error) {
	p, err := checkTrailer(raw, blockData)
	if err != nil {
		return block{}, err
	}
	return parseBlockPayload(p)
}

// parseBlockPayload decodes the data footer of a verified payload. It is
// also how a cached block (verified when it was loaded) is viewed again.
func parseBlockPayload(p []byte) (block, error) {
	if len(p) < dataFooterSize {
		return block{}, corrupt(nil, 0, "data block payload of %d bytes is shorter than its footer", len(p))
	}
	f := p[len(p)-dataFooterSize:]
	dataLen := int64(le.Uint32(f))
	entries := int64(le.Uint32(f[4:]))
	log2, width := f[8], int(f[9])
	fo := int64(len(p) - dataFooterSize)
	if f[10]|f[11] != 0 {
		return block{}, corrupt(nil, fo+10, "data footer reserved bytes are not zero")
	}
	if log2 > 24 || (width != 2 && width != 4) {
		return block{}, corrupt(nil, fo+8, "hash index of 2^%d slots of %d bytes", log2, width)
	}
	nslots := int64(1) << log2
	if dataLen+nslots*int64(width) != fo {
		return block{}, corrupt(nil, fo, "data length %d + %d slots of %d bytes != %d",
			dataLen, nslots, width, fo)
	}
	if entries == 0 || entries > dataLen/entryFixedSize || width != slotWidthFor(int(dataLen)) {
		return block{}, corrupt(nil, fo+4, "%d entries in %d bytes with %d-byte slots", entries, dataLen, width)
	}
	return block{data: p[:dataLen], slots: p[dataLen:fo], width: width, log2: log2, entries: int(entries)}, nil
}

// seek returns the offset of the first entry of order in the block, or -1 if
// the block holds none (or its index is damaged: validate rules that out for
// loaded blocks). Never panics.
func (b *block) seek(order uint64) int {
	mask := uint32(1)<<b.log2 - 1
	s := slotOf(order, b.log2)
	for i := uint32(0); i <= mask; i++ {
		v := getSlot(b.slots, b.width, s)
		if v == 0 {
			return -1
		}
		off := int(v - 1)
		if off <= len(b.data)-8 && le.Uint64(b.data[off:]) == order {
			return off
		}
		s = (s + 1) & mask
	}
	return -1
}

// validate decodes every entry of the block and checks that they are
// well-formed, strictly in entry order, that the count matches, that the first
// and last Order are first and last (the file index's claim), and that the
// hash index finds exactly the first entry of every Order and nothing else.
// After validate, decoding the block cannot fail. e is scratch space; on
// success it holds the block's last entry.
func (b *block) validate(first, last uint64, e *base.Entry) error {
	var prev base.Entry
	var runs, n, off int
	for off < len(b.data) {
		next := decodeEntry(b.data, off, e)
		if next < 0 {
			return corrupt(nil, int64(off), "malformed entry %d", n)
		}
		if n == 0 {
			if e.Order != first {
				return corrupt(nil, int64(off), "first order %#x, index says %#x", e.Order, first)
			}
		} else if base.Compare(&prev, e) >= 0 {
			return corrupt(nil, int64(off), "entry %d does not sort after entry %d", n, n-1)
		}
		if n == 0 || e.Order != prev.Order {
			runs++
			if b.seek(e.Order) != off {
				return corrupt(nil, int64(len(b.data)), "hash index does not find order %#x at %d", e.Order, off)
			}
		}
		prev = *e
		n++
		off = next
	}
	if n != b.entries || n == 0 {
		return corrupt(nil, int64(len(b.data)), "block holds %d entries, footer says %d", n, b.entries)
	}
	if prev.Order != last {
		return corrupt(nil, int64(len(b.data)), "last order %#x, index says %#x", prev.Order, last)
	}
	*e = prev
	used := 0
	for s := uint32(0); s < 1<<b.log2; s++ {
		if getSlot(b.slots, b.width, s) != 0 {
			used++
		}
	}
	if used != runs || int(b.log2) != int(slotsFor(runs)) {
		return corrupt(nil, int64(len(b.data)), "hash index has %d of 2^%d slots used for %d orders", used, b.log2, runs)
	}
	return nil
}
