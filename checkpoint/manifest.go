package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/strata-db/strata/internal/base"
)

// The manifest format; its layout is drawn in doc.go ("Manifest layout").
const (
	manifestMagic    = "STRATACK"
	manifestVersion1 = 1 // no LastSeq, no levels; read only; part of the format; do not change
	manifestVersion2 = 2 // no operator state; read only; part of the format; do not change
	manifestVersion3 = 3 // no timer objects (kind 4); read only; part of the format; do not change
	manifestVersion  = 4 // what Encode writes without a canonical savepoint; part of the format; do not change
	manifestVersion5 = 5 // version 4 plus kind 5 (KindCanonical); written only when one is listed; part of the format; do not change
	manifestCRC32C   = 1 // checksum type 1 = CRC32C; part of the format; do not change
	manifestHeader   = 16
	manifestFixed    = 48 // fixed payload fields before the registry (versions 2 to 4)
	manifestFixedV1  = 40 // the same in version 1, which lacks LastSeq
	objectFixed      = 52 // bytes of an object entry besides its name (every version)

	// MaxLevel is the largest LSM level an Object may record (levels are 0..MaxLevel): the
	// level takes the 4 high bits of an object's flags byte.
	MaxLevel = 15

	// MaxManifestPayload bounds a manifest's payload (256 MiB), so a damaged length cannot make
	// a reader allocate more.
	MaxManifestPayload = 256 << 20
	// MaxBlob bounds the state registry, the input position and the operator state (64 MiB
	// each).
	MaxBlob = 64 << 20
	// MaxParallelismLimit is the largest MaxParallelism a manifest may record (1<<15, Flink's
	// UPPER_BOUND_MAX_PARALLELISM).
	MaxParallelismLimit = 1 << 15
)

// ObjectKind says what an object a manifest lists holds. Part of the manifest format; do not
// change the values (a new kind needs a new format version, since a reader of this version
// refuses an unknown one).
type ObjectKind uint8

const (
	// KindTable is an sstable (an LSM file, or a sealed segment or slice written as one).
	KindTable ObjectKind = 1
	// KindChangelog is changelog (DSTL) data: a whole changelog object or a store's range of a
	// packed one.
	KindChangelog ObjectKind = 2
	// KindOther is anything else the engine stores (a copied mutable part, an index).
	KindOther ObjectKind = 3
	// KindTimers is the timers of one key group (KeyGroups.Start == End): one section of the
	// timer package's format (STRATATM), packed in the checkpoint's timer object with the
	// other key groups' sections. Format version 4 and later.
	KindTimers ObjectKind = 4
	// KindCanonical is a canonical savepoint (canonical.go, doc.go "Canonical savepoint
	// layout"): a stream of logical entries of KeyGroups, independent of the engine's file
	// formats, read by key group through its own index. Not packed. Format version 5 (a
	// manifest listing one is written as version 5, every other as version 4, so readers of
	// version 4 refuse it rather than restore a savepoint without its state).
	KindCanonical ObjectKind = 5
)

// String returns "table", "changelog", "other", "timers", "canonical" or "kind(<n>)".
func (k ObjectKind) String() string {
	switch k {
	case KindTable:
		return "table"
	case KindChangelog:
		return "changelog"
	case KindOther:
		return "other"
	case KindTimers:
		return "timers"
	case KindCanonical:
		return "canonical"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// version returns the format version Encode writes m in: 5 when m lists a canonical
// savepoint, 4 otherwise.
func (m *Manifest) version() uint16 {
	for i := range m.Objects {
		if m.Objects[i].Kind == KindCanonical {
			return manifestVersion5
		}
	}
	return manifestVersion
}

func (k ObjectKind) valid() bool { return k >= KindTable && k <= KindCanonical }

// The flags byte of an object entry; part of the format. Version 1 knows only flagPacked
// (every other bit 0); version 2 adds the level in bits 4..7 and keeps bits 1..3 zero, and
// versions 3 and 4 keep version 2's flags.
const (
	flagPacked     = 1 << 0
	flagLevelShift = 4
	flagLevelMask  = 0xf << flagLevelShift
	flagsKnownV1   = flagPacked
	flagsKnownV2   = flagPacked | flagLevelMask
)

// Object is one object a checkpoint references: where its bytes are, how to check them, and
// which keys they can hold, so restore picks objects by key-group range (rescaling) without
// opening them.
type Object struct {
	// Name is the object's full name in the Storage (ValidateName), possibly under another
	// owner's prefix (a checkpoint restored in NO_CLAIM mode references its source's objects).
	Name string
	// Kind is what the object holds.
	Kind ObjectKind
	// Size is the length of the whole object in bytes (also when Packed).
	Size int64
	// CRC is the CRC32C (base.CRC32C) of the bytes this entry covers: the whole object, or
	// [Offset, Offset+Length) when Packed.
	CRC uint32
	// KeyGroups is the range of key groups the covered bytes may hold keys of (within
	// [0, Manifest.MaxParallelism)); it may be wider than the manifest's own range after a
	// rescale.
	KeyGroups KeyGroupRange
	// MinOrder and MaxOrder bound the order hashes (base.OrderHash) of the covered entries,
	// inclusive; MinOrder <= MaxOrder. For a KindChangelog segment they bound its records'
	// sequence numbers instead (package changelog, doc.go): a changelog segment holds records
	// of many order hashes, and restore selects segments by KeyGroups and by sequence. A
	// KindTimers section's are the smallest and largest timestamp it holds, as uint64 of the
	// int64 with its sign bit flipped (so the order is the timestamps').
	MinOrder, MaxOrder uint64
	// Packed says the entry covers only [Offset, Offset+Length) of the object: one changelog
	// object per persist per process holds the changes of all its stores (DESIGN §4, item 3;
	// Flink's per-TaskManager grouping). Offset and Length are zero unless Packed.
	Packed         bool
	Offset, Length int64
	// Level is the LSM level (0..MaxLevel) the table held in the checkpointed Store, so
	// restore places the table file at that level rather than re-deriving the LSM's shape. It
	// is 0 unless Kind is KindTable. Version 1 manifests lack it and decode with 0.
	Level uint8
}

// Manifest is one checkpoint of one Store: everything needed to restore it, written last and
// with Storage.Create, so that a checkpoint exists completely or not at all (doc.go,
// "Storage protocol"). The design follows SlateDB's manifest (RFC 0001: writer epochs,
// create-only ids) and Flink's checkpoint metadata.
type Manifest struct {
	// ID is the checkpoint id (Flink's checkpoint id), at least 1. It is also in the
	// manifest's name (ManifestName).
	ID uint64
	// Parent is the id of the checkpoint this one is incremental on (its objects may be
	// referenced again), 0 for none.
	Parent uint64
	// Epoch is the writer epoch: it grows with every restart or restore of the lineage, so a
	// reader can tell which of two writers of one lineage came later (SlateDB's writer_epoch).
	Epoch uint64
	// CreatedUnixMilli is when the checkpoint was cut, in Unix milliseconds.
	CreatedUnixMilli int64
	// MaxParallelism is the number of key groups, 1..MaxParallelismLimit; a restore into a
	// different one is refused.
	MaxParallelism uint32
	// KeyGroups is the range the Store owned; End < MaxParallelism.
	KeyGroups KeyGroupRange
	// LastSeq is the Store's last sequence number at the cut (the largest one it had
	// assigned; 0 if none), so a restored Store continues above every sequence number its
	// tables hold. Version 1 manifests lack it and decode with 0.
	LastSeq uint64
	// Registry is the state registry, opaque here (the root package's registry blob); at most
	// MaxBlob bytes. Empty decodes as nil.
	Registry []byte
	// InputPosition is the job's source position (e.g. Kafka offsets) at the cut, opaque here;
	// at most MaxBlob bytes. Empty decodes as nil.
	InputPosition []byte
	// OperatorState is the Store's operator and broadcast state at the cut (the root package's
	// operator state blob), opaque here: small, so it lives in the manifest rather than in an
	// object of its own, and a restore that reads the manifests of every old subtask has it
	// without another read. At most MaxBlob bytes. Empty decodes as nil; version 1 and 2
	// manifests lack it.
	OperatorState []byte
	// Objects lists every object the checkpoint needs, in the writer's order. One object may
	// appear several times with different Packed ranges.
	Objects []Object
}

// errInvalid is the cause of every error of Manifest.Validate.
var errInvalid = errors.New("checkpoint: invalid manifest")

// Validate reports whether m can be encoded: every rule the decoder checks (doc.go, "Manifest
// layout"). Its errors wrap an unexported cause and name the field.
func (m *Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
	}
	switch {
	case m.ID == 0:
		return bad("ID is 0")
	case m.MaxParallelism < 1 || m.MaxParallelism > MaxParallelismLimit:
		return bad("MaxParallelism %d not in [1, %d]", m.MaxParallelism, MaxParallelismLimit)
	case m.KeyGroups.Start < 0 || m.KeyGroups.Start > m.KeyGroups.End || uint32(m.KeyGroups.End) >= m.MaxParallelism:
		return bad("KeyGroups [%d, %d] not inside [0, %d)", m.KeyGroups.Start, m.KeyGroups.End, m.MaxParallelism)
	case len(m.Registry) > MaxBlob:
		return bad("Registry of %d bytes, more than %d", len(m.Registry), MaxBlob)
	case len(m.InputPosition) > MaxBlob:
		return bad("InputPosition of %d bytes, more than %d", len(m.InputPosition), MaxBlob)
	case len(m.OperatorState) > MaxBlob:
		return bad("OperatorState of %d bytes, more than %d", len(m.OperatorState), MaxBlob)
	}
	size := manifestFixed + 16 + len(m.Registry) + len(m.InputPosition) + len(m.OperatorState)
	for i := range m.Objects {
		if err := m.checkObject(&m.Objects[i]); err != nil {
			return bad("object %d: %v", i, err)
		}
		size += objectFixed + len(m.Objects[i].Name)
		if size > MaxManifestPayload {
			return bad("payload of more than %d bytes", MaxManifestPayload)
		}
	}
	return nil
}

// checkObject checks one entry against the rules of the format.
func (m *Manifest) checkObject(o *Object) error {
	if err := ValidateName(o.Name); err != nil {
		return err
	}
	switch {
	case !o.Kind.valid():
		return fmt.Errorf("unknown kind %d", o.Kind)
	case o.Size < 0:
		return fmt.Errorf("negative size %d", o.Size)
	case o.KeyGroups.Start < 0 || o.KeyGroups.Start > o.KeyGroups.End || uint32(o.KeyGroups.End) >= m.MaxParallelism:
		return fmt.Errorf("key groups [%d, %d] not inside [0, %d)", o.KeyGroups.Start, o.KeyGroups.End, m.MaxParallelism)
	case o.MinOrder > o.MaxOrder:
		return fmt.Errorf("order range [%#x, %#x] inverted", o.MinOrder, o.MaxOrder)
	case !o.Packed && (o.Offset != 0 || o.Length != 0):
		return fmt.Errorf("offset %d and length %d without Packed", o.Offset, o.Length)
	case o.Packed && (o.Offset < 0 || o.Length < 0 || o.Offset > o.Size || o.Length > o.Size-o.Offset):
		return fmt.Errorf("packed range [%d, %d+%d) not inside %d bytes", o.Offset, o.Offset, o.Length, o.Size)
	case o.Level > MaxLevel:
		return fmt.Errorf("level %d above %d", o.Level, MaxLevel)
	case o.Level != 0 && o.Kind != KindTable:
		return fmt.Errorf("level %d on a %s object (only tables have levels)", o.Level, o.Kind)
	case o.Kind == KindCanonical && o.Packed:
		return fmt.Errorf("a packed canonical savepoint (it is a whole object)")
	case o.Kind == KindTimers && o.KeyGroups.Start != o.KeyGroups.End:
		return fmt.Errorf("timers of key groups [%d, %d] (one key group per entry)", o.KeyGroups.Start, o.KeyGroups.End)
	}
	return nil
}

// Encode returns the manifest's bytes in format version 4 (doc.go, "Manifest layout"), or 5
// when it lists a KindCanonical object, or Validate's error. Encoding is canonical: every field has one fixed-width encoding, so
// decoding a version 4 manifest and encoding it gives back the same bytes (a version 1, 2 or
// 3 manifest comes back as version 4, with what it lacks zero: LastSeq and levels 0, no
// operator state; a version 3 one as its own bytes with the version changed).
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	n := manifestFixed + 16 + len(m.Registry) + len(m.InputPosition) + len(m.OperatorState)
	for i := range m.Objects {
		n += objectFixed + len(m.Objects[i].Name)
	}
	le := binary.LittleEndian
	b := make([]byte, manifestHeader, manifestHeader+n+4)
	copy(b, manifestMagic)
	le.PutUint16(b[8:], m.version())
	b[10] = manifestCRC32C
	le.PutUint32(b[12:], uint32(n))
	b = le.AppendUint64(b, m.ID)
	b = le.AppendUint64(b, m.Parent)
	b = le.AppendUint64(b, m.Epoch)
	b = le.AppendUint64(b, uint64(m.CreatedUnixMilli))
	b = le.AppendUint32(b, m.MaxParallelism)
	b = le.AppendUint16(b, uint16(m.KeyGroups.Start))
	b = le.AppendUint16(b, uint16(m.KeyGroups.End))
	b = le.AppendUint64(b, m.LastSeq)
	b = le.AppendUint32(b, uint32(len(m.Registry)))
	b = append(b, m.Registry...)
	b = le.AppendUint32(b, uint32(len(m.InputPosition)))
	b = append(b, m.InputPosition...)
	b = le.AppendUint32(b, uint32(len(m.OperatorState)))
	b = append(b, m.OperatorState...)
	b = le.AppendUint32(b, uint32(len(m.Objects)))
	for i := range m.Objects {
		o := &m.Objects[i]
		flags := o.Level << flagLevelShift // Validate: Level <= MaxLevel, so it fits in 4 bits
		if o.Packed {
			flags |= flagPacked
		}
		b = append(b, byte(o.Kind), flags)
		b = le.AppendUint16(b, uint16(len(o.Name)))
		b = append(b, o.Name...)
		b = le.AppendUint64(b, uint64(o.Size))
		b = le.AppendUint32(b, o.CRC)
		b = le.AppendUint16(b, uint16(o.KeyGroups.Start))
		b = le.AppendUint16(b, uint16(o.KeyGroups.End))
		b = le.AppendUint64(b, o.MinOrder)
		b = le.AppendUint64(b, o.MaxOrder)
		b = le.AppendUint64(b, uint64(o.Offset))
		b = le.AppendUint64(b, uint64(o.Length))
	}
	if len(b) != manifestHeader+n {
		panic(fmt.Sprintf("strata: invariant: manifest encoded to %d bytes, computed %d", len(b), manifestHeader+n))
	}
	return le.AppendUint32(b, crc32.Checksum(b, base.CRC32C)), nil
}

// DecodeManifest decodes a manifest's bytes, format version 1 to 5 (a version 1 manifest
// decodes with LastSeq and every Level 0, a version 1 or 2 one without OperatorState, only
// version 4 and 5 may hold KindTimers objects, and version 5 must hold a KindCanonical one); file names it in errors (the object's name). It
// checks, in this order, each failure its own cause inside a *base.CorruptionError naming file
// and the byte offset (errors.Is(err, base.ErrCorruption) for all): the magic
// (base.ErrBadMagic; base.ErrTruncated if fewer than 8 bytes), the header's size
// (base.ErrTruncated), the format version (base.ErrFormatVersion), the checksum type
// (base.ErrChecksumType), the reserved byte, the payload length (base.ErrTruncated if the bytes
// end early, no cause if they run on), the CRC32C (base.ErrChecksum), then the payload: a field
// running past its end is base.ErrTruncated, a value breaking a rule of Validate has no cause
// beyond base.ErrCorruption. It never panics, and allocates at most about len(b) bytes.
func DecodeManifest(file string, b []byte) (*Manifest, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt(file, int64(off), cause, format, args...)
	}
	le := binary.LittleEndian
	if len(b) < 8 {
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
	}
	if string(b[:8]) != manifestMagic {
		return nil, bad(base.ErrBadMagic, 0, "magic %q, want %q", b[:8], manifestMagic)
	}
	if len(b) < manifestHeader+4 {
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the header and checksum", len(b))
	}
	version := le.Uint16(b[8:])
	if version < manifestVersion1 || version > manifestVersion5 {
		return nil, bad(base.ErrFormatVersion, 8, "format version %d, this code reads %d to %d", version, manifestVersion1, manifestVersion5)
	}
	if c := b[10]; c != manifestCRC32C {
		return nil, bad(base.ErrChecksumType, 10, "checksum type %d, want %d (CRC32C)", c, manifestCRC32C)
	}
	if b[11] != 0 {
		return nil, bad(nil, 11, "reserved byte %#x is not zero", b[11])
	}
	n := int64(le.Uint32(b[12:]))
	if n > MaxManifestPayload {
		return nil, bad(nil, 12, "payload of %d bytes, more than %d", n, MaxManifestPayload)
	}
	if have := int64(len(b)) - manifestHeader - 4; have != n {
		if have < n {
			return nil, bad(base.ErrTruncated, 12, "payload of %d bytes, %d present", n, have)
		}
		return nil, bad(nil, 12, "payload of %d bytes followed by %d more", n, have-n)
	}
	end := manifestHeader + int(n)
	if got, want := le.Uint32(b[end:]), crc32.Checksum(b[:end], base.CRC32C); got != want {
		return nil, bad(base.ErrChecksum, end, "crc32c %#08x, computed %#08x", got, want)
	}

	d := decoder{b: b[:end], off: manifestHeader}
	m := &Manifest{}
	m.ID = d.u64()
	m.Parent = d.u64()
	m.Epoch = d.u64()
	m.CreatedUnixMilli = int64(d.u64())
	m.MaxParallelism = d.u32()
	m.KeyGroups.Start = int(d.u16())
	m.KeyGroups.End = int(d.u16())
	if version >= manifestVersion2 {
		m.LastSeq = d.u64()
	}
	if d.short {
		return nil, bad(base.ErrTruncated, d.off, "payload of %d bytes, shorter than its fixed fields", n)
	}
	switch {
	case m.ID == 0:
		return nil, bad(nil, manifestHeader, "checkpoint id 0")
	case m.MaxParallelism < 1 || m.MaxParallelism > MaxParallelismLimit:
		return nil, bad(nil, manifestHeader+32, "max parallelism %d not in [1, %d]", m.MaxParallelism, MaxParallelismLimit)
	case m.KeyGroups.Start > m.KeyGroups.End || uint32(m.KeyGroups.End) >= m.MaxParallelism:
		return nil, bad(nil, manifestHeader+36, "key groups [%d, %d] not inside [0, %d)", m.KeyGroups.Start, m.KeyGroups.End, m.MaxParallelism)
	}
	blobs := []*[]byte{&m.Registry, &m.InputPosition, &m.OperatorState}
	if version < manifestVersion3 {
		blobs = blobs[:2]
	}
	for _, blob := range blobs {
		off := d.off
		l := d.u32()
		if d.short {
			return nil, bad(base.ErrTruncated, off, "blob length runs past the payload")
		}
		if l > MaxBlob {
			return nil, bad(nil, off, "blob of %d bytes, more than %d", l, MaxBlob)
		}
		*blob = d.bytes(int(l))
		if d.short {
			return nil, bad(base.ErrTruncated, off, "blob of %d bytes runs past the payload", l)
		}
	}
	off := d.off
	count := d.u32()
	if d.short {
		return nil, bad(base.ErrTruncated, off, "object count runs past the payload")
	}
	if int64(count)*objectFixed > int64(end-d.off) {
		return nil, bad(base.ErrTruncated, off, "%d objects cannot fit in the %d bytes left", count, end-d.off)
	}
	if count > 0 {
		m.Objects = make([]Object, count)
	}
	knownFlags := byte(flagsKnownV2)
	if version == manifestVersion1 {
		knownFlags = flagsKnownV1
	}
	for i := range m.Objects {
		o := &m.Objects[i]
		off := d.off
		o.Kind = ObjectKind(d.u8())
		flags := d.u8()
		o.Name = string(d.bytes(int(d.u16())))
		o.Size = int64(d.u64())
		o.CRC = d.u32()
		o.KeyGroups.Start = int(d.u16())
		o.KeyGroups.End = int(d.u16())
		o.MinOrder = d.u64()
		o.MaxOrder = d.u64()
		o.Offset = int64(d.u64())
		o.Length = int64(d.u64())
		if d.short {
			return nil, bad(base.ErrTruncated, off, "object %d runs past the payload", i)
		}
		if flags&^knownFlags != 0 {
			return nil, bad(nil, off+1, "object %d: unknown flags %#x in format version %d", i, flags, version)
		}
		if o.Kind == KindTimers && version < manifestVersion || o.Kind == KindCanonical && version < manifestVersion5 {
			return nil, bad(nil, off, "object %d: unknown kind %d in format version %d", i, o.Kind, version)
		}
		o.Packed = flags&flagPacked != 0
		o.Level = (flags & flagLevelMask) >> flagLevelShift
		if err := m.checkObject(o); err != nil {
			return nil, bad(nil, off, "object %d: %v", i, err)
		}
	}
	if d.off != end {
		return nil, bad(nil, d.off, "%d bytes after the last object", end-d.off)
	}
	if version == manifestVersion5 && m.version() != manifestVersion5 {
		return nil, bad(nil, 8, "format version 5 without a canonical savepoint object")
	}
	return m, nil
}

// decoder reads fixed-width little-endian fields; past the end it returns zeros and sets short.
type decoder struct {
	b     []byte
	off   int
	short bool
}

func (d *decoder) take(n int) []byte {
	if d.short || n > len(d.b)-d.off {
		d.short = true
		return nil
	}
	p := d.b[d.off : d.off+n]
	d.off += n
	return p
}

func (d *decoder) u8() uint8 {
	if p := d.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if p := d.take(2); p != nil {
		return binary.LittleEndian.Uint16(p)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

// bytes returns a copy of the next n bytes, nil for n == 0.
func (d *decoder) bytes(n int) []byte {
	p := d.take(n)
	if len(p) == 0 {
		return nil
	}
	return append([]byte(nil), p...)
}

// Commit writes m as the manifest of checkpoint m.ID of owner with Storage.Create: the commit
// point of a checkpoint (doc.go, invariant 2). Every object m lists must already be stored.
// It enforces writer fencing (doc.go, "Writer fencing"): a manifest that a fence of owner
// fences (an epoch above m.Epoch, restored from a checkpoint below m.ID) is refused with
// ErrFenced, checked before the Create and again after it — a fence that appeared in between
// makes the committed manifest fenced for every reader, and its writer is told so. A manifest
// of that id already there that one of owner's fences fences (a zombie's, at or below m's
// epoch) is deleted and the Create tried again.
// Errors: ErrFenced; ErrExists if that checkpoint id is already committed by an unfenced
// writer (the caller is a zombie, or retried an id: stop), ErrInvalidName for a bad owner,
// Validate's errors, ReadFences's, and the storage's.
func Commit(ctx context.Context, s Storage, owner string, m *Manifest) error {
	if err := ValidateOwner(owner); err != nil {
		return err
	}
	b, err := m.Encode()
	if err != nil {
		return err
	}
	if err := CheckFenced(ctx, s, owner, m.Epoch, m.ID); err != nil {
		return err
	}
	name := ManifestName(owner, m.ID)
	for range maxFenceAttempts {
		err = s.Create(ctx, name, b)
		if !errors.Is(err, ErrExists) {
			break
		}
		// Another writer's manifest holds the id: if a fence at or below our epoch fences
		// it, it is a zombie's, never committed for a reader; remove it and try again.
		other, rerr := ReadManifest(ctx, s, owner, m.ID)
		if errors.Is(rerr, ErrNotFound) {
			continue // deleted meanwhile: try again
		}
		if rerr != nil || other.Epoch >= m.Epoch {
			return err
		}
		fs, ferr := ReadFences(ctx, s, owner, other.Epoch)
		if ferr != nil {
			return err
		}
		var ours []Fence
		for _, f := range fs {
			if f.Epoch <= m.Epoch {
				ours = append(ours, f)
			}
		}
		if fencedBy(ours, other.Epoch, m.ID) == nil {
			return err
		}
		if derr := s.Delete(ctx, name); derr != nil {
			return fmt.Errorf("checkpoint: removing the fenced manifest %s (epoch %d): %w", name, other.Epoch, derr)
		}
	}
	if err != nil {
		return err
	}
	return CheckFenced(ctx, s, owner, m.Epoch, m.ID)
}

// ReadManifest reads and decodes the manifest of checkpoint id of owner. Errors: ErrNotFound if
// it was never committed (or was collected), *base.CorruptionError naming the object if it is
// damaged, and the storage's; a manifest whose recorded id is not id is corruption too.
func ReadManifest(ctx context.Context, s Storage, owner string, id uint64) (*Manifest, error) {
	name := ManifestName(owner, id)
	b, err := s.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	m, err := DecodeManifest(name, b)
	if err != nil {
		return nil, err
	}
	if m.ID != id {
		return nil, base.Corrupt(name, manifestHeader, nil, "manifest of checkpoint %d stored as checkpoint %d", m.ID, id)
	}
	return m, nil
}
