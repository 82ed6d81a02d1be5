package strata

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-db/strata/internal/base"
)

// tierPrefixes are the package names a user must never read in an error: the tiers report
// with base's errors, whose texts say what is wrong in the user's terms.
var tierPrefixes = []string{"fresh:", "slice:", "lsm:", "sstable:"}

func checkNoTierNames(t *testing.T, err error) {
	t.Helper()
	for _, p := range tierPrefixes {
		if strings.Contains(err.Error(), p) {
			t.Errorf("error names a tier (%q): %v", p, err)
		}
	}
}

// TestErrorClosedText: a write after Close reads as the Store's error, not the tier's.
func TestErrorClosedText(t *testing.T) {
	s, err := Open(t.TempDir(), attackDamageOptions())
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewValueState(s, ValueDescriptor[int64]{Name: "c", Codec: Int64})
	if err != nil {
		t.Fatal(err)
	}
	k := s.Key([]byte("k"))
	if err := c.Put(k, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err = c.Put(k, 2)
	if want := `strata: put state "c": store closed`; err == nil || err.Error() != want {
		t.Fatalf("Put after Close: %v, want %s", err, want)
	}
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("Put after Close: %v is not ErrClosed", err)
	}
	if err := s.Close(); !errors.Is(err, ErrClosed) || err.Error() != "store closed" {
		t.Fatalf("second Close: %v, want store closed", err)
	}
}

// errorsTestStore persists a store whose LSM holds at least one table and returns its
// directory and the tables' names in dir/lsm.
func errorsTestStore(t *testing.T) (dir string, tables []string) {
	dir = filepath.Join(t.TempDir(), "base")
	s, err := Open(dir, attackDamageOptions())
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewValueState(s, ValueDescriptor[int64]{Name: "c", Codec: Int64})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		if err := c.Put(s.Key([]byte{byte(i), byte(i >> 8)}), int64(i)); err != nil {
			t.Fatal(err)
		}
	}
	// Move the state down to the LSM, as attackDamageBase does.
	if err := s.seal(); err != nil {
		t.Fatal(err)
	}
	if err := s.e.Drain(); err != nil {
		t.Fatal(err)
	}
	s.Evict()
	if err := s.e.Drain(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := os.ReadDir(filepath.Join(dir, "lsm"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range names {
		if strings.HasSuffix(e.Name(), ".sst") {
			tables = append(tables, e.Name())
		}
	}
	if len(tables) == 0 {
		t.Fatalf("no table in %s/lsm", dir)
	}
	slices.Sort(tables)
	return dir, tables
}

// TestErrorDamagedFileText: damage to lsm/CURRENT and to a table of a persisted store fails
// Open with one *CorruptionError naming the file relative to the Store's directory, with its
// cause, and without a tier's name in the text.
func TestErrorDamagedFileText(t *testing.T) {
	base0, tables := errorsTestStore(t)
	sst := tables[0]
	type edit func([]byte) []byte
	flip := func(off func(n int) int) edit {
		return func(b []byte) []byte { b[off(len(b))] ^= 0x04; return b }
	}
	cut := func(keep func(n int) int) edit { return func(b []byte) []byte { return b[:keep(len(b))] } }
	for _, tc := range []struct {
		name   string
		file   string // in lsm/
		edit   edit
		cause  error
		offset int64 // want CorruptionError.Offset; -1: any
	}{
		{"CURRENT/checksum", "CURRENT", flip(func(int) int { return 17 }), ErrChecksum, 16},
		{"CURRENT/magic", "CURRENT", flip(func(int) int { return 0 }), ErrBadMagic, 0},
		{"CURRENT/version", "CURRENT", flip(func(int) int { return 8 }), ErrFormatVersion, 8},
		{"CURRENT/truncated", "CURRENT", cut(func(n int) int { return n - 1 }), ErrTruncated, 16},
		{"sst/magic", sst, flip(func(int) int { return 0 }), ErrBadMagic, 0},
		{"sst/truncated", sst, cut(func(n int) int { return n / 2 }), ErrTruncated, -1},
		{"sst/footer", sst, flip(func(n int) int { return n - 3 }), ErrTruncated, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			copyDir(t, base0, dir)
			p := filepath.Join(dir, "lsm", tc.file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, tc.edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, attackDamageOptions())
			if err == nil {
				s.Close()
				t.Fatal("Open of a damaged store succeeded")
			}
			t.Logf("%v", err)
			rel := "lsm/" + tc.file
			text := err.Error()
			if !strings.HasPrefix(text, "strata: open ") {
				t.Errorf("text does not start with %q: %s", "strata: open ", text)
			}
			if want := "strata: corruption: " + rel; !strings.Contains(text, want) {
				t.Errorf("text does not contain %q: %s", want, text)
			}
			checkNoTierNames(t, err)
			if !errors.Is(err, ErrCorruption) || !errors.Is(err, tc.cause) {
				t.Errorf("errors.Is(err, ErrCorruption) = %v, errors.Is(err, %v) = %v",
					errors.Is(err, ErrCorruption), tc.cause, errors.Is(err, tc.cause))
			}
			var ce *base.CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("not a *CorruptionError: %v", err)
			}
			if ce.File != rel || (tc.offset >= 0 && ce.Offset != tc.offset) {
				t.Errorf("CorruptionError{File: %q, Offset: %d}, want {%q, %d}", ce.File, ce.Offset, rel, tc.offset)
			}
		})
	}
}
