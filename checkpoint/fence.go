package checkpoint

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"time"

	"github.com/strata-db/strata/internal/base"
)

// Writer fencing (doc.go, "Writer fencing"): a restore of a lineage writes a fence, an
// immutable object that names the new writer epoch and the checkpoint id the lineage goes on
// from; every manifest of an older epoch with a larger id is fenced — never committed in the
// eyes of a reader, and refused to its writer with ErrFenced.

// The fence format; its layout is drawn in doc.go ("Fence layout").
const (
	fenceMagic   = "STRATAFN"
	fenceVersion = 1 // part of the format; do not change
	fenceCRC32C  = 1 // checksum type 1 = CRC32C; part of the format; do not change
	fenceSize    = 48
	// FenceDir is the name segment under an owner that holds its fences: "<owner>/fence/".
	FenceDir = "fence"
	// maxFenceAttempts bounds the fenced manifests Commit deletes before giving up: each
	// refused Create is a zombie's manifest, and there are few.
	maxFenceAttempts = 64
)

// Fence is the record a restore of a lineage writes (WriteFence): from now on the lineage's
// writer epoch is Epoch, and it goes on from checkpoint Point (the restored checkpoint of
// the lineage; 0 when none of it was restored). A manifest of the lineage is fenced by it
// when its Epoch is lower and its id larger than Point (Fences): a write of an older writer
// after the lineage was restored. SlateDB's writer_epoch (RFC 0001) is the model, with the
// epoch's claim a create-if-absent of its own object rather than a manifest update.
type Fence struct {
	// Epoch is the writer epoch the fence starts, >= 1.
	Epoch uint64
	// Point is the id of the checkpoint the lineage goes on from (the newest restored, or the
	// newest of the lineage at the restore if larger);
	// manifests of older epochs with ids up to Point stay valid.
	Point uint64
	// Writer identifies the writer that claimed the epoch (a random non-zero number the
	// restored Store keeps in its directory), so that the same writer, reopened, finds its
	// own fence again instead of claiming a new epoch.
	Writer uint64
	// CreatedUnixMilli is when the fence was made (informative).
	CreatedUnixMilli int64
}

// Fences reports whether f fences a manifest of writer epoch epoch and checkpoint id id.
func (f *Fence) Fences(epoch, id uint64) bool { return epoch < f.Epoch && id > f.Point }

// FenceName returns the name of owner's fence of epoch: "<owner>/fence/<epoch>", the epoch in
// 20 decimal digits so that names sort by epoch.
func FenceName(owner string, epoch uint64) string {
	return fmt.Sprintf("%s/%s/%020d", owner, FenceDir, epoch)
}

// ParseFenceName reverses FenceName; false for any other name.
func ParseFenceName(name string) (owner string, epoch uint64, ok bool) {
	owner, rest, ok := strings.Cut(name, "/")
	if !ok || owner == "" {
		return "", 0, false
	}
	digits, ok := strings.CutPrefix(rest, FenceDir+"/")
	if !ok || len(digits) != 20 || strings.Trim(digits, "0123456789") != "" {
		return "", 0, false
	}
	epoch, err := strconv.ParseUint(digits, 10, 64)
	return owner, epoch, err == nil
}

// Encode returns the fence's bytes (doc.go, "Fence layout").
func (f *Fence) Encode() []byte {
	le := binary.LittleEndian
	b := make([]byte, 12, fenceSize)
	copy(b, fenceMagic)
	le.PutUint16(b[8:], fenceVersion)
	b[10] = fenceCRC32C
	b = le.AppendUint64(b, f.Epoch)
	b = le.AppendUint64(b, f.Point)
	b = le.AppendUint64(b, f.Writer)
	b = le.AppendUint64(b, uint64(f.CreatedUnixMilli))
	return le.AppendUint32(b, crc32.Checksum(b, base.CRC32C))
}

// DecodeFence decodes a fence object's bytes; file names it in errors. Checked in the order
// magic (base.ErrBadMagic; fewer than 8 bytes: base.ErrTruncated), size (base.ErrTruncated if
// short; no cause if long), version (base.ErrFormatVersion), checksum type
// (base.ErrChecksumType), reserved byte, CRC32C (base.ErrChecksum), epoch >= 1 — each a
// *base.CorruptionError naming file and offset.
func DecodeFence(file string, b []byte) (*Fence, error) {
	bad := func(cause error, off int, format string, args ...any) error {
		return base.Corrupt(file, int64(off), cause, format, args...)
	}
	le := binary.LittleEndian
	switch {
	case len(b) < 8:
		return nil, bad(base.ErrTruncated, 0, "%d bytes, shorter than the magic", len(b))
	case string(b[:8]) != fenceMagic:
		return nil, bad(base.ErrBadMagic, 0, "magic %q, want %q", b[:8], fenceMagic)
	case len(b) < fenceSize:
		return nil, bad(base.ErrTruncated, 0, "%d bytes, a fence has %d", len(b), fenceSize)
	case len(b) > fenceSize:
		return nil, bad(nil, fenceSize, "%d bytes, a fence has %d", len(b), fenceSize)
	case le.Uint16(b[8:]) != fenceVersion:
		return nil, bad(base.ErrFormatVersion, 8, "format version %d, this code reads %d", le.Uint16(b[8:]), fenceVersion)
	case b[10] != fenceCRC32C:
		return nil, bad(base.ErrChecksumType, 10, "checksum type %d, want %d (CRC32C)", b[10], fenceCRC32C)
	case b[11] != 0:
		return nil, bad(nil, 11, "reserved byte %#x is not zero", b[11])
	}
	if got, want := crc32.Checksum(b[:fenceSize-4], base.CRC32C), le.Uint32(b[fenceSize-4:]); got != want {
		return nil, bad(base.ErrChecksum, fenceSize-4, "crc32c %#08x, stored %#08x", got, want)
	}
	f := &Fence{Epoch: le.Uint64(b[12:]), Point: le.Uint64(b[20:]), Writer: le.Uint64(b[28:]), CreatedUnixMilli: int64(le.Uint64(b[36:]))}
	if f.Epoch == 0 {
		return nil, bad(nil, 12, "epoch 0 (epochs start at 1)")
	}
	return f, nil
}

// ReadFences returns owner's fences of epochs above the given one, ascending by epoch: one
// List of "<owner>/fence/" and one Get per fence above (usually none: a writer is fenced only
// by a later restore). Errors: ErrInvalidName, *base.CorruptionError for a damaged fence or
// one whose epoch is not its name's, the storage's.
func ReadFences(ctx context.Context, s Storage, owner string, above uint64) ([]Fence, error) {
	if err := ValidateOwner(owner); err != nil {
		return nil, err
	}
	objs, err := s.List(ctx, OwnerPrefix(owner)+FenceDir+"/")
	if err != nil {
		return nil, err
	}
	var fs []Fence
	for _, o := range objs {
		ow, epoch, ok := ParseFenceName(o.Name)
		if !ok || ow != owner || epoch <= above {
			continue
		}
		b, err := s.Get(ctx, o.Name)
		if errors.Is(err, ErrNotFound) {
			continue // listed by a lagging List after a Delete: fences are never deleted, but be lenient
		}
		if err != nil {
			return nil, err
		}
		f, err := DecodeFence(o.Name, b)
		if err != nil {
			return nil, err
		}
		if f.Epoch != epoch {
			return nil, base.Corrupt(o.Name, 12, nil, "fence of epoch %d stored as epoch %d", f.Epoch, epoch)
		}
		fs = append(fs, *f)
	}
	return fs, nil
}

// fencedBy returns the first of fences that fences a manifest of epoch and id, or nil.
func fencedBy(fences []Fence, epoch, id uint64) *Fence {
	for i := range fences {
		if fences[i].Fences(epoch, id) {
			return &fences[i]
		}
	}
	return nil
}

// CheckFenced returns an error wrapping ErrFenced if a fence of owner fences a manifest of
// writer epoch epoch and checkpoint id id, and nil otherwise. Errors: ReadFences's.
func CheckFenced(ctx context.Context, s Storage, owner string, epoch, id uint64) error {
	fs, err := ReadFences(ctx, s, owner, epoch)
	if err != nil {
		return err
	}
	if f := fencedBy(fs, epoch, id); f != nil {
		return fencedError(owner, epoch, id, f)
	}
	return nil
}

func fencedError(owner string, epoch, id uint64, f *Fence) error {
	return fmt.Errorf("%w: checkpoint %d of %q by writer epoch %d: the lineage was restored from checkpoint %d by writer epoch %d",
		ErrFenced, id, owner, epoch, f.Point, f.Epoch)
}

// WriteFence claims writer epoch epoch of owner for writer (non-zero) and so fences every
// older writer: it creates the fence (epoch, point, writer) and returns it. The claim is of
// exactly that epoch, as SlateDB's writer_epoch: if owner already has a fence of this writer
// it is returned (the writer fenced before, then was reopened); if a fence of another writer
// has that epoch or a higher one — a restore that came later, or a concurrent one that
// claimed first — the caller is the older writer and gets ErrFenced. now is the fence's
// creation time. Errors: ErrFenced, ErrInvalidName, ReadFences's, the storage's.
func WriteFence(ctx context.Context, s Storage, owner string, epoch, point, writer uint64, now time.Time) (Fence, error) {
	f := Fence{Epoch: max(epoch, 1), Point: point, Writer: writer, CreatedUnixMilli: now.UnixMilli()}
	fs, err := ReadFences(ctx, s, owner, 0)
	if err != nil {
		return Fence{}, err
	}
	for i := len(fs) - 1; i >= 0; i-- {
		if fs[i].Writer == writer {
			return fs[i], nil
		}
	}
	if n := len(fs); n > 0 && fs[n-1].Epoch >= f.Epoch {
		return Fence{}, fmt.Errorf("%w: writer epoch %d of %q: a later writer claimed epoch %d", ErrFenced, f.Epoch, owner, fs[n-1].Epoch)
	}
	err = s.Create(ctx, FenceName(owner, f.Epoch), f.Encode())
	if errors.Is(err, ErrExists) {
		b, gerr := s.Get(ctx, FenceName(owner, f.Epoch))
		if gerr != nil {
			return Fence{}, fmt.Errorf("checkpoint: fence %q at epoch %d: %w", owner, f.Epoch, gerr)
		}
		other, derr := DecodeFence(FenceName(owner, f.Epoch), b)
		if derr != nil {
			return Fence{}, derr
		}
		if other.Writer == writer {
			return *other, nil
		}
		return Fence{}, fmt.Errorf("%w: writer epoch %d of %q was claimed by another writer first", ErrFenced, f.Epoch, owner)
	}
	if err != nil {
		return Fence{}, fmt.Errorf("checkpoint: fence %q at epoch %d: %w", owner, f.Epoch, err)
	}
	return f, nil
}
