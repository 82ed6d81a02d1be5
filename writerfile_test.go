package strata

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// goldenWriter is the content of testdata/writer-v1.bin.
var goldenWriter = writerRecord{epoch: 5, point: 40, writer: 0xfedcba9876543210}

// TestGoldenWriterFileV1: testdata/writer-v1.bin decodes to goldenWriter and encode writes its
// bytes (-update creates it; a format change needs a new version and a new file).
func TestGoldenWriterFileV1(t *testing.T) {
	path := filepath.Join("testdata", "writer-v1.bin")
	if *updateGolden {
		if err := os.WriteFile(path, goldenWriter.encode(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := decodeWriterRecord("WRITER", b)
	if err != nil || w != goldenWriter {
		t.Fatalf("decoded %+v, %v; want %+v", w, err, goldenWriter)
	}
	if enc := goldenWriter.encode(); !bytes.Equal(enc, b) {
		t.Errorf("encode:\n got %x\nwant %x", enc, b)
	}
}

// TestWriterFileDamage: each damage of the writer file is an ErrCorruption with its cause,
// and Open of a directory holding a damaged one fails with it; a missing one is no writer.
func TestWriterFileDamage(t *testing.T) {
	good := goldenWriter.encode()
	for _, c := range []struct {
		name  string
		b     func([]byte) []byte
		cause error
	}{
		{"short", func(b []byte) []byte { return b[:4] }, base.ErrTruncated},
		{"magic", func(b []byte) []byte { b[1] ^= 1; return b }, base.ErrBadMagic},
		{"truncated", func(b []byte) []byte { return b[:30] }, base.ErrTruncated},
		{"version", func(b []byte) []byte { b[8] = 9; return b }, base.ErrFormatVersion},
		{"checksum type", func(b []byte) []byte { b[10] = 0; return b }, base.ErrChecksumType},
		{"crc", func(b []byte) []byte { b[30] ^= 4; return b }, base.ErrChecksum},
		{"long", func(b []byte) []byte { return append(b, 1) }, ErrCorruption},
		{"zero writer", func([]byte) []byte { return writerRecord{epoch: 1}.encode() }, ErrCorruption},
	} {
		if _, err := decodeWriterRecord("WRITER", c.b(slices.Clone(good))); !errors.Is(err, c.cause) || !errors.Is(err, ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption with %v", c.name, err, c.cause)
		}
	}
	mem := vfs.NewMem()
	dir := "/s"
	o := Options{MaxParallelism: 128, MemoryBudget: 64 << 20}
	o.fs = mem
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.writerID != 0 || s.epoch != 0 {
		t.Fatalf("a directory never restored: writer %#x epoch %d", s.writerID, s.epoch)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := writeWriterFile(mem, dir, goldenWriter); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.writerID != goldenWriter.writer || s.epoch != goldenWriter.epoch || s.fencePoint != goldenWriter.point || !s.fenceDue {
		t.Fatalf("reopened: writer %#x epoch %d point %d due %v", s.writerID, s.epoch, s.fencePoint, s.fenceDue)
	}
	s.Close()
	f, _ := mem.Create(filepath.Join(dir, writerFileName))
	f.Write(good[:20])
	f.Close()
	if _, err := Open(dir, o); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Open with a damaged WRITER: %v, want ErrCorruption", err)
	}
}
