package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// spSource commits, under "job", checkpoint 7 of two objects: a table covered whole (shared,
// as an incremental checkpoint's) and a packed changelog object covered by two ranges.
func spSource(t *testing.T, ctx context.Context, d Storage) (*Manifest, [][]byte) {
	t.Helper()
	table := bytes.Repeat([]byte("table-bytes."), 1000)
	log := bytes.Repeat([]byte("log."), 300)
	kg := KeyGroupRange{End: 127}
	tn, ln := SharedName("job", kg, 3, "sst"), PrivateName("job", 7, kg, "log")
	for name, b := range map[string][]byte{tn: table, ln: log} {
		if err := d.Put(ctx, name, b); err != nil {
			t.Fatal(err)
		}
	}
	crc := func(b []byte) uint32 { return crc32.Checksum(b, base.CRC32C) }
	m := &Manifest{ID: 7, Parent: 3, Epoch: 2, CreatedUnixMilli: 1, MaxParallelism: 128, KeyGroups: kg, LastSeq: 99,
		Registry: []byte("reg"), InputPosition: []byte("pos"), OperatorState: []byte("ops"),
		Objects: []Object{
			{Name: tn, Kind: KindTable, Size: int64(len(table)), CRC: crc(table), KeyGroups: kg, MinOrder: 1, MaxOrder: 2, Level: 3},
			{Name: ln, Kind: KindChangelog, Size: int64(len(log)), CRC: crc(log[:100]), KeyGroups: KeyGroupRange{End: 63},
				MinOrder: 1, MaxOrder: 5, Packed: true, Offset: 0, Length: 100},
			{Name: ln, Kind: KindChangelog, Size: int64(len(log)), CRC: crc(log[100:]), KeyGroups: KeyGroupRange{Start: 64, End: 127},
				MinOrder: 1, MaxOrder: 5, Packed: true, Offset: 100, Length: int64(len(log)) - 100},
		}}
	if err := Commit(ctx, d, "job", m); err != nil {
		t.Fatal(err)
	}
	return m, [][]byte{table, log, log}
}

// TestCopyNative: the copy names only objects of its own owner, with the source's bytes and
// entries; a damaged source object fails the copy with ErrCorruption and commits nothing; a
// storage failing at any write leaves no manifest; the source is never changed.
func TestCopyNative(t *testing.T) {
	ctx := context.Background()
	src, _ := newMemStorage(t)
	dst, _ := newMemStorage(t)
	m, data := spSource(t, ctx, src)
	before, _ := src.List(ctx, "")
	got, err := CopyNative(ctx, src, "job", 7, dst, "sp")
	if err != nil {
		t.Fatal(err)
	}
	read, err := ReadManifest(ctx, dst, "sp", 7)
	if err != nil {
		t.Fatal(err)
	}
	if read.Parent != 0 || read.Epoch != m.Epoch || read.LastSeq != m.LastSeq || string(read.OperatorState) != "ops" ||
		string(read.InputPosition) != "pos" || len(read.Objects) != len(m.Objects) || len(got.Objects) != len(m.Objects) {
		t.Fatalf("copied manifest %+v", read)
	}
	if read.Objects[1].Name != read.Objects[2].Name {
		t.Fatal("the two ranges of one packed object were copied to two objects")
	}
	for i, o := range read.Objects {
		if !strings.HasPrefix(o.Name, "sp/chk-00000000000000000007/") {
			t.Fatalf("object %s is not the savepoint's own", o.Name)
		}
		want := m.Objects[i]
		want.Name = o.Name
		if o != want {
			t.Fatalf("object %d: %+v, want %+v", i, o, want)
		}
		b, err := dst.Get(ctx, o.Name)
		if err != nil || !bytes.Equal(b, data[i]) {
			t.Fatalf("object %s: %d bytes, %v", o.Name, len(b), err)
		}
	}
	if _, err := Verify(ctx, dst, "sp", 7); err != nil {
		t.Fatalf("Verify of the copy: %v", err)
	}
	if _, err := CopyNative(ctx, src, "job", 7, dst, "sp"); !errors.Is(err, ErrExists) {
		t.Fatalf("second copy: %v, want ErrExists", err)
	}
	after, _ := src.List(ctx, "")
	if len(after) != len(before) {
		t.Fatalf("the source changed: %d objects, then %d", len(before), len(after))
	}

	// Damaged source objects: the table (streamed) and the packed object (read whole).
	for _, i := range []int{0, 1} {
		name := m.Objects[i].Name
		b := append([]byte(nil), data[i]...)
		b[len(b)-1] ^= 1
		if err := src.Put(ctx, name, b); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(ctx, src, "job", 7); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("Verify with %s damaged: %v, want ErrCorruption", name, err)
		}
		d2, _ := newMemStorage(t)
		if _, err := CopyNative(ctx, src, "job", 7, d2, "sp"); !errors.Is(err, base.ErrCorruption) {
			t.Fatalf("copy with %s damaged: %v, want ErrCorruption", name, err)
		}
		if _, err := ReadManifest(ctx, d2, "sp", 7); !errors.Is(err, ErrNotFound) {
			t.Fatalf("copy with %s damaged committed: %v", name, err)
		}
		if err := src.Put(ctx, name, data[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := src.Delete(ctx, m.Objects[0].Name); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(ctx, src, "job", 7); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Verify with an object missing: %v, want ErrNotFound", err)
	}
	d3, _ := newMemStorage(t)
	if _, err := CopyNative(ctx, src, "job", 7, d3, "sp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("copy with an object missing: %v, want ErrNotFound", err)
	}
	if _, err := CopyNative(ctx, src, "job", 8, d3, "sp"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("copy of a missing checkpoint: %v, want ErrNotFound", err)
	}
	if _, err := CopyNative(ctx, src, "job", 7, d3, "bad/owner"); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("copy to a bad owner: %v, want ErrInvalidName", err)
	}
}

// BenchmarkCopyNative: a native savepoint of a checkpoint of one 64 MiB table between two
// DirStorages on one file system (read in 4 MiB ranges, CRC32C-checked, written and synced).
func BenchmarkCopyNative(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	src, err := NewDirStorage(root + "/src")
	if err != nil {
		b.Fatal(err)
	}
	table := make([]byte, 64<<20)
	for i := range table {
		table[i] = byte(i * 7)
	}
	kg := KeyGroupRange{End: 127}
	name := SharedName("job", kg, 1, "sst")
	if err := src.Put(ctx, name, table); err != nil {
		b.Fatal(err)
	}
	m := &Manifest{ID: 1, Epoch: 1, MaxParallelism: 128, KeyGroups: kg, Objects: []Object{{Name: name, Kind: KindTable,
		Size: int64(len(table)), CRC: crc32.Checksum(table, base.CRC32C), KeyGroups: kg}}}
	if err := Commit(ctx, src, "job", m); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(table)))
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		dst, err := NewDirStorage(fmt.Sprintf("%s/dst-%d", root, i))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := CopyNative(ctx, src, "job", 1, dst, "sp"); err != nil {
			b.Fatal(err)
		}
	}
}
