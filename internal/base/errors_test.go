package base

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"testing"
)

func TestCorruptionError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		text  string
		cause error // errors.Is must hold; nil: no cause to check
	}{
		{"file offset cause detail",
			Corrupt("lsm/000012.sst", 4096, ErrChecksum, "block 3 crc32c %#08x, stored %#08x", 1, 2),
			"strata: corruption: lsm/000012.sst at offset 4096: checksum mismatch: block 3 crc32c 0x00000001, stored 0x00000002",
			ErrChecksum},
		{"cause only",
			Corrupt("lsm/CURRENT", 0, ErrBadMagic, ""),
			"strata: corruption: lsm/CURRENT at offset 0: bad magic number",
			ErrBadMagic},
		{"no offset",
			Corrupt("lsm/000007.sst", -1, fs.ErrNotExist, "named by MANIFEST-000003"),
			"strata: corruption: lsm/000007.sst: file does not exist: named by MANIFEST-000003",
			fs.ErrNotExist},
		{"absolute path as given",
			Corrupt("/data/store/lsm/MANIFEST-000003", 16, ErrTruncated, "record of 40 bytes, 12 left"),
			"strata: corruption: /data/store/lsm/MANIFEST-000003 at offset 16: truncated file: record of 40 bytes, 12 left",
			ErrTruncated},
		{"in memory, no cause",
			Corrupt("", 96, nil, "record: kind %d", 9),
			"strata: corruption at offset 96: record: kind 9",
			nil},
		{"nothing known",
			&CorruptionError{Offset: -1},
			"strata: corruption",
			nil},
		{"struct with wrapped cause",
			&CorruptionError{File: "lsm/000012.sst", Offset: 4096, Err: fmt.Errorf("%w: block 3 length 99", ErrFormatVersion)},
			"strata: corruption: lsm/000012.sst at offset 4096: unsupported format version: block 3 length 99",
			ErrFormatVersion},
		{"wrapped by a caller",
			fmt.Errorf("open: %w", Corrupt("slice", 12, ErrChecksumType, "type %d", 7)),
			"open: strata: corruption: slice at offset 12: unsupported checksum type: type 7",
			ErrChecksumType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.err.Error(); got != tc.text {
				t.Errorf("text\n got %s\nwant %s", got, tc.text)
			}
			if !errors.Is(tc.err, ErrCorruption) {
				t.Errorf("errors.Is(err, ErrCorruption) = false")
			}
			if tc.cause != nil && !errors.Is(tc.err, tc.cause) {
				t.Errorf("errors.Is(err, %v) = false", tc.cause)
			}
			for _, other := range []error{ErrTruncated, ErrChecksum, ErrFormatVersion, ErrChecksumType, ErrBadMagic, ErrClosed, ErrNoSpace} {
				if other != tc.cause && errors.Is(tc.err, other) {
					t.Errorf("errors.Is(err, %v) = true, want only %v", other, tc.cause)
				}
			}
			var ce *CorruptionError
			if !errors.As(tc.err, &ce) {
				t.Fatalf("errors.As(err, *CorruptionError) = false")
			}
		})
	}
}

// TestNotCorruption: the other shared sentinels do not match ErrCorruption,
// nor does an error that merely mentions it.
func TestNotCorruption(t *testing.T) {
	for _, err := range []error{ErrClosed, ErrNoSpace, ErrChecksum, errors.New("strata: corruption")} {
		if errors.Is(err, ErrCorruption) {
			t.Errorf("errors.Is(%v, ErrCorruption) = true", err)
		}
		var ce *CorruptionError
		if errors.As(err, &ce) {
			t.Errorf("errors.As(%v, *CorruptionError) = true", err)
		}
	}
}

func TestCRC32C(t *testing.T) {
	// The Castagnoli check value ("123456789" → 0xe3069283).
	if got := crc32.Checksum([]byte("123456789"), CRC32C); got != 0xe3069283 {
		t.Fatalf("crc32c = %#08x, want 0xe3069283", got)
	}
}
