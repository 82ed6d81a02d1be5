package sstable

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// TestValidatedOnceUnlessChanged: a data block's structure is walked on its first read only,
// keyed by its checksum: when the block's bytes change under the Reader (structural damage
// with a recomputed, valid checksum), the next read walks it again and reports the damage
// instead of trusting the earlier validation.
func TestValidatedOnceUnlessChanged(t *testing.T) {
	golden, err := os.ReadFile(filepath.Join("testdata", "v1.sst"))
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Clone(golden)
	r, err := Open(readOnly(b), "v1.sst", int64(len(b)), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	h := r.idx[0]
	var first base.Entry
	it := r.NewIter()
	if !it.Next() {
		t.Fatal("empty golden file")
	}
	first.Order = it.Entry().Order
	key := bytes.Clone(it.Entry().Key)
	get := func() error {
		return r.Get(first.Order, key, nil, func(*base.Entry) bool { return false })
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}
	if r.checked[0].Load() == 0 {
		t.Fatal("block 0 not marked validated after a read")
	}
	if err := get(); err != nil { // the validated path
		t.Fatal(err)
	}
	// Damage block 0's entry count (its footer) and reseal it: checksum valid, structure not.
	blk := b[h.off : h.off+uint64(h.length)]
	foot := blk[len(blk)-trailerSize-dataFooterSize:]
	le.PutUint32(foot[4:], le.Uint32(foot[4:])+1)
	seal(blk)
	if err := get(); !errors.Is(err, base.ErrCorruption) {
		t.Fatalf("read of the resealed, damaged block: %v, want base.ErrCorruption", err)
	}
}
