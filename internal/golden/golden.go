// Package golden is the one home of the golden-file check every on-disk format's tests make
// (CONVENTIONS: every format has a golden file): the encoder's output compared with the file
// under testdata/ byte for byte, the file rewritten first when the test runs with its
// package's update flag. It imports nothing of this module and is imported by tests only.
package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares fresh, what the encoder writes today, with the golden file at path (a path
// under the package's testdata/), after writing fresh there when update is set (creating the
// directory), and returns the file's bytes for the test to decode. A difference is reported
// with t.Errorf — the format changed: bump its version and add a new golden file rather than
// rewrite this one — and a missing or unreadable file with t.Fatal. Call it from the test's
// goroutine.
func Check(t testing.TB, path string, fresh []byte, update bool) []byte {
	t.Helper()
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, fresh) {
		t.Errorf("the encoder no longer produces %s byte for byte: the format changed\n got %x\nwant %x", path, fresh, b)
	}
	return b
}
