package sstable

import (
	"fmt"
	"io"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// Dump writes a human-readable description of the sstable in f (size bytes)
// to w: header, footer properties, filter, file index, and every block with
// its entries (Order, kind, Seq, hashes, key and user key in hex, value length
// and its first bytes). It opens the file with Open and verifies every block
// as it goes, so on a damaged file it prints what it could read and returns
// the *base.CorruptionError. It does not close f. For debugging and tests; the
// output format is not stable.
func Dump(w io.Writer, f vfs.File, size int64) error {
	r, err := Open(f, "", size, nil, 0)
	if err != nil {
		fmt.Fprintf(w, "error: %v\n", err)
		return err
	}
	m := r.Meta()
	fmt.Fprintf(w, "sstable format %d, checksum crc32c, %d bytes\n", FormatVersion, m.Size)
	fmt.Fprintf(w, "entries %d (tombstones %d), blocks %d, order [%#016x, %#016x], seq [%d, %d]\n",
		m.Entries, m.Tombstones, m.Blocks, m.MinOrder, m.MaxOrder, m.MinSeq, m.MaxSeq)
	if r.filter == nil {
		fmt.Fprintf(w, "filter: none\n")
	} else {
		fmt.Fprintf(w, "filter: %d lines of 64 bytes, %d probes\n", r.filter.lines, r.filter.k)
	}
	var e base.Entry
	it := r.NewIter()
	for i, h := range r.idx {
		fmt.Fprintf(w, "block %d: offset %d, length %d, order [%#016x, %#016x]\n", i, h.off, h.length, h.first, h.last)
		if !it.load(i) {
			fmt.Fprintf(w, "error: %v\n", it.err)
			return it.err
		}
		blk := it.blk
		fmt.Fprintf(w, "  %d entries in %d bytes, hash index of %d slots of %d bytes\n",
			blk.entries, len(blk.data), 1<<blk.log2, blk.width)
		for off := 0; off < len(blk.data); {
			next := decodeEntry(blk.data, off, &e)
			if next < 0 {
				err := base.Corrupt("", int64(h.off)+int64(off), nil, "malformed entry")
				fmt.Fprintf(w, "error: %v\n", err)
				return err
			}
			fmt.Fprintf(w, "  @%-5d %#016x %-19s seq %-6d hash %#016x", off, e.Order, e.Kind, e.Seq, e.Hash)
			if e.UserHash != 0 {
				fmt.Fprintf(w, " uhash %#016x", e.UserHash)
			}
			fmt.Fprintf(w, " key %x", e.Key)
			if len(e.UserKey) > 0 {
				fmt.Fprintf(w, " ukey %x", e.UserKey)
			}
			v := e.Value
			if len(v) > 16 {
				v = v[:16]
			}
			fmt.Fprintf(w, " value(%d) %x\n", len(e.Value), v)
			off = next
		}
	}
	return nil
}
