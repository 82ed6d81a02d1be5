package strata

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/internal/vfs"
)

// TestWriterFileOpen: a directory never restored has no writer (epoch 0); Open of one holding
// a writer file is that writer, due to fence; Open of one holding a damaged writer file fails
// with ErrCorruption (the file's decoding is tested in internal/engine: TestWriterFileDamage).
func TestWriterFileOpen(t *testing.T) {
	golden := engine.WriterRecord{Epoch: 5, Point: 40, Writer: 0xfedcba9876543210}
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
	if err := engine.WriteWriterFile(mem, dir, golden); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.writerID != golden.Writer || s.epoch != golden.Epoch || s.fencePoint != golden.Point || !s.fenceDue {
		t.Fatalf("reopened: writer %#x epoch %d point %d due %v", s.writerID, s.epoch, s.fencePoint, s.fenceDue)
	}
	s.Close()
	f, _ := mem.Create(filepath.Join(dir, engine.WriterFileName))
	f.Write(golden.Encode()[:20])
	f.Close()
	if _, err := Open(dir, o); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Open with a damaged WRITER: %v, want ErrCorruption", err)
	}
}
