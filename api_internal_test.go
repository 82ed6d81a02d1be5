package strata

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// apiInternalExceptions lists the exported identifiers of public packages that still name an
// internal type, each with the reason it is still there; the test fails on any other (and on an
// entry that no longer matches, so the list only shrinks).
var apiInternalExceptions = map[string]string{}

// apiInternalPackages lists the public packages whose exported API is exempt as a whole: the
// tiers are the engine's building blocks and speak internal/base's terms (Entry, Iterator,
// Filter, Status) and vfs.FS by design; no user is meant to call them. Making them internal
// (or their vocabulary public) is a move of whole packages, left to its own change.
var apiInternalPackages = map[string]bool{
	"github.com/strata-db/strata/fresh":       true,
	"github.com/strata-db/strata/slice":       true,
	"github.com/strata-db/strata/lsm":         true,
	"github.com/strata-db/strata/lsm/sstable": true,
}

// TestNoInternalTypeInPublicAPI walks the exported API of every public package of the module
// (the packages `go list ./...` lists outside internal/ and outside main packages) and fails
// where an exported signature names a type of an internal package: an exported function's
// parameters and results, an exported type's definition (struct fields that are exported,
// interface methods, the right side of an alias), exported methods of exported types, and the
// declared type of exported variables and constants. A caller outside the module cannot name
// such a type, so the identifier is unusable (checkpoint.NewDirStorage took a vfs.FS) or leaks
// an implementation detail. The check is syntactic (go/parser over the package's GoFiles, the
// import name resolved per file), so it needs no type checker and runs in well under a second.
func TestNoInternalTypeInPublicAPI(t *testing.T) {
	if testing.Short() && os.Getenv("STRATA_EMULATED") != "" {
		t.Skip("needs the go command of the host (runs in the host's test run)")
	}
	gocmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(gocmd); err != nil {
		gocmd = "go"
	}
	cmd := exec.Command(gocmd, "list", "-json=ImportPath,Name,Dir,GoFiles", "./...")
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	found := map[string]string{}
	seen := 0
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath, Name, Dir string
			GoFiles               []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Name == "main" || isInternalPath(p.ImportPath) || apiInternalPackages[p.ImportPath] {
			continue
		}
		seen++
		fset := token.NewFileSet()
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for ident, where := range internalRefs(f) {
				found[p.ImportPath+"."+ident] = where
			}
		}
	}
	if seen < 5 {
		t.Fatalf("go list listed %d public packages", seen)
	}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range found {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		if _, ok := apiInternalExceptions[k]; !ok {
			t.Errorf("%s names the internal type %s in an exported signature", k, found[k])
		}
	}
	for k := range apiInternalExceptions {
		if _, ok := found[k]; !ok {
			t.Errorf("apiInternalExceptions lists %s, which no longer names an internal type: remove it", k)
		}
	}
}

// isInternalPath reports whether an import path has an "internal" element.
func isInternalPath(p string) bool {
	for e := range strings.SplitSeq(p, "/") {
		if e == "internal" {
			return true
		}
	}
	return false
}

// internalRefs returns, for each exported identifier of f (Name or Type.Method or
// Type.Field), the first internal package type its exported signature names.
func internalRefs(f *ast.File) map[string]string {
	internal := map[string]string{} // local import name -> path, for internal imports only
	for _, im := range f.Imports {
		path, _ := strconv.Unquote(im.Path.Value)
		if !isInternalPath(path) {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		internal[name] = path
	}
	refs := map[string]string{}
	if len(internal) == 0 {
		return refs
	}
	find := func(n ast.Node) string {
		var hit string
		if n == nil {
			return ""
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			if hit != "" {
				return false
			}
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok {
					if path, ok := internal[x.Name]; ok {
						hit = path + "." + sel.Sel.Name
					}
				}
			}
			switch n := n.(type) {
			case *ast.StructType:
				// Unexported fields are not API: look only at the exported ones (and at
				// embedded fields, whose type's exported members are promoted).
				for _, fl := range n.Fields.List {
					if len(fl.Names) == 0 || slices.ContainsFunc(fl.Names, (*ast.Ident).IsExported) {
						ast.Inspect(fl.Type, func(m ast.Node) bool { return visit(m) })
					}
				}
				return false
			case *ast.ArrayType:
				// A length such as [engine.MaxLevels]T is a constant, not a type.
				ast.Inspect(n.Elt, func(m ast.Node) bool { return visit(m) })
				return false
			case *ast.BlockStmt:
				return false // function bodies are not API
			}
			return true
		}
		ast.Inspect(n, visit)
		return hit
	}
	recvName := func(fd *ast.FuncDecl) string {
		t := fd.Recv.List[0].Type
		if s, ok := t.(*ast.StarExpr); ok {
			t = s.X
		}
		if ix, ok := t.(*ast.IndexExpr); ok {
			t = ix.X
		}
		if ix, ok := t.(*ast.IndexListExpr); ok {
			t = ix.X
		}
		if id, ok := t.(*ast.Ident); ok {
			return id.Name
		}
		return ""
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				r := recvName(d)
				if !ast.IsExported(r) {
					continue
				}
				name = r + "." + name
			}
			if hit := find(d.Type); hit != "" {
				refs[name] = hit
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if hit := find(s.Type); hit != "" {
						refs[s.Name.Name] = hit
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !n.IsExported() {
							continue
						}
						if hit := find(s.Type); hit != "" {
							refs[n.Name] = hit
						}
					}
				}
			}
		}
	}
	return refs
}
