package strata

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestImportRules enforces the package layout of DESIGN §4a with `go list` (as Pebble's lint
// tests do), for GOARCH amd64 and arm64, over the non-test files of every package:
//
//   - the root package (the typed API) imports no tier (fresh/, slice/, lsm/...): it reaches
//     them only through internal/engine;
//   - internal/engine never imports the root package;
//   - a tier never imports another tier (lsm/sstable is part of the lsm tier);
//   - memory/, scheduler/ and asm_arm64/ import nothing of this module;
//   - internal/base imports nothing of this module (it is what every tier shares);
//   - checkpoint/ (public: storage, manifests, GC) depends on internal/base and internal/vfs only
//     (and internal/checkpointfs/hook, the leaf through which it hands its vfs.FS entry points
//     to the module's own code);
//   - timer/ (the off-heap timer queues) depends on memory/ and internal/base only;
//   - every package's direct imports of this module are within its row of importAllowList
//     (DESIGN §4a's allow-list), and every package has a row, so a new package or a new edge is
//     a decision written down here rather than an accident.
func TestImportRules(t *testing.T) {
	gocmd := hostGo(t)
	const mod = layoutModule
	tierOf := func(p string) string {
		for _, tier := range []string{"fresh", "slice", "lsm", "changelog"} {
			if p == mod+"/"+tier || strings.HasPrefix(p, mod+"/"+tier+"/") {
				return tier
			}
		}
		return ""
	}
	leaf := map[string]bool{mod + "/memory": true, mod + "/scheduler": true, mod + "/asm_arm64": true, mod + "/internal/base": true}
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command(gocmd, "list", "-json=ImportPath,Imports,Deps", "./...")
		cmd.Env = append(os.Environ(), "GOARCH="+arch, "GOOS=linux", "GOFLAGS=-buildvcs=false")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOARCH=%s go list: %v", arch, err)
		}
		dec := json.NewDecoder(strings.NewReader(string(out)))
		seen := 0
		for dec.More() {
			var p struct {
				ImportPath string
				Imports    []string
				Deps       []string
			}
			if err := dec.Decode(&p); err != nil {
				t.Fatal(err)
			}
			seen++
			if err := checkAllowList(mod, p.ImportPath, p.Imports); err != "" {
				t.Errorf("GOARCH=%s: %s", arch, err)
			}
			ours := func(list []string) []string {
				var r []string
				for _, d := range list {
					if d == mod || strings.HasPrefix(d, mod+"/") {
						r = append(r, d)
					}
				}
				return r
			}
			switch {
			case p.ImportPath == mod:
				for _, d := range ours(p.Imports) {
					if tierOf(d) != "" {
						t.Errorf("GOARCH=%s: the root package imports the tier %s (use internal/engine)", arch, d)
					}
				}
			case p.ImportPath == mod+"/internal/engine" || strings.HasPrefix(p.ImportPath, mod+"/internal/engine/"):
				for _, d := range ours(p.Deps) {
					if d == mod {
						t.Errorf("GOARCH=%s: %s depends on the root package", arch, p.ImportPath)
					}
				}
			case p.ImportPath == mod+"/checkpoint" || strings.HasPrefix(p.ImportPath, mod+"/checkpoint/"):
				for _, d := range ours(p.Deps) {
					if d != mod+"/internal/base" && d != mod+"/internal/vfs" && d != mod+"/internal/checkpointfs/hook" && !strings.HasPrefix(d, mod+"/checkpoint") {
						t.Errorf("GOARCH=%s: %s depends on %s (checkpoint may use internal/base and internal/vfs only)", arch, p.ImportPath, d)
					}
				}
			case p.ImportPath == mod+"/timer":
				for _, d := range ours(p.Deps) {
					if d != mod+"/memory" && d != mod+"/internal/base" {
						t.Errorf("GOARCH=%s: %s depends on %s (timer may use memory and internal/base only)", arch, p.ImportPath, d)
					}
				}
			case leaf[p.ImportPath]:
				if d := ours(p.Deps); len(d) > 0 {
					t.Errorf("GOARCH=%s: %s must import nothing of ours, depends on %v", arch, p.ImportPath, d)
				}
			case tierOf(p.ImportPath) != "":
				for _, d := range ours(p.Deps) {
					if tt := tierOf(d); tt != "" && tt != tierOf(p.ImportPath) {
						t.Errorf("GOARCH=%s: tier package %s depends on the tier %s", arch, p.ImportPath, d)
					}
					if d == mod || strings.HasPrefix(d, mod+"/internal/engine") {
						t.Errorf("GOARCH=%s: tier package %s depends on %s", arch, p.ImportPath, d)
					}
				}
			}
		}
		if seen < 10 {
			t.Fatalf("GOARCH=%s: go list listed %d packages", arch, seen)
		}
	}
}

// importAllowList is DESIGN §4a's allow-list: for every package of the module (path relative to
// the module, "" for the root), the packages of the module it may import directly. Exceptions
// to the design are listed separately in importExceptions, each with its reason, so that the
// rows here say the target and the exceptions say what is left to do.
var importAllowList = map[string][]string{
	"":                           {"internal/engine", "internal/base", "checkpoint", "memory"},
	"internal/engine":            {"fresh", "slice", "lsm", "lsm/sstable", "changelog", "checkpoint", "internal/checkpointfs", "scheduler", "memory", "internal/base", "internal/vfs", "timer"},
	"internal/engine/enginetest": {"internal/base", "internal/vfs"},
	"tests":                      nil, // test files only: they import the root package (the public API)
	"changelog":                  {"internal/base", "checkpoint", "memory"},
	"checkpoint":                 {"internal/base", "internal/vfs", "internal/checkpointfs/hook"},
	"checkpoint/storagetest":     {"checkpoint"},
	"internal/checkpointfs":      {"checkpoint", "internal/checkpointfs/hook", "internal/vfs"},
	"internal/checkpointfs/hook": {"internal/vfs"},
	"timer":                      {"memory", "internal/base"},
	"fresh":                      {"internal/base", "internal/vfs", "memory", "internal/invariants"},
	"slice":                      {"internal/base", "internal/vfs", "memory", "asm_arm64", "internal/invariants"},
	"lsm":                        {"internal/base", "internal/vfs", "memory", "lsm/sstable", "internal/invariants"},
	"lsm/sstable":                {"internal/base", "internal/vfs", "memory"},
	"lsm/sstable/cmd/sstdump":    {"internal/vfs", "lsm/sstable"},
	"cmd/strata-state":           {"cmd/strata-state/statetool"},
	"cmd/strata-state/statetool": {"", "checkpoint"},
	"internal/base":              nil,
	"internal/vfs":               nil,
	"internal/invariants":        nil,
	"internal/golden":            nil,
	"internal/tools/sve2word":    nil,
	"memory":                     nil,
	"scheduler":                  nil,
	"asm_arm64":                  nil,
}

// importExceptions are edges the design does not allow yet that the code still has, each with
// the change that removes it. TestImportRules fails when one is no longer used, so the list only
// shrinks.
var importExceptions = map[string][]string{
	// The changelog's restore cache (cache.go) keeps downloaded segments on a vfs.FS; DESIGN
	// §4a's row for changelog does not list vfs yet.
	"changelog": {"internal/vfs"},
}

// checkAllowList returns "" if every import of ours of the package pkg (an import path) is in
// its row of importAllowList or importExceptions, else the first violation. A package without
// a row is a violation too.
func checkAllowList(mod, pkg string, imports []string) string {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, mod), "/")
	allowed, ok := importAllowList[rel]
	if !ok {
		return fmt.Sprintf("package %s has no row in importAllowList (DESIGN §4a): add one", pkg)
	}
	exc := importExceptions[rel]
	for _, d := range imports {
		if d != mod && !strings.HasPrefix(d, mod+"/") {
			continue
		}
		r := strings.TrimPrefix(strings.TrimPrefix(d, mod), "/")
		if !slices.Contains(allowed, r) && !slices.Contains(exc, r) {
			return fmt.Sprintf("%s imports %s, which its row of importAllowList (DESIGN §4a) does not allow", pkg, d)
		}
	}
	return ""
}

// TestImportExceptionsUsed fails when an entry of importExceptions is no longer needed (the
// edge is gone on both architectures), so that the exceptions are removed with the edge.
func TestImportExceptionsUsed(t *testing.T) {
	gocmd := hostGo(t)
	const mod = layoutModule
	used := map[string]bool{}
	for _, arch := range []string{"amd64", "arm64"} {
		cmd := exec.Command(gocmd, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		cmd.Env = append(os.Environ(), "GOARCH="+arch, "GOOS=linux", "GOFLAGS=-buildvcs=false")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("GOARCH=%s go list: %v", arch, err)
		}
		for line := range strings.Lines(string(out)) {
			f := strings.Fields(line)
			rel := strings.TrimPrefix(strings.TrimPrefix(f[0], mod), "/")
			for _, d := range f[1:] {
				used[rel+" -> "+strings.TrimPrefix(strings.TrimPrefix(d, mod), "/")] = true
			}
		}
	}
	for pkg, exc := range importExceptions {
		for _, d := range exc {
			if !used[pkg+" -> "+d] {
				t.Errorf("importExceptions lists %q -> %q, which no package imports any more: remove it", pkg, d)
			}
		}
	}
}

// layoutModule is the module whose packages the layout tests read.
const layoutModule = "github.com/strata-db/strata"

// hostGo returns the go command of the host's toolchain (GOROOT's, else the one on PATH), or
// skips t in an emulated short run, which has none.
func hostGo(t *testing.T) string {
	t.Helper()
	if testing.Short() && os.Getenv("STRATA_EMULATED") != "" {
		t.Skip("needs the go command of the host (runs in the host's test run)")
	}
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	return gocmd
}
