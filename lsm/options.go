package lsm

import (
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/lsm/sstable"
)

// CompactionFilter decides, for each entry a compaction is about to write
// (after merging: only the newest version of each key and user key survives),
// whether to keep it, drop it or write another entry in its place
// (base.Decision; a rewrite keeps the entry's Order, Key, UserKey and Seq,
// base.Filter). bottom reports that no level below the compaction's output
// level holds data in the compaction's Order range, so dropping a tombstone
// cannot resurrect anything. A filter serves one compaction job on that job's
// goroutine (CompactionJob.Run; Options.NewFilter makes one per job), so it
// may keep scratch memory across calls; it must not keep e or its slices, and
// a rewritten entry need only stay valid until its next call.
//
// A filter may drop or rewrite any value, list or map entry (the TTL cleanup
// drops expired values at the bottom and turns them into tombstones above it,
// and rewrites list batches without their expired elements:
// base.TTLFilter); it must drop a tombstone only when bottom is true.
// DefaultFilter is used when Options.NewFilter is nil; a custom filter that
// wants tombstones collected calls it first. The hook plays the role of
// RocksDB's CompactionFilter that Flink's TTL compaction cleanup installs
// (FlinkCompactionFilter).
type CompactionFilter func(e *base.Entry, bottom bool) (base.Decision, *base.Entry)

// DefaultFilter drops tombstones (KindTombstone, KindMapEntryTombstone) at the
// bottom and keeps everything else.
func DefaultFilter(e *base.Entry, bottom bool) (base.Decision, *base.Entry) {
	if bottom && (e.Kind == base.KindTombstone || e.Kind == base.KindMapEntryTombstone) {
		return base.FilterDrop, nil
	}
	return base.FilterKeep, nil
}

// Options configures a DB. Zero fields take the defaults named in their
// comments; Validate reports a bad field by name.
type Options struct {
	// FS is the file system every file goes through; default vfs.Default().
	FS vfs.FS
	// Dir is the DB's directory (created if missing). Required. The DB owns
	// the names CURRENT, CURRENT.tmp, MANIFEST-<n> and <n>.sst in it and
	// deletes such files that the manifest does not reference; other names
	// are left alone.
	Dir string
	// Name is how errors name Dir: a damaged file F of Dir is reported in a
	// *base.CorruptionError as Name/F (the root package passes "lsm", Dir's
	// path relative to the Store's directory, so users read
	// "lsm/000012.sst"). Default: empty, and errors carry the path given to
	// FS. Used in error texts only.
	Name string
	// Cache is the block cache shared by the DB's readers (it may be shared
	// by several DBs); nil reads every block from its file.
	Cache *sstable.Cache
	// L0CompactionTrigger is the number of L0 files at which an L0 → L1
	// compaction is due; default 4.
	L0CompactionTrigger int
	// LevelSizeRatio is the size ratio between adjacent levels L1+: level i
	// (i >= 1) is due for compaction when it holds more than
	// BaseLevelBytes · LevelSizeRatio^(i-1) bytes; default 10.
	LevelSizeRatio int
	// BaseLevelBytes is the target size of L1 in bytes; default 64 MiB.
	BaseLevelBytes int64
	// NumLevels is the number of levels, L0 included, 2..MaxLevels; default 7.
	NumLevels int
	// BlockSize is the data block size in bytes (sstable.WriterOptions);
	// default 16 KiB.
	BlockSize int
	// TargetFileSize is the size in bytes at which a compaction cuts its
	// output into a new file (never inside one Order); default 8 MiB.
	TargetFileSize int64
	// MaxManifestBytes is the manifest size in bytes past which the next edit
	// starts a new manifest holding a snapshot; default 4 MiB.
	MaxManifestBytes int64
	// NewFilter returns the compaction filter of one compaction job; it is
	// called once per job, on the job's goroutine, so it must be safe for
	// concurrent use (the filters it returns need not be). sweep says the job
	// is a TTL sweep (PickExpired), so its removals can be counted apart.
	// Default: a function returning DefaultFilter.
	NewFilter func(sweep bool) CompactionFilter
	// Expiry, if set, adds an entry's TTL data to the summary of the table
	// file being written (base.TTLTable.Note; doc.go, "TTL sweep"), on the
	// writing goroutine (safe for concurrent use). Nil: PickExpired finds
	// nothing.
	Expiry func(x *base.Expiry, e *base.Entry)
	// MaxOpenFiles is the number of table files the DB keeps open at most
	// (doc.go, "Table cache"): a table's index and filter stay in memory, but
	// its file descriptor is closed, least recently used first, while more
	// than MaxOpenFiles are open, and opened again by the next read that
	// misses the block cache. Reads in flight hold their file open, so the
	// count may pass MaxOpenFiles for as long as they run. Default
	// DefaultMaxOpenFiles() at Open (half the process's file-descriptor
	// limit, at most 1000); must not be negative. The role of RocksDB's
	// max_open_files and Pebble's MaxOpenFiles.
	MaxOpenFiles int
	// MaxListPiece bounds, in bytes, a list piece a compaction joins
	// (base.Resolver.MaxList, base doc "Merge rules" rule 4): a longer list
	// stays a chain of pieces, so no compaction builds a value past it (an
	// entry above the table format's 1 GiB limit would fail every
	// compaction for good). Default base.MaxListPiece (1 MiB); must not be
	// negative.
	MaxListPiece int
	// MaxSpaceAmplification bounds the DB's size over its live data, as
	// RocksDB's universal compaction bounds it (max_size_amplification_percent),
	// applied to leveled compaction: the bytes of every level above the bottom
	// (the deepest level holding data) are at most MaxSpaceAmplification − 1
	// times the bottom's, else the deepest non-empty level above the bottom is
	// due for compaction into the next (score: their ratio over
	// MaxSpaceAmplification − 1), so updates reach the bottom and replace the
	// versions they supersede. Static level targets alone let a state updated in
	// place keep L1's and L2's versions beside the bottom's (2× and more).
	// Default DefaultMaxSpaceAmplification; below 1 after defaults: off
	// (negative turns it off).
	MaxSpaceAmplification float64
}

// Defaults of Options.
const (
	DefaultL0CompactionTrigger = 4
	DefaultLevelSizeRatio      = 10
	DefaultBaseLevelBytes      = 64 << 20
	DefaultNumLevels           = 7
	// DefaultMaxSpaceAmplification is Options.MaxSpaceAmplification's default:
	// levels above the bottom hold at most a quarter of its bytes.
	DefaultMaxSpaceAmplification = 1.25
	DefaultTargetFileSize        = 8 << 20
	DefaultMaxManifestBytes      = 4 << 20
	// MaxDefaultOpenFiles caps DefaultMaxOpenFiles (Pebble's default
	// MaxOpenFiles is 1000 too).
	MaxDefaultOpenFiles = 1000
	// MinDefaultOpenFiles is the floor of DefaultMaxOpenFiles.
	MinDefaultOpenFiles = 16
)

// DefaultMaxOpenFiles returns the default of Options.MaxOpenFiles: half the
// process's soft limit on open files (RLIMIT_NOFILE, read now), so that the
// tables leave the other half to the rest of the process, between
// MinDefaultOpenFiles and MaxDefaultOpenFiles; MaxDefaultOpenFiles where the
// limit cannot be read. Lowering the limit after Open does not change a DB's
// cache: a table open that then fails for want of descriptors (EMFILE,
// ENFILE) closes the cache's idle files and tries again once.
func DefaultMaxOpenFiles() int {
	n, ok := fileLimit()
	if !ok {
		return MaxDefaultOpenFiles
	}
	return int(max(min(n/2, MaxDefaultOpenFiles), MinDefaultOpenFiles))
}

// Validate reports the first bad field of o (after defaults), wrapped in
// ErrInvalidOptions.
func (o Options) Validate() error {
	o = o.withDefaults()
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrInvalidOptions, field, v, want)
	}
	switch {
	case o.Dir == "":
		return bad("Dir", `""`, "a directory")
	case o.L0CompactionTrigger < 1:
		return bad("L0CompactionTrigger", o.L0CompactionTrigger, ">= 1")
	case o.LevelSizeRatio < 2:
		return bad("LevelSizeRatio", o.LevelSizeRatio, ">= 2")
	case o.BaseLevelBytes < 1:
		return bad("BaseLevelBytes", o.BaseLevelBytes, ">= 1")
	case o.NumLevels < 2 || o.NumLevels > MaxLevels:
		return bad("NumLevels", o.NumLevels, fmt.Sprintf("2..%d", MaxLevels))
	case o.BlockSize < 0 || o.BlockSize > 1<<30:
		return bad("BlockSize", o.BlockSize, "0..1 GiB")
	case o.TargetFileSize < 1:
		return bad("TargetFileSize", o.TargetFileSize, ">= 1")
	case o.MaxManifestBytes < 1:
		return bad("MaxManifestBytes", o.MaxManifestBytes, ">= 1")
	case o.MaxListPiece < 1:
		return bad("MaxListPiece", o.MaxListPiece, ">= 0 (0 for the default)")
	case o.MaxOpenFiles < 1:
		return bad("MaxOpenFiles", o.MaxOpenFiles, ">= 0 (0 for the default)")
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.FS == nil {
		o.FS = vfs.Default()
	}
	if o.L0CompactionTrigger == 0 {
		o.L0CompactionTrigger = DefaultL0CompactionTrigger
	}
	if o.LevelSizeRatio == 0 {
		o.LevelSizeRatio = DefaultLevelSizeRatio
	}
	if o.BaseLevelBytes == 0 {
		o.BaseLevelBytes = DefaultBaseLevelBytes
	}
	if o.NumLevels == 0 {
		o.NumLevels = DefaultNumLevels
	}
	if o.TargetFileSize == 0 {
		o.TargetFileSize = DefaultTargetFileSize
	}
	if o.MaxManifestBytes == 0 {
		o.MaxManifestBytes = DefaultMaxManifestBytes
	}
	if o.NewFilter == nil {
		o.NewFilter = func(bool) CompactionFilter { return DefaultFilter }
	}
	if o.MaxListPiece == 0 {
		o.MaxListPiece = base.MaxListPiece
	}
	if o.MaxSpaceAmplification == 0 {
		o.MaxSpaceAmplification = DefaultMaxSpaceAmplification
	}
	if o.MaxOpenFiles == 0 {
		o.MaxOpenFiles = DefaultMaxOpenFiles()
	}
	return o
}

// maxLevelBytes is the size at which level l >= 1 is due for compaction.
func (o *Options) maxLevelBytes(l int) float64 {
	b := float64(o.BaseLevelBytes)
	for i := 1; i < l; i++ {
		b *= float64(o.LevelSizeRatio)
	}
	return b
}
