package engine

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-db/strata/internal/base"
	goldenfile "github.com/strata-db/strata/internal/golden"
)

// goldenWriter is the content of the root's testdata/writer-v1.bin.
var goldenWriter = WriterRecord{Epoch: 5, Point: 40, Writer: 0xfedcba9876543210}

// TestGoldenWriterFileV1: testdata/writer-v1.bin decodes to goldenWriter and Encode writes its
// bytes (-update creates it; a format change needs a new version and a new file).
func TestGoldenWriterFileV1(t *testing.T) {
	b := goldenfile.Check(t, filepath.Join("..", "..", "testdata", "writer-v1.bin"), goldenWriter.Encode(), *updateGolden)
	w, err := DecodeWriterRecord("WRITER", b)
	if err != nil || w != goldenWriter {
		t.Fatalf("decoded %+v, %v; want %+v", w, err, goldenWriter)
	}
}

// TestWriterFileDamage: each damage of the writer file is an ErrCorruption with its cause (the
// root's TestWriterFileOpen: Open of a directory holding a damaged one fails with it).
func TestWriterFileDamage(t *testing.T) {
	good := goldenWriter.Encode()
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
		{"long", func(b []byte) []byte { return append(b, 1) }, base.ErrCorruption},
		{"zero writer", func([]byte) []byte { return WriterRecord{Epoch: 1}.Encode() }, base.ErrCorruption},
	} {
		if _, err := DecodeWriterRecord("WRITER", c.b(slices.Clone(good))); !errors.Is(err, c.cause) || !errors.Is(err, base.ErrCorruption) {
			t.Errorf("%s: %v, want ErrCorruption with %v", c.name, err, c.cause)
		}
	}
}
