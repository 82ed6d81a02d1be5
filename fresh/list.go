package fresh

import "encoding/binary"

// chunkSize is the size of a list chunk record of key with a batch of n
// bytes.
func chunkSize(key []byte, n int) uint32 {
	return keyHdrSize + uint32(len(key)) + chunkPrevLen + uint32(n)
}

// writeChunk writes a list chunk at off.
func (s *segment) writeChunk(off uint32, seq uint64, flags uint8, key, batch []byte, prev uint32) {
	r := s.data[off : off+chunkSize(key, len(batch))]
	binary.LittleEndian.PutUint64(r, meta(seq, KindListChunk, flags))
	binary.LittleEndian.PutUint16(r[8:], uint16(len(key)))
	binary.LittleEndian.PutUint16(r[10:], 0)
	binary.LittleEndian.PutUint32(r[12:], uint32(len(batch)))
	copy(r[keyHdrSize:], key)
	p := keyHdrSize + len(key)
	binary.LittleEndian.PutUint32(r[p:], prev)
	copy(r[p+chunkPrevLen:], batch)
}

// ListAppend appends a batch (caller-framed elements; fresh does not parse
// it) to the list of key (hash h) in O(1): one chunk record linked to the
// previous chunk of the key in the active segment, as a merge operand in
// the manner of Flink's ListState.add/addAll. After a tombstone the chunk
// is a base chunk. An empty batch is a no-op. Errors as Put.
func (t *Table) ListAppend(h uint64, key, batch []byte) error {
	if err := t.checkKV(key, batch); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	size := chunkSize(key, len(batch))
	s, _, err := t.prepare(size, 1)
	if err != nil {
		return err
	}
	pos, old := s.findKey(h, key)
	t.seq++
	off := s.alloc(size)
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
		s.insert(h, off)
	}
	s.writeChunk(off, t.seq, flags, key, batch, prev)
	return nil
}

// ListReplace replaces the list of key (hash h) by batch, as Flink's
// ListState.update: a base chunk hides everything older. It writes in
// place when the list in the active segment is a single base chunk whose
// capacity holds batch. An empty batch writes a tombstone (ListDelete).
// Errors as Put.
func (t *Table) ListReplace(h uint64, key, batch []byte) error {
	if len(batch) == 0 {
		return t.ListDelete(h, key)
	}
	if err := t.checkKV(key, batch); err != nil {
		return err
	}
	var pos, old uint32
	if s := t.active; s != nil {
		pos, old = s.findKey(h, key)
		if old != 0 {
			r := s.data[old:]
			p := keyHdrSize + uint32(len(key))
			if RecordKind(r[7]&0xF) == KindListChunk && r[7]>>4 == FlagBase && binary.LittleEndian.Uint32(r[p:]) == 0 {
				c := binary.LittleEndian.Uint32(r[12:]) + uint32(binary.LittleEndian.Uint16(r[10:]))
				n := uint32(len(batch))
				if n <= c && c-n <= maxSlack {
					t.seq++
					binary.LittleEndian.PutUint64(r, meta(t.seq, KindListChunk, FlagBase))
					binary.LittleEndian.PutUint16(r[10:], uint16(c-n))
					binary.LittleEndian.PutUint32(r[12:], n)
					copy(r[p+chunkPrevLen:], batch)
					return nil
				}
			}
		}
	}
	size := chunkSize(key, len(batch))
	s, changed, err := t.prepare(size, 1)
	if err != nil {
		return err
	}
	if changed {
		pos, old = s.findKey(h, key)
	}
	t.seq++
	off := s.alloc(size)
	s.writeChunk(off, t.seq, FlagBase, key, batch, 0)
	if old != 0 {
		s.setSlot(pos, off)
		s.kill(old, t.seq)
	} else {
		s.insert(h, off)
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
// data, no batch after it) or Absent. The batches alias segment memory and
// are valid until the next write. It allocates only when dst lacks
// capacity (it walks newest to oldest, then reverses what it added).
func (t *Table) ListGet(h uint64, key []byte, dst [][]byte) ([][]byte, Status) {
	start := len(dst)
	st := Absent
walk:
	for i := len(t.segs) - 1; i >= 0; i-- {
		s := t.segs[i]
		_, off := s.findKey(h, key)
		if off == 0 {
			continue
		}
		if k := RecordKind(s.data[off+7] & 0xF); k != KindListChunk {
			if k == KindTombstone {
				st = Deleted
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
	return dst, st
}
