package strata

// Damaged files on a real directory after Close: CURRENT, the manifest (and the state registry
// inside its persist point), tables — truncated, bit-flipped, deleted, emptied — and files that
// are not ours. Every case must open to the persisted state or fail with a typed error naming
// the file: never a panic, never a wrong value. Reopening to the state of an older Close
// without an error is reported separately (a silent rollback).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var attackDamageWorkload = attackWorkload(4000, 600)

const attackDamageOps = 40_000

func attackDamageOptions() Options {
	return Options{MaxParallelism: 128, MemoryBudget: 64 << 20, SegmentSize: 16 << 20, BlockCacheSize: -1}
}

// copyDir copies the tree src to dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// attackDamageBase writes two sessions (A, then B) to a real directory and returns it with
// the models as of each Close.
func attackDamageBase(t *testing.T) (dir string, mA, mB *model) {
	dir = filepath.Join(t.TempDir(), "base")
	mA, mB = newModel(), newModel()
	for n := range 2 {
		s, err := Open(dir, attackDamageOptions())
		if err != nil {
			t.Fatal(err)
		}
		st, err := registerModel(s, attackDamageWorkload.u)
		if err != nil {
			t.Fatal(err)
		}
		if err := attackDamageWorkload.session(attackSeed, n, attackDamageOps, mB, st); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			attackDamageWorkload.session(attackSeed, n, attackDamageOps, mA, nil)
		}
		// Move part of the state down before Close, so that the LSM holds several files.
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
	}
	return dir, mA, mB
}

// damageOutcome opens dir and reads every slot: the Open error or the first read error, or
// "B" when everything matches mB, "A" when it matches mA (a silent rollback), or a
// description of a wrong value.
type damageOutcome struct {
	err      error  // typed or not, from Open or a read
	state    string // "B", "A", or "" with wrong set
	wrong    string
	panicked any
}

func openAndRead(dir string, mA, mB *model) (out damageOutcome) {
	defer func() {
		if r := recover(); r != nil {
			out.panicked = r
		}
	}()
	s, err := Open(dir, attackDamageOptions())
	if err != nil {
		out.err = err
		return out
	}
	defer s.Close()
	st, err := registerModel(s, attackDamageWorkload.u)
	if err != nil {
		out.err = err
		return out
	}
	err = st.checkAll(mB)
	switch {
	case err == nil:
		out.state = "B"
	case errors.Is(err, errMismatch):
		if errA := st.checkAll(mA); errA == nil {
			out.state = "A"
		} else {
			out.wrong = err.Error()
		}
	default:
		out.err = err
	}
	return out
}

func TestAttackDamagedFiles(t *testing.T) {
	base, mA, mB := attackDamageBase(t)
	lsmDir := filepath.Join(base, "lsm")
	names, err := os.ReadDir(lsmDir)
	if err != nil {
		t.Fatal(err)
	}
	var tables, manifests []string
	for _, e := range names {
		switch n := e.Name(); {
		case strings.HasSuffix(n, ".sst"):
			tables = append(tables, n)
		case strings.HasPrefix(n, "MANIFEST-"):
			manifests = append(manifests, n)
		}
	}
	t.Logf("files after two Closes: %d tables %v, manifests %v", len(tables), tables, manifests)
	if len(tables) < 2 || len(manifests) != 1 {
		t.Fatalf("unexpected layout: tables %v, manifests %v", tables, manifests)
	}
	manifest := manifests[0]
	mb, _ := os.ReadFile(filepath.Join(lsmDir, manifest))
	regAt := bytes.LastIndex(mb, []byte("STRATARG")) // the state registry's magic (internal/engine, registry.go)
	if regAt < 0 {
		t.Fatal("no registry in the manifest")
	}
	type edit func(b []byte) []byte
	flip := func(off func(n int) int) edit {
		return func(b []byte) []byte { b[off(len(b))] ^= 0x04; return b }
	}
	trunc := func(keep func(n int) int) edit { return func(b []byte) []byte { return b[:keep(len(b))] } }
	cases := []struct {
		name string
		file string // in lsm/; "" with del: delete nothing
		edit edit   // nil: delete the file
		// rollbackOK: the damage is documented as indistinguishable from a torn write, so
		// reopening to A is the documented outcome. None is now: CURRENT names the last persist
		// point, so losing the manifest's last record is corruption (lsm doc.go, "Torn tails").
		rollbackOK bool
	}{
		{"CURRENT/empty", "CURRENT", trunc(func(int) int { return 0 }), false},
		{"CURRENT/truncated", "CURRENT", trunc(func(n int) int { return n - 1 }), false},
		{"CURRENT/flip-num", "CURRENT", flip(func(int) int { return 17 }), false},
		{"CURRENT/deleted", "CURRENT", nil, false},
		{"CURRENT/garbage", "CURRENT", func([]byte) []byte { return []byte("MANIFEST-000001\n") }, false},
		{"manifest/deleted", manifest, nil, false},
		{"manifest/empty", manifest, trunc(func(int) int { return 0 }), false},
		{"manifest/header-only", manifest, trunc(func(int) int { return 16 }), false},
		{"manifest/half", manifest, trunc(func(n int) int { return n / 2 }), false},
		{"manifest/minus1", manifest, trunc(func(n int) int { return n - 1 }), false},
		{"manifest/flip-middle", manifest, flip(func(n int) int { return n / 3 }), false},
		{"manifest/flip-last", manifest, flip(func(n int) int { return n - 1 }), false},
		{"manifest/zero-tail", manifest, func(b []byte) []byte { clear(b[len(b)-64:]); return b }, false},
		{"registry/flip-magic", manifest, flip(func(int) int { return regAt + 1 }), false},
		{"registry/flip-maxp", manifest, flip(func(int) int { return regAt + 16 }), false},
		{"table0/deleted", tables[0], nil, false},
		{"table0/empty", tables[0], trunc(func(int) int { return 0 }), false},
		{"table0/half", tables[0], trunc(func(n int) int { return n / 2 }), false},
		{"table0/flip-data", tables[0], flip(func(n int) int { return n / 4 }), false},
		{"table0/flip-footer", tables[0], flip(func(n int) int { return n - 3 }), false},
		{"table0/extended", tables[0], func(b []byte) []byte { return append(b, make([]byte, 100)...) }, false},
		{"tableN/flip-data", tables[len(tables)-1], flip(func(n int) int { return n / 2 }), false},
		{"tableN/swapped-with-table0", tables[len(tables)-1], func([]byte) []byte {
			b, _ := os.ReadFile(filepath.Join(lsmDir, tables[0]))
			return b
		}, false},
	}
	var bugs []string
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "db")
			copyDir(t, base, dir)
			p := filepath.Join(dir, "lsm", tc.file)
			if tc.edit == nil {
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
			} else {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, tc.edit(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out := openAndRead(dir, mA, mB)
			switch {
			case out.panicked != nil:
				t.Errorf("panic: %v", out.panicked)
			case out.wrong != "":
				// Was: a manifest cut to its header opened as an empty store and Open then
				// deleted every table; CURRENT now names the persist point (lsm doc.go).
				bugs = append(bugs, fmt.Sprintf("%s: WRONG VALUE without an error: %s", tc.name, out.wrong))
			case out.state == "B":
				t.Logf("opened with the persisted state (damage not seen)")
			case out.state == "A":
				msg := fmt.Sprintf("%s: reopened silently to the previous Close's state", tc.name)
				if tc.rollbackOK {
					t.Logf("%s (documented: a damaged last manifest record is taken for a torn write)", msg)
				} else {
					bugs = append(bugs, msg)
				}
			case errors.Is(out.err, ErrCorruption) || errors.Is(out.err, ErrIncompatibleStore):
				if !strings.Contains(out.err.Error(), tc.file) && !strings.Contains(out.err.Error(), "registry") {
					bugs = append(bugs, fmt.Sprintf("%s: error does not name %s: %v", tc.name, tc.file, out.err))
				}
				t.Logf("typed: %v", out.err)
			default:
				bugs = append(bugs, fmt.Sprintf("%s: untyped error: %v", tc.name, out.err))
				t.Logf("untyped: %v", out.err)
			}
		})
	}
	if len(bugs) > 0 {
		t.Fatalf("damaged files:\n\t%s", strings.Join(bugs, "\n\t"))
	}
}

// TestAttackForeignFiles: files the Store did not write, in its directory and in dir/lsm. They
// must not break Open, and must not be deleted silently — except that lsm documents it deletes
// names of its own pattern (NNNNNN.sst, MANIFEST-N, CURRENT.tmp) it does not use.
func TestAttackForeignFiles(t *testing.T) {
	base, mA, mB := attackDamageBase(t)
	foreign := map[string]string{
		"notes.txt":                    "user notes at the top of the store directory",
		"lsm/notes.txt":                "user notes inside lsm/",
		"lsm/backup.sst":               "not a number",
		"lsm/000999.sst":               "garbage with a table's name",
		"lsm/MANIFEST-000998":          "garbage with a manifest's name",
		"lsm/CURRENT.tmp":              "garbage with CURRENT.tmp's name",
		"lsm/000001.sst.bak":           "a backup copy",
		"lsm/99999999999999999999.sst": "a number that does not fit 64 bits",
		"lsm/18446744073709551615.sst": "the largest file number",
	}
	dir := filepath.Join(t.TempDir(), "db")
	copyDir(t, base, dir)
	for n, c := range foreign {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := openAndRead(dir, mA, mB)
	if out.panicked != nil || out.wrong != "" || out.state != "B" {
		t.Fatalf("with foreign files: %+v", out)
	}
	var gone []string
	for n := range foreign {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			gone = append(gone, n)
		}
	}
	slices.Sort(gone)
	t.Logf("foreign files deleted by Open: %v", gone)
	// A second session on top must still work (file numbers after a huge stray number).
	s, err := Open(dir, attackDamageOptions())
	if err != nil {
		t.Fatalf("second open: %v", err)
	}
	st, _ := registerModel(s, attackDamageWorkload.u)
	m := mB.clone()
	if err := attackDamageWorkload.session(attackSeed, 7, 20_000, m, st); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close after foreign files: %v", err)
	}
	out = openAndRead(dir, mA, m)
	if out.panicked != nil || out.state != "B" {
		t.Fatalf("third open: %+v", out)
	}
	for _, n := range gone {
		if !strings.Contains(n, "MANIFEST-") && !strings.Contains(n, "CURRENT.tmp") && !strings.Contains(n, "000999.sst") {
			t.Fatalf("Open deleted foreign files it could not have written: %v", gone)
		}
	}
}
