package checkpoint

import (
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestImports: the package's non-test files import only the standard library, internal/base
// and internal/vfs (DESIGN §4a: checkpoint → base, vfs), never the root, the engine or a tier.
func TestImports(t *testing.T) {
	const mod = "github.com/strata-db/strata/"
	// internal/checkpointfs/hook only carries the vfs.FS entry points to the module's own code.
	allowed := map[string]bool{mod + "internal/base": true, mod + "internal/vfs": true, mod + "internal/checkpointfs/hook": true}
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if !allowed[p] && strings.Contains(first, ".") {
				t.Errorf("%s imports %s", e.Name(), p)
			}
		}
	}
	if files < 5 {
		t.Fatalf("found %d source files", files)
	}
}
