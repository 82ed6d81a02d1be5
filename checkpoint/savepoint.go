package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path"

	"github.com/strata-db/strata/internal/base"
)

// CopyNative writes a native savepoint: a self-contained copy of checkpoint id of srcOwner in
// src, committed as checkpoint id of dstOwner in dst, whose objects are all its own (Flink's
// native-format savepoint: the checkpoint's files, with no shared/ part and no reference to
// the source lineage). The source lineage's garbage collection can never delete any of it,
// since GC of one owner reaches only names under that owner's prefix; a Store restored from it
// (Restore, either RestoreMode) reads it as any checkpoint, rescaling included.
//
// Every object the source manifest names is copied once, under a new private name
// (PrivateName(dstOwner, id, …), the source's extension kept), and checked on the way: its size
// and the CRC32C of every range an entry of the manifest covers. A copy that does not match is
// not stored and CopyNative fails with a *base.CorruptionError (errors.Is ErrCorruption)
// naming the source object; a damaged source manifest fails ReadManifest's checks. The new
// manifest (Parent 0, the same epoch, key groups, registry, input position and operator
// state) is committed last with Commit, so a crash or error before it leaves no savepoint
// that restores — only unreferenced objects under dstOwner's "chk-<id>/" that a GC of
// dstOwner collects — and nothing of src is ever written or deleted. dst may be src (with
// another owner).
//
// Objects that no entry covers whole (packed changelog objects) are read whole into memory;
// the others are streamed in ranges of 4 MiB. Errors: ErrNotFound (no such checkpoint, or an
// object it names is missing), ErrExists when dstOwner already has checkpoint id, ctx's, the
// storages'. Safe for concurrent use as the Storages are.
func CopyNative(ctx context.Context, src Storage, srcOwner string, id uint64, dst Storage, dstOwner string) (*Manifest, error) {
	if err := ValidateOwner(dstOwner); err != nil {
		return nil, err
	}
	m, err := ReadManifest(ctx, src, srcOwner, id)
	if err != nil {
		return nil, err
	}
	out := *m
	out.Parent = 0
	out.Objects = make([]Object, len(m.Objects))
	// Which entries cover each object whole: those objects stream, the rest are read whole.
	whole := map[string]bool{}
	for _, o := range m.Objects {
		if !o.Packed {
			whole[o.Name] = true
		}
	}
	renamed := map[string]string{}
	for i, o := range m.Objects {
		name, done := renamed[o.Name]
		if !done {
			ext := path.Ext(o.Name)
			if ext == "" {
				ext = ".obj"
			}
			name = PrivateName(dstOwner, id, o.KeyGroups, ext[1:])
			if whole[o.Name] {
				err = dst.PutReader(ctx, name, &checkedReader{ctx: ctx, s: src, o: o}, o.Size)
			} else {
				err = copyPacked(ctx, src, dst, name, o.Name, m.Objects)
			}
			if err != nil {
				return nil, fmt.Errorf("checkpoint: native savepoint of checkpoint %d of %q: %w", id, srcOwner, err)
			}
			renamed[o.Name] = name
		}
		o.Name = name
		out.Objects[i] = o
	}
	if err := Commit(ctx, dst, dstOwner, &out); err != nil {
		return nil, fmt.Errorf("checkpoint: native savepoint of checkpoint %d of %q: %w", id, srcOwner, err)
	}
	return &out, nil
}

// copyPacked copies object name of src, whose entries in objs are all packed, to dst as
// newName, after checking its size and the CRC32C of each entry's range.
func copyPacked(ctx context.Context, src, dst Storage, newName, name string, objs []Object) error {
	b, err := src.Get(ctx, name)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.Name != name {
			continue
		}
		if int64(len(b)) != o.Size {
			return sizeError(o, int64(len(b)))
		}
		if crc := crc32.Checksum(b[o.Offset:o.Offset+o.Length], base.CRC32C); crc != o.CRC {
			return base.Corrupt(name, o.Offset, base.ErrChecksum, "crc32c %#08x of [%d, +%d), the manifest records %#08x",
				crc, o.Offset, o.Length, o.CRC)
		}
	}
	return dst.Put(ctx, newName, b)
}

// checkedReader reads object o of s in ranges of getChunk bytes and fails, instead of
// returning its last bytes, when the object's CRC32C is not o.CRC — so a PutReader of it never
// stores a damaged copy.
type checkedReader struct {
	ctx context.Context
	s   Storage
	o   Object
	off int64
	crc uint32
	buf []byte
}

// Read implements io.Reader.
func (r *checkedReader) Read(p []byte) (int, error) {
	if len(r.buf) == 0 {
		if r.off >= r.o.Size {
			if r.o.Size == 0 && r.o.CRC != 0 {
				return 0, base.Corrupt(r.o.Name, 0, base.ErrChecksum, "empty object, the manifest records crc32c %#08x", r.o.CRC)
			}
			return 0, io.EOF
		}
		n := min(int64(getChunk), r.o.Size-r.off)
		b, err := r.s.GetRange(r.ctx, r.o.Name, r.off, n)
		if err != nil {
			if errors.Is(err, ErrRange) {
				return 0, base.Corrupt(r.o.Name, r.off, base.ErrTruncated, "object ends before the %d bytes its manifest records", r.o.Size)
			}
			return 0, err
		}
		if int64(len(b)) != n {
			return 0, base.Corrupt(r.o.Name, r.off, base.ErrTruncated, "range of %d bytes read as %d", n, len(b))
		}
		r.crc = crc32.Update(r.crc, base.CRC32C, b)
		r.off += n
		if r.off == r.o.Size && r.crc != r.o.CRC {
			return 0, base.Corrupt(r.o.Name, 0, base.ErrChecksum, "crc32c %#08x, the manifest records %#08x", r.crc, r.o.CRC)
		}
		r.buf = b
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// Verify reads checkpoint id of owner in s (a checkpoint or a native savepoint) and checks
// every byte it names: the manifest's magic, version and CRC32C (ReadManifest), then each
// object's size and the CRC32C of every range an entry covers, reading whole objects in ranges
// of 4 MiB and packed ranges by GetRange. It returns the manifest and nil when all is intact,
// else the first failure: ErrNotFound (the manifest or an object is missing), a
// *base.CorruptionError (errors.Is ErrCorruption) naming the object and offset, ctx's or the
// storage's error. It writes nothing. For the offline reader (cmd/strata-state verify).
func Verify(ctx context.Context, s Storage, owner string, id uint64) (*Manifest, error) {
	m, err := ReadManifest(ctx, s, owner, id)
	if err != nil {
		return nil, err
	}
	for _, o := range m.Objects {
		if !o.Packed {
			if _, err := io.Copy(io.Discard, &checkedReader{ctx: ctx, s: s, o: o}); err != nil {
				return m, err
			}
			continue
		}
		b, err := s.GetRange(ctx, o.Name, o.Offset, o.Length)
		if errors.Is(err, ErrRange) {
			return m, base.Corrupt(o.Name, o.Offset, base.ErrTruncated, "object ends before [%d, +%d) its manifest records", o.Offset, o.Length)
		}
		if err != nil {
			return m, err
		}
		if crc := crc32.Checksum(b, base.CRC32C); crc != o.CRC {
			return m, base.Corrupt(o.Name, o.Offset, base.ErrChecksum, "crc32c %#08x of [%d, +%d), the manifest records %#08x",
				crc, o.Offset, o.Length, o.CRC)
		}
	}
	return m, nil
}
