package lsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
)

// Manifest and CURRENT formats. The layouts are drawn in doc.go; every value
// here is part of the file format; do not change.
const (
	manifestMagic    = "STRATAMF"
	currentMagic     = "STRATACU"
	manifestVersion  = 1 // manifest format version
	currentVersion   = 2 // CURRENT format version (2: names the last persist point too)
	checksumCRC32C   = 1 // the only checksum type: CRC32C (Castagnoli)
	fileHeaderSize   = 16
	currentSize      = 56
	recordHeaderSize = 12
	// maxRecordSize bounds one manifest record's payload (bytes). A snapshot
	// is split into records below snapshotChunk; one edit stays far below.
	maxRecordSize = 64 << 20
	snapshotChunk = 1 << 20
)

// Edit tags: part of the file format; do not change.
const (
	tagNextFile   = 1 // uvarint next file number
	tagLastSeq    = 2 // uvarint last sequence number
	tagAddFile    = 3 // level, file number, FileMeta
	tagDeleteFile = 4 // level, file number
	tagPersist    = 5 // persist point: last sequence number, metadata length, metadata bytes
)

// MaxPersistMeta bounds the metadata blob of one persist point (bytes): 16
// MiB. Part of the manifest format (a longer blob is corruption); do not
// change.
const MaxPersistMeta = 16 << 20

// MaxLevels bounds Options.NumLevels and the level numbers a manifest may
// hold. Part of the manifest format; do not change.
const MaxLevels = 16

// FileMeta is what the manifest records about a table file: its number,
// size and the ranges the DB needs to place it without opening it.
type FileMeta struct {
	Num        uint64 // file number: the file is "<Num 6 digits>.sst" in Options.Dir
	Size       int64  // bytes
	Entries    int64  // number of entries
	Blocks     int64  // number of data blocks
	Tombstones int64  // entries of KindTombstone or KindMapEntryTombstone
	MinOrder   uint64 // smallest Order of the table: the file's, or an imported table's clip (doc.go, "Clipping")
	MaxOrder   uint64 // largest Order of the table (inclusive); as MinOrder
	MinSeq     uint64 // smallest sequence number
	MaxSeq     uint64 // largest sequence number
}

// newFile is one AddFile record of an edit.
type newFile struct {
	Level int
	Meta  FileMeta
}

// deletedFile is one DeleteFile record of an edit.
type deletedFile struct {
	Level int
	Num   uint64
}

// edit is one manifest record: a change to the set of table files and the
// counters. A zero field (HasNextFile false, …) leaves the value unchanged.
type edit struct {
	HasNextFile bool
	NextFile    uint64
	HasLastSeq  bool
	LastSeq     uint64
	Deleted     []deletedFile
	Added       []newFile
	// Persist, if not nil, makes the version after this edit (its file
	// changes applied) a persist point: recovery replays up to the last one.
	Persist *persistPoint
}

// persistPoint is what a persist-point record holds besides the version it
// marks: the caller's last sequence number and its opaque metadata.
type persistPoint struct {
	LastSeq uint64
	Meta    []byte
}

// encode appends the edit's payload to dst: deletions before additions, so a
// file deleted and re-added at another level in one edit (a move) applies.
func (e *edit) encode(dst []byte) []byte {
	if e.HasNextFile {
		dst = binary.AppendUvarint(dst, tagNextFile)
		dst = binary.AppendUvarint(dst, e.NextFile)
	}
	if e.HasLastSeq {
		dst = binary.AppendUvarint(dst, tagLastSeq)
		dst = binary.AppendUvarint(dst, e.LastSeq)
	}
	for _, d := range e.Deleted {
		dst = binary.AppendUvarint(dst, tagDeleteFile)
		dst = binary.AppendUvarint(dst, uint64(d.Level))
		dst = binary.AppendUvarint(dst, d.Num)
	}
	for _, a := range e.Added {
		m := &a.Meta
		dst = binary.AppendUvarint(dst, tagAddFile)
		dst = binary.AppendUvarint(dst, uint64(a.Level))
		dst = binary.AppendUvarint(dst, m.Num)
		dst = binary.AppendUvarint(dst, uint64(m.Size))
		dst = binary.AppendUvarint(dst, uint64(m.Entries))
		dst = binary.AppendUvarint(dst, uint64(m.Blocks))
		dst = binary.AppendUvarint(dst, uint64(m.Tombstones))
		dst = binary.LittleEndian.AppendUint64(dst, m.MinOrder)
		dst = binary.LittleEndian.AppendUint64(dst, m.MaxOrder)
		dst = binary.AppendUvarint(dst, m.MinSeq)
		dst = binary.AppendUvarint(dst, m.MaxSeq)
	}
	if p := e.Persist; p != nil {
		dst = binary.AppendUvarint(dst, tagPersist)
		dst = binary.AppendUvarint(dst, p.LastSeq)
		dst = binary.AppendUvarint(dst, uint64(len(p.Meta)))
		dst = append(dst, p.Meta...)
	}
	return dst
}

var errShortEdit = errors.New("truncated field")

type editDecoder struct {
	b   []byte
	err error
}

func (d *editDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShortEdit
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *editDecoder) int63() int64 {
	v := d.uvarint()
	if v > 1<<62 {
		d.err = fmt.Errorf("count %d out of range", v)
		return 0
	}
	return int64(v)
}

func (d *editDecoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.err = errShortEdit
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *editDecoder) level() int {
	v := d.uvarint()
	if d.err == nil && v >= MaxLevels {
		d.err = fmt.Errorf("level %d >= %d", v, MaxLevels)
	}
	return int(v)
}

// decodeEdit decodes one record payload. It checks the payload's own
// consistency (known tags, no truncated fields, no trailing bytes, valid
// levels and ranges), not how the edit fits the current version. The error is
// plain; the caller wraps it with the file and offset.
func decodeEdit(p []byte) (edit, error) {
	var e edit
	d := editDecoder{b: p}
	if len(p) == 0 {
		return e, errors.New("empty edit")
	}
	for len(d.b) > 0 && d.err == nil {
		tag := d.uvarint()
		switch tag {
		case tagNextFile:
			if e.HasNextFile {
				return e, errors.New("duplicate next-file field")
			}
			e.HasNextFile, e.NextFile = true, d.uvarint()
		case tagLastSeq:
			if e.HasLastSeq {
				return e, errors.New("duplicate last-sequence field")
			}
			e.HasLastSeq, e.LastSeq = true, d.uvarint()
		case tagDeleteFile:
			df := deletedFile{Level: d.level(), Num: d.uvarint()}
			if d.err == nil && df.Num == 0 {
				return e, errors.New("delete of file number 0")
			}
			e.Deleted = append(e.Deleted, df)
		case tagAddFile:
			var a newFile
			a.Level = d.level()
			m := &a.Meta
			m.Num = d.uvarint()
			m.Size = d.int63()
			m.Entries = d.int63()
			m.Blocks = d.int63()
			m.Tombstones = d.int63()
			m.MinOrder = d.fixed64()
			m.MaxOrder = d.fixed64()
			m.MinSeq = d.uvarint()
			m.MaxSeq = d.uvarint()
			if d.err != nil {
				break
			}
			switch {
			case m.Num == 0:
				return e, errors.New("add of file number 0")
			case m.MinOrder > m.MaxOrder:
				return e, fmt.Errorf("file %d: order range [%#x, %#x] inverted", m.Num, m.MinOrder, m.MaxOrder)
			case m.MinSeq > m.MaxSeq:
				return e, fmt.Errorf("file %d: sequence range [%d, %d] inverted", m.Num, m.MinSeq, m.MaxSeq)
			case m.Tombstones > m.Entries:
				return e, fmt.Errorf("file %d: %d tombstones > %d entries", m.Num, m.Tombstones, m.Entries)
			}
			e.Added = append(e.Added, a)
		case tagPersist:
			if e.Persist != nil {
				return e, errors.New("duplicate persist-point field")
			}
			p := &persistPoint{LastSeq: d.uvarint()}
			n := d.uvarint()
			if d.err != nil {
				break
			}
			if n > MaxPersistMeta {
				return e, fmt.Errorf("persist-point metadata of %d bytes exceeds %d", n, MaxPersistMeta)
			}
			if uint64(len(d.b)) < n {
				d.err = errShortEdit
				break
			}
			p.Meta = bytes.Clone(d.b[:n])
			if p.Meta == nil {
				p.Meta = []byte{}
			}
			d.b = d.b[n:]
			e.Persist = p
		default:
			if d.err == nil {
				return e, fmt.Errorf("unknown tag %d", tag)
			}
		}
	}
	if d.err != nil {
		return e, d.err
	}
	return e, nil
}

// appendRecord appends one framed record holding payload to dst:
// length, CRC32C of the length bytes, CRC32C of the payload, payload.
func appendRecord(dst, payload []byte) []byte {
	var h [recordHeaderSize]byte
	binary.LittleEndian.PutUint32(h[0:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(h[4:], crc32.Checksum(h[0:4], base.CRC32C))
	binary.LittleEndian.PutUint32(h[8:], crc32.Checksum(payload, base.CRC32C))
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// appendFileHeader appends the 16-byte header of a manifest (magic
// STRATAMF, manifestVersion) or CURRENT (STRATACU, currentVersion) file.
func appendFileHeader(dst []byte, magic string) []byte {
	start := len(dst)
	dst = append(dst, magic...)
	dst = binary.LittleEndian.AppendUint16(dst, headerVersion(magic))
	dst = append(dst, checksumCRC32C, 0)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], base.CRC32C))
}

// headerVersion is the format version this code writes and reads for the
// file of magic.
func headerVersion(magic string) uint16 {
	if magic == currentMagic {
		return currentVersion
	}
	return manifestVersion
}

// checkFileHeader checks a 16-byte file header in the order the conventions
// fix: size, magic, format version, checksum type, header CRC.
func checkFileHeader(name string, b []byte, magic string) error {
	formatVersion := headerVersion(magic)
	if len(b) < fileHeaderSize {
		return base.Corrupt(name, 0, base.ErrTruncated, "file of %d bytes is shorter than its %d-byte header", len(b), fileHeaderSize)
	}
	if string(b[:8]) != magic {
		return base.Corrupt(name, 0, base.ErrBadMagic, "magic %q, want %q", b[:8], magic)
	}
	if v := binary.LittleEndian.Uint16(b[8:]); v != formatVersion {
		return base.Corrupt(name, 8, base.ErrFormatVersion, "format version %d, this code reads %d", v, formatVersion)
	}
	if c := b[10]; c != checksumCRC32C {
		return base.Corrupt(name, 10, base.ErrChecksumType, "checksum type %d, want %d (CRC32C)", c, checksumCRC32C)
	}
	if got, want := binary.LittleEndian.Uint32(b[12:]), crc32.Checksum(b[:12], base.CRC32C); got != want {
		return base.Corrupt(name, 0, base.ErrChecksum, "header crc32c %#08x, computed %#08x", got, want)
	}
	if b[11] != 0 {
		return base.Corrupt(name, 0, nil, "reserved header byte %#x is not zero", b[11])
	}
	return nil
}

// recordPos locates one manifest record: its offset, the offset just past
// it, and the CRC32C of its payload (as in its header). CURRENT names the
// last persist point by its End, LastSeq and CRC.
type recordPos struct {
	Off, End int64
	CRC      uint32
}

// decodeManifest decodes a whole manifest file's bytes into its edits, calling
// apply for each in order with the record's position. A damaged record is
// tolerated only as a torn tail, that is when no complete record can follow
// it (doc.go, "Torn tails"); then decodeManifest returns the offset where the
// valid prefix ends and torn = true. Any other damage is a *base.CorruptionError
// naming name and the record's offset. An error from apply is returned as is.
func decodeManifest(name string, b []byte, apply func(r recordPos, e *edit) error) (validEnd int64, torn bool, err error) {
	if err := checkFileHeader(name, b, manifestMagic); err != nil {
		return 0, false, err
	}
	off := int64(fileHeaderSize)
	size := int64(len(b))
	for off < size {
		rest := b[off:]
		if len(rest) < recordHeaderSize {
			return off, true, nil // header torn
		}
		n := binary.LittleEndian.Uint32(rest[0:])
		if crc32.Checksum(rest[0:4], base.CRC32C) != binary.LittleEndian.Uint32(rest[4:]) {
			if allZero(rest) {
				return off, true, nil // a zero-filled tail (preallocated or unwritten sectors)
			}
			return off, false, base.Corrupt(name, off, base.ErrChecksum, "record length")
		}
		if n > maxRecordSize {
			return off, false, base.Corrupt(name, off, nil, "record length %d exceeds %d", n, maxRecordSize)
		}
		end := off + recordHeaderSize + int64(n)
		if end > size {
			return off, true, nil // payload torn
		}
		payload := rest[recordHeaderSize : recordHeaderSize+int64(n)]
		crc := crc32.Checksum(payload, base.CRC32C)
		if crc != binary.LittleEndian.Uint32(rest[8:]) {
			if end == size {
				return off, true, nil // the last record, partly written
			}
			return off, false, base.Corrupt(name, off, base.ErrChecksum, "record of %d bytes", n)
		}
		e, derr := decodeEdit(payload)
		if derr != nil {
			return off, false, base.Corrupt(name, off, nil, "bad edit: %v", derr)
		}
		if err := apply(recordPos{Off: off, End: end, CRC: crc}, &e); err != nil {
			return off, false, err
		}
		off = end
	}
	return off, false, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// current is what a CURRENT file says (doc.go, "CURRENT layout"): the live
// manifest, how many of its bytes were synced when CURRENT was written, and
// the last persist-point record written to it by then.
type current struct {
	Manifest uint64 // manifest file number, > 0
	// Synced is the manifest's length (a record boundary) when this CURRENT
	// was written: every byte below it was synced before, so a manifest whose
	// valid records end before Synced lost synced bytes.
	Synced int64
	// PersistEnd is the offset just past the last persist-point record in
	// the manifest when this CURRENT was written; 0 if it held none. That
	// record must be found with PersistSeq as its lastSeq and PersistCRC as
	// its payload CRC32C.
	PersistEnd int64
	PersistSeq uint64
	PersistCRC uint32
}

// encodeCurrent returns the currentSize bytes of a CURRENT file for c: the
// file header, manifest number, synced length, persist end, persist lastSeq
// (u64 LE each), persist-record CRC (u32 LE), then CRC32C of everything
// before.
func encodeCurrent(c current) []byte {
	b := appendFileHeader(make([]byte, 0, currentSize), currentMagic)
	b = binary.LittleEndian.AppendUint64(b, c.Manifest)
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Synced))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.PersistEnd))
	b = binary.LittleEndian.AppendUint64(b, c.PersistSeq)
	b = binary.LittleEndian.AppendUint32(b, c.PersistCRC)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, base.CRC32C))
}

// decodeCurrent checks a CURRENT file's bytes (header, size, CRC, then the
// fields' ranges) and returns what it says.
func decodeCurrent(name string, b []byte) (current, error) {
	var c current
	if err := checkFileHeader(name, b, currentMagic); err != nil {
		return c, err
	}
	if len(b) != currentSize {
		var cause error // a longer file is damage too, but not a truncation
		if len(b) < currentSize {
			cause = base.ErrTruncated
		}
		return c, base.Corrupt(name, fileHeaderSize, cause, "CURRENT is %d bytes, want %d", len(b), currentSize)
	}
	body := b[:currentSize-4]
	if got, want := binary.LittleEndian.Uint32(b[currentSize-4:]), crc32.Checksum(body, base.CRC32C); got != want {
		return c, base.Corrupt(name, fileHeaderSize, base.ErrChecksum, "CURRENT %#08x, computed %#08x", got, want)
	}
	le := binary.LittleEndian
	c.Manifest = le.Uint64(b[16:])
	synced, pend := le.Uint64(b[24:]), le.Uint64(b[32:])
	c.PersistSeq, c.PersistCRC = le.Uint64(b[40:]), le.Uint32(b[48:])
	switch {
	case c.Manifest == 0:
		return c, base.Corrupt(name, 16, nil, "manifest number 0")
	case synced < fileHeaderSize || synced > 1<<62:
		return c, base.Corrupt(name, 24, nil, "synced manifest length %d out of range", synced)
	case pend != 0 && (pend < fileHeaderSize+recordHeaderSize || pend > synced):
		return c, base.Corrupt(name, 32, nil, "persist point end %d outside the synced %d bytes", pend, synced)
	case pend == 0 && (c.PersistSeq != 0 || c.PersistCRC != 0):
		return c, base.Corrupt(name, 40, nil, "no persist point but a persist sequence or CRC")
	}
	c.Synced, c.PersistEnd = int64(synced), int64(pend)
	return c, nil
}

// File names inside Options.Dir.
const (
	currentName     = "CURRENT"
	currentTempName = "CURRENT.tmp"
	lockName        = "LOCK"
	tableSuffix     = ".sst"
	manifestPrefix  = "MANIFEST-"
)

type fileKind uint8

const (
	kindUnknown fileKind = iota
	kindTable
	kindManifest
	kindCurrent
	kindTemp
	kindLock
)

func tableName(dir string, num uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%06d%s", num, tableSuffix))
}

func manifestName(dir string, num uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%06d", manifestPrefix, num))
}

// maxFileNum bounds the file numbers the DB writes (it would take 2^62 files
// to reach it): a name with a larger number, or a number not spelled as the
// DB spells it ("%06d"), is not the DB's.
const maxFileNum = 1 << 62

// parseFileName classifies a directory entry. Names the DB does not write
// are kindUnknown and never deleted; nor is LOCK (kindLock).
func parseFileName(name string) (fileKind, uint64) {
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == 0 || n >= maxFileNum || fmt.Sprintf("%06d", n) != s {
			return 0
		}
		return n
	}
	switch {
	case name == currentName:
		return kindCurrent, 0
	case name == currentTempName:
		return kindTemp, 0
	case name == lockName:
		return kindLock, 0
	case strings.HasPrefix(name, manifestPrefix):
		if n := num(name[len(manifestPrefix):]); n > 0 {
			return kindManifest, n
		}
	case strings.HasSuffix(name, tableSuffix):
		if n := num(name[:len(name)-len(tableSuffix)]); n > 0 {
			return kindTable, n
		}
	}
	return kindUnknown, 0
}

// writeFileSynced creates name, writes b, syncs and closes it. On failure it
// removes the partial file.
func writeFileSynced(fs vfs.FS, name string, b []byte) error {
	f, err := fs.Create(name)
	if err != nil {
		return ioError("create", name, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		fs.Remove(name)
		return ioError("write", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		fs.Remove(name)
		return ioError("sync", name, err)
	}
	if err := f.Close(); err != nil {
		fs.Remove(name)
		return ioError("close", name, err)
	}
	return nil
}

// syncDir makes dir's entries durable (vfs.SyncDir), its error wrapped as an *IOError.
func syncDir(fs vfs.FS, dir string) error {
	if err := vfs.SyncDir(fs, dir); err != nil {
		return ioError("sync directory", dir, err)
	}
	return nil
}
