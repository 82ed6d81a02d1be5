package fresh

import "encoding/binary"

// maxChunkCap is the largest capacity (batch bytes plus slack) a new list
// chunk is given; a batch larger than it gets a chunk of exactly its size.
// See doc.go (Lists) for why 4 KiB.
const maxChunkCap = 4 << 10

// chunkSize is the size of a list chunk record of key with a capacity of n
// batch bytes.
func chunkSize(key []byte, n int) uint32 {
	return keyHdrSize + uint32(len(key)) + chunkPrevLen + uint32(n)
}

// chunkCap returns the capacity of a new chunk for a batch of n bytes when
// the key's newest chunk in the active segment has capacity prev (0: none):
// n for a key's first chunk in the segment (no slack: most keys' lists are
// written once per segment, and slack there doubled a segment's list
// bytes, bench MemoryEfficiency), else max(2n, 2·prev) capped at
// maxChunkCap and at the largest value, never below n. Doubling from the
// second chunk on keeps appends amortized O(1) with at most half of the
// newest chunk unused.
func (t *Table) chunkCap(n, prev uint32) uint32 {
	if prev == 0 {
		return n
	}
	c := 2 * n
	if 2*prev > c {
		c = 2 * prev
	}
	if c > maxChunkCap {
		c = maxChunkCap
	}
	if c > t.maxValue {
		c = t.maxValue
	}
	if c < n {
		c = n
	}
	return c
}

// fitCap shrinks a chunk capacity c (>= n) so that the chunk fits the rest
// of the active segment when the bare batch would: slack never makes a
// segment roll early. It also drops slack a record could not hold in any
// segment.
func (t *Table) fitCap(key []byte, n, c uint32) uint32 {
	if chunkSize(key, int(c)) > t.limit-segHeaderSize {
		return n
	}
	if s := t.active; s != nil {
		if room := t.limit - s.used; chunkSize(key, int(c)) > room && chunkSize(key, int(n)) <= room {
			return room - chunkSize(key, 0)
		}
	}
	return c
}

// writeChunk writes a list chunk at off with capacity c >= len(batch).
func (s *segment) writeChunk(off uint32, seq uint64, flags uint8, key, batch []byte, prev, c uint32) {
	r := s.data[off : off+chunkSize(key, int(c))]
	binary.LittleEndian.PutUint64(r, meta(seq, KindListChunk, flags))
	binary.LittleEndian.PutUint16(r[8:], uint16(len(key)))
	binary.LittleEndian.PutUint16(r[10:], uint16(c-uint32(len(batch))))
	binary.LittleEndian.PutUint32(r[12:], uint32(len(batch)))
	copy(r[keyHdrSize:], key)
	p := keyHdrSize + len(key)
	binary.LittleEndian.PutUint32(r[p:], prev)
	copy(r[p+chunkPrevLen:], batch)
}

// newestChunk returns the index position and offset of the key's newest
// key-level record in the active segment (0, 0 without an active segment;
// off 0 and the empty slot for an insert without a record, invariant 12),
// and, when it is a list chunk, its capacity.
func (t *Table) newestChunk(h uint64, key []byte) (pos, off, capacity uint32, chunk bool) {
	s := t.active
	if s == nil {
		return 0, 0, 0, false
	}
	pos, off = t.probe(s, h, key)
	if off == 0 || RecordKind(s.data[off+7]&0xF) != KindListChunk {
		return pos, off, 0, false
	}
	r := s.data[off:]
	return pos, off, binary.LittleEndian.Uint32(r[12:]) + uint32(binary.LittleEndian.Uint16(r[10:])), true
}

// ListAppend appends a batch (caller-framed elements; fresh does not parse
// it, and treats batches as concatenable: two batches appended in a row may
// come back from ListGet as one) to the list of key (hash h) in O(1), as
// Flink's ListState.add/addAll, without reading the list. In place when
// the key's newest chunk is in the active segment and its slack holds the
// batch: the batch is copied after the chunk's bytes. Otherwise a new chunk
// with slack (see chunkCap) is appended, linked to the key's previous chunk
// in the active segment as a merge operand; after a tombstone (or with no
// chunk but a tombstone) it is a base chunk. An empty batch is a no-op.
// Errors as Put.
func (t *Table) ListAppend(h uint64, key, batch []byte) error {
	if err := t.checkKV(key, batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	n := uint32(len(batch))
	pos, old, c, chunk := t.newestChunk(h, key)
	if chunk {
		s := t.active
		r := s.data[old:]
		vlen := binary.LittleEndian.Uint32(r[12:])
		if vlen+n <= c {
			t.seq++
			flags := r[7] >> 4
			binary.LittleEndian.PutUint64(r, meta(t.seq, KindListChunk, flags))
			binary.LittleEndian.PutUint16(r[10:], uint16(c-vlen-n))
			binary.LittleEndian.PutUint32(r[12:], vlen+n)
			copy(r[keyHdrSize+uint32(len(key))+chunkPrevLen+vlen:], batch)
			return nil
		}
	}
	c = t.fitCap(key, n, t.chunkCap(n, c))
	s, changed, err := t.prepare(chunkSize(key, int(c)), 1)
	if err != nil {
		return err
	}
	if changed { // else s is the segment newestChunk probed, its index unchanged
		pos, old = s.findKey(h, key)
	}
	t.seq++
	off := s.alloc(chunkSize(key, int(c)))
	var prev uint32
	var flags uint8
	if old != 0 {
		if RecordKind(s.data[old+7]&0xF) == KindListChunk {
			prev = old
		} else {
			flags = FlagBase
			s.kill(old, t.seq)
		}
		s.setSlot(pos, off)
	} else {
		s.insertAt(pos, h, off)
	}
	s.writeChunk(off, t.seq, flags, key, batch, prev, c)
	return nil
}

// ListReplace replaces the list of key (hash h) by batch, as Flink's
// ListState.update: a base chunk hides everything older. In place when the
// key's newest chunk is in the active segment and its capacity holds
// batch: that chunk becomes the base (prev cleared) and the older chunks
// of the key in the segment become garbage (FlagDead). Otherwise a base
// chunk with slack is appended. An empty batch writes a tombstone
// (ListDelete). Errors as Put.
func (t *Table) ListReplace(h uint64, key, batch []byte) error {
	if len(batch) == 0 {
		return t.ListDelete(h, key)
	}
	if err := t.checkKV(key, batch); err != nil {
		return err
	}
	n := uint32(len(batch))
	pos, old, c, chunk := t.newestChunk(h, key)
	if chunk && n <= c && c-n <= maxSlack {
		s := t.active
		r := s.data[old:]
		p := keyHdrSize + uint32(len(key))
		prev := binary.LittleEndian.Uint32(r[p:])
		t.seq++
		binary.LittleEndian.PutUint64(r, meta(t.seq, KindListChunk, FlagBase))
		binary.LittleEndian.PutUint16(r[10:], uint16(c-n))
		binary.LittleEndian.PutUint32(r[12:], n)
		binary.LittleEndian.PutUint32(r[p:], 0)
		copy(r[p+chunkPrevLen:], batch)
		if prev != 0 {
			s.kill(prev, t.seq)
		}
		return nil
	}
	c = t.fitCap(key, n, t.chunkCap(n, c))
	s, changed, err := t.prepare(chunkSize(key, int(c)), 1)
	if err != nil {
		return err
	}
	if changed {
		pos, old = s.findKey(h, key)
	}
	t.seq++
	off := s.alloc(chunkSize(key, int(c)))
	s.writeChunk(off, t.seq, FlagBase, key, batch, 0, c)
	if old != 0 {
		s.setSlot(pos, off)
		s.kill(old, t.seq)
	} else {
		s.insertAt(pos, h, off)
	}
	return nil
}

// ListDelete clears the list of key (hash h) with a tombstone, as Flink's
// ListState.clear. Errors as Put.
func (t *Table) ListDelete(h uint64, key []byte) error {
	return t.Delete(h, key)
}

// ListGet appends to dst the batches of the list of key (hash h), oldest
// first, across segments, stopping at the newest base chunk or tombstone.
// It reports Found (at least one batch), Deleted (a tombstone shadows older
// data, no batch after it) or Absent, and complete: whether the walk
// reached a base chunk or a tombstone, so that older tiers hold nothing of
// the list. Found with !complete means the FreshTable holds only appended
// batches (merge operands): the older tiers' list goes before them. Absent
// is never complete, Deleted always. The batches alias segment memory and
// are valid until the next write (or DropSealed). It allocates only when
// dst lacks capacity (it walks newest to oldest, then reverses what it
// added).
func (t *Table) ListGet(h uint64, key []byte, dst [][]byte) (batches [][]byte, st Status, complete bool) {
	start := len(dst)
	st = Absent
walk:
	for i := len(t.segs) - 1; i >= 0; i-- {
		s := t.segs[i]
		pos, off := s.findKey(h, key)
		if s == t.active {
			t.remember(s, h, key, pos, off)
		}
		if off == 0 {
			continue
		}
		if k := RecordKind(s.data[off+7] & 0xF); k != KindListChunk {
			if k == KindTombstone {
				st, complete = Deleted, true
			}
			break
		}
		for off != 0 {
			r := s.data[off:]
			p := keyHdrSize + uint32(len(key))
			a := p + chunkPrevLen
			b := a + binary.LittleEndian.Uint32(r[12:])
			dst = append(dst, r[a:b:b])
			if r[7]>>4&FlagBase != 0 {
				complete = true
				break walk
			}
			off = binary.LittleEndian.Uint32(r[p:])
		}
	}
	added := dst[start:]
	for i, j := 0, len(added)-1; i < j; i, j = i+1, j-1 {
		added[i], added[j] = added[j], added[i]
	}
	if len(added) > 0 {
		st = Found
	}
	return dst, st, complete
}
