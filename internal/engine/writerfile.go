package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"path/filepath"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// The writer file: what a restored Store keeps of its place among the writers of its
// checkpoint lineage (checkpoint package doc, "Writer fencing"), so that the Store, reopened
// from its directory, is the same writer and not a zombie of itself. Restore writes it once,
// before the directory opens (the RESTORING marker is still there); Open reads it. A directory
// never restored has none: its writer epoch is 0.
//
//	0          8         10   11   12       20       28       36
//	+----------+---------+----+----+--------+--------+--------+--------+
//	| magic    | version | ck | 0  | epoch  | point  | writer | crc32c |
//	| STRATAWR | u16 = 1 | =1 |    | u64    | u64    | u64    | u32    |
//	+----------+---------+----+----+--------+--------+--------+--------+
//	all integers little endian; crc32c covers bytes 0..35; exactly 40 bytes.
//	epoch: the writer epoch the Store claims (>= 1); point: the newest checkpoint restored,
//	the fence's point; writer: the Store's random non-zero writer id.
//
// Checked in the order magic (ErrBadMagic), size (ErrTruncated), version (ErrFormatVersion),
// checksum type (ErrChecksumType), reserved byte, CRC32C (ErrChecksum), epoch and writer
// non-zero — each an ErrCorruption naming the file. Golden file: the root's testdata/writer-v1.bin.
const (
	// WriterFileName is the writer file's name in a Store's directory.
	WriterFileName    = "WRITER"
	writerFileMagic   = "STRATAWR"
	writerFileVersion = 1 // part of the format; do not change
	writerFileCRC32C  = 1 // checksum type; part of the format
	writerFileSize    = 40
)

// WriterRecord is the content of the writer file (the root's Restore writes it, Open reads it).
type WriterRecord struct {
	Epoch  uint64 // the writer epoch the Store claims (>= 1)
	Point  uint64 // the newest checkpoint restored: the fence's point
	Writer uint64 // the Store's random non-zero writer id
}

// NewWriterID returns a random non-zero writer id. Safe for concurrent use.
func NewWriterID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// Encode returns the writer file's bytes (writerFileSize).
func (w WriterRecord) Encode() []byte {
	le := binary.LittleEndian
	b := make([]byte, 12, writerFileSize)
	copy(b, writerFileMagic)
	le.PutUint16(b[8:], writerFileVersion)
	b[10] = writerFileCRC32C
	b = le.AppendUint64(b, w.Epoch)
	b = le.AppendUint64(b, w.Point)
	b = le.AppendUint64(b, w.Writer)
	return le.AppendUint32(b, crc32.Checksum(b, base.CRC32C))
}

// DecodeWriterRecord decodes the writer file's bytes (file names it in errors).
func DecodeWriterRecord(file string, b []byte) (WriterRecord, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt(file, int64(off), cause, format, args...)
	}
	le := binary.LittleEndian
	switch {
	case len(b) < 8:
		return WriterRecord{}, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
	case string(b[:8]) != writerFileMagic:
		return WriterRecord{}, bad(base.ErrBadMagic, 0, "magic %q, want %q", b[:8], writerFileMagic)
	case len(b) < writerFileSize:
		return WriterRecord{}, bad(base.ErrTruncated, 0, "%d bytes, the file has %d", len(b), writerFileSize)
	case len(b) > writerFileSize:
		return WriterRecord{}, bad(nil, writerFileSize, "%d bytes, the file has %d", len(b), writerFileSize)
	case le.Uint16(b[8:]) != writerFileVersion:
		return WriterRecord{}, bad(base.ErrFormatVersion, 8, "format version %d, this code reads %d", le.Uint16(b[8:]), writerFileVersion)
	case b[10] != writerFileCRC32C:
		return WriterRecord{}, bad(base.ErrChecksumType, 10, "checksum type %d, want %d (CRC32C)", b[10], writerFileCRC32C)
	case b[11] != 0:
		return WriterRecord{}, bad(nil, 11, "reserved byte %#x is not zero", b[11])
	}
	if got, want := crc32.Checksum(b[:writerFileSize-4], base.CRC32C), le.Uint32(b[writerFileSize-4:]); got != want {
		return WriterRecord{}, bad(base.ErrChecksum, writerFileSize-4, "crc32c %#08x, stored %#08x", got, want)
	}
	w := WriterRecord{Epoch: le.Uint64(b[12:]), Point: le.Uint64(b[20:]), Writer: le.Uint64(b[28:])}
	if w.Epoch == 0 || w.Writer == 0 {
		return WriterRecord{}, bad(nil, 12, "epoch %d, writer %#x: both must be non-zero", w.Epoch, w.Writer)
	}
	return w, nil
}

// WriteWriterFile makes dir/WRITER durable with w's bytes (Restore, before the directory is
// complete: a crash leaves it with the RESTORING marker, which Restore removes with it).
// Errors: the file system's.
func WriteWriterFile(fsys vfs.FS, dir string, w WriterRecord) error {
	path := filepath.Join(dir, WriterFileName)
	f, err := fsys.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(w.Encode())
	err = vfs.SyncClose(f, err)
	if err == nil {
		err = vfs.SyncDir(fsys, dir)
	}
	return err
}

// ReadWriterFile reads dir/WRITER; ok is false when there is none (a directory never
// restored). Errors: ErrCorruption naming the file, the file system's.
func ReadWriterFile(fsys vfs.FS, dir string) (w WriterRecord, ok bool, err error) {
	f, err := fsys.Open(filepath.Join(dir, WriterFileName))
	if errors.Is(err, fs.ErrNotExist) {
		return WriterRecord{}, false, nil
	}
	if err != nil {
		return WriterRecord{}, false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.NewSectionReader(f, 0, writerFileSize+1))
	if err != nil {
		return WriterRecord{}, false, fmt.Errorf("%s: %w", WriterFileName, err)
	}
	w, err = DecodeWriterRecord(WriterFileName, b)
	return w, err == nil, err
}
