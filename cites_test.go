package strata

import (
	"go/build"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citedFile matches a Go file name a comment cites, with its path if it has one
// ("persist.go", "internal/engine/doc.go").
var citedFile = regexp.MustCompile(`(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_]+\.go\b`)

// TestCitedFilesExist: every Go file a comment of the core module cites exists, so the doc
// comments stay true when files move (the root's doc.go once pointed at a table.go that was
// gone). A bare name ("persist.go") must be in the citing file's package or in the root
// package (the typed API, which other packages cite as "the root's x.go"); a path
// ("internal/engine/doc.go") is taken from the module root when its first element is one of
// the module's directories, and is someone else's file otherwise (Go's
// cmd/internal/obj/arm64/anames.go). Other modules in the tree (bench/, kafka/, …) are not
// walked.
func TestCitedFilesExist(t *testing.T) {
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	files, cites := 0, 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, path)
		for i, line := range strings.Split(string(b), "\n") {
			_, comment, ok := strings.Cut(line, "//")
			if !ok || strings.Contains(comment, "go:") {
				continue
			}
			for _, c := range citedFile.FindAllString(comment, -1) {
				cites++
				if !citeExists(root, filepath.Dir(path), c) {
					t.Errorf("%s:%d cites %s, which does not exist", rel, i+1, c)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 || cites < 50 {
		t.Fatalf("walked %d files and %d citations: the walk is broken", files, cites)
	}
}

// citeExists reports whether the file c cited from package directory dir exists, by the rules
// of TestCitedFilesExist.
func citeExists(root, dir, c string) bool {
	exists := func(p string) bool { _, err := os.Stat(p); return err == nil }
	first, _, hasPath := strings.Cut(c, "/")
	if !hasPath {
		return exists(filepath.Join(dir, c)) || exists(filepath.Join(root, c))
	}
	if fi, err := os.Stat(filepath.Join(root, first)); err != nil || !fi.IsDir() {
		return true // not a path of this module
	}
	// A path of the Go distribution (cmd/internal/obj/…) shares a first element with ours.
	return exists(filepath.Join(root, filepath.FromSlash(c))) ||
		exists(filepath.Join(build.Default.GOROOT, "src", filepath.FromSlash(c)))
}
