package strata

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
//   - timer/ (the off-heap timer queues) depends on memory/ and internal/base only.
func TestImportRules(t *testing.T) {
	if testing.Short() && os.Getenv("STRATA_EMULATED") != "" {
		t.Skip("needs the go command of the host (runs in the host's test run)")
	}
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	const mod = "github.com/strata-db/strata"
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
