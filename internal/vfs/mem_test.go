package vfs

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"path"
	"sync"
	"testing"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests; 0 picks one")

// tree lists every directory (with a trailing "/") and file (with its contents) below "/".
func tree(t *testing.T, fsys FS) map[string]string {
	t.Helper()
	out := make(map[string]string)
	var walk func(dir string)
	walk = func(dir string) {
		names, err := fsys.List(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			p := path.Join(dir, n)
			fi, err := fsys.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			out[p] = readFile(t, fsys, p)
		}
	}
	walk("/")
	return out
}

func appendSync(t *testing.T, f File, s string, sync bool) {
	t.Helper()
	if _, err := f.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
}

func create(t *testing.T, m FS, name string) File {
	t.Helper()
	f, err := m.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestCrashClone(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, m *MemFS)
		want map[string]string
	}{{
		name: "unsynced file write lost",
		run: func(t *testing.T, m *MemFS) {
			f := create(t, m, "/f")
			syncDir(t, m, "/")
			appendSync(t, f, "abc", false)
		},
		want: map[string]string{"/f": ""},
	}, {
		name: "synced file but unsynced dir entry lost",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "abc", true)
		},
		want: map[string]string{},
	}, {
		name: "synced file and synced dir entry kept",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "abc", true)
			syncDir(t, m, "/")
		},
		want: map[string]string{"/f": "abc"},
	}, {
		name: "dir sync does not sync contents",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "abc", false)
			syncDir(t, m, "/")
		},
		want: map[string]string{"/f": ""},
	}, {
		name: "only the prefix up to the last sync survives",
		run: func(t *testing.T, m *MemFS) {
			f := create(t, m, "/f")
			syncDir(t, m, "/")
			appendSync(t, f, "one ", true)
			appendSync(t, f, "two ", true)
			appendSync(t, f, "three", false)
		},
		want: map[string]string{"/f": "one two "},
	}, {
		name: "sync on another handle counts",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "abc", false)
			syncDir(t, m, "/")
			r, err := m.Open("/f")
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := r.Sync(); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"/f": "abc"},
	}, {
		name: "rename without dir sync lost",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/MANIFEST"), "v1", true)
			syncDir(t, m, "/")
			appendSync(t, create(t, m, "/MANIFEST.tmp"), "v2", true)
			if err := m.Rename("/MANIFEST.tmp", "/MANIFEST"); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"/MANIFEST": "v1"},
	}, {
		name: "rename with dir sync kept",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/MANIFEST"), "v1", true)
			syncDir(t, m, "/")
			appendSync(t, create(t, m, "/MANIFEST.tmp"), "v2", true)
			if err := m.Rename("/MANIFEST.tmp", "/MANIFEST"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/")
		},
		want: map[string]string{"/MANIFEST": "v2"},
	}, {
		name: "rename with dir sync but unsynced contents keeps the name, not the bytes",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/MANIFEST"), "v1", true)
			syncDir(t, m, "/")
			appendSync(t, create(t, m, "/MANIFEST.tmp"), "v2", false)
			if err := m.Rename("/MANIFEST.tmp", "/MANIFEST"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/")
		},
		want: map[string]string{"/MANIFEST": ""},
	}, {
		name: "synced contents follow the node through a rename",
		run: func(t *testing.T, m *MemFS) {
			f := create(t, m, "/a")
			if err := m.Rename("/a", "/b"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/")
			appendSync(t, f, "written after the rename", true)
		},
		want: map[string]string{"/b": "written after the rename"},
	}, {
		name: "remove without dir sync undone",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "abc", true)
			syncDir(t, m, "/")
			if err := m.Remove("/f"); err != nil {
				t.Fatal(err)
			}
		},
		want: map[string]string{"/f": "abc"},
	}, {
		name: "remove with dir sync kept",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "abc", true)
			syncDir(t, m, "/")
			if err := m.Remove("/f"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/")
		},
		want: map[string]string{},
	}, {
		name: "new directory needs its parent synced",
		run: func(t *testing.T, m *MemFS) {
			if err := m.MkdirAll("/db/wal", 0o755); err != nil {
				t.Fatal(err)
			}
			appendSync(t, create(t, m, "/db/wal/1.log"), "x", true)
			syncDir(t, m, "/db/wal")
			syncDir(t, m, "/db")
		},
		want: map[string]string{},
	}, {
		name: "every level synced",
		run: func(t *testing.T, m *MemFS) {
			if err := m.MkdirAll("/db/wal", 0o755); err != nil {
				t.Fatal(err)
			}
			appendSync(t, create(t, m, "/db/wal/1.log"), "x", true)
			syncDir(t, m, "/db/wal")
			syncDir(t, m, "/db")
			syncDir(t, m, "/")
		},
		want: map[string]string{"/db/": "", "/db/wal/": "", "/db/wal/1.log": "x"},
	}, {
		name: "parent synced, child directory not: empty directory",
		run: func(t *testing.T, m *MemFS) {
			if err := m.MkdirAll("/db/wal", 0o755); err != nil {
				t.Fatal(err)
			}
			appendSync(t, create(t, m, "/db/wal/1.log"), "x", true)
			syncDir(t, m, "/db")
			syncDir(t, m, "/")
		},
		want: map[string]string{"/db/": "", "/db/wal/": ""},
	}, {
		name: "re-Create without sync keeps the old synced bytes",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "old", true)
			syncDir(t, m, "/")
			appendSync(t, create(t, m, "/f"), "new!", false)
		},
		want: map[string]string{"/f": "old"},
	}, {
		name: "re-Create with sync keeps the new bytes",
		run: func(t *testing.T, m *MemFS) {
			appendSync(t, create(t, m, "/f"), "older", true)
			syncDir(t, m, "/")
			appendSync(t, create(t, m, "/f"), "new", true)
		},
		want: map[string]string{"/f": "new"},
	}, {
		name: "link kept once its directory is synced",
		run: func(t *testing.T, m *MemFS) {
			if err := m.MkdirAll("/chk/1", 0o755); err != nil {
				t.Fatal(err)
			}
			appendSync(t, create(t, m, "/000007.sst"), "table", true)
			if err := m.Link("/000007.sst", "/chk/1/000007.sst"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/chk/1")
			syncDir(t, m, "/chk")
			syncDir(t, m, "/")
			if err := m.Remove("/000007.sst"); err != nil { // unsynced: comes back
				t.Fatal(err)
			}
		},
		want: map[string]string{"/000007.sst": "table", "/chk/": "", "/chk/1/": "", "/chk/1/000007.sst": "table"},
	}, {
		name: "rename across directories with only the destination synced keeps both names",
		run: func(t *testing.T, m *MemFS) {
			if err := m.MkdirAll("/a", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := m.MkdirAll("/b", 0o755); err != nil {
				t.Fatal(err)
			}
			appendSync(t, create(t, m, "/a/f"), "x", true)
			syncDir(t, m, "/a")
			syncDir(t, m, "/")
			if err := m.Rename("/a/f", "/b/f"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/b")
		},
		want: map[string]string{"/a/": "", "/b/": "", "/a/f": "x", "/b/f": "x"},
	}, {
		name: "writes through a handle of a removed file are lost",
		run: func(t *testing.T, m *MemFS) {
			f := create(t, m, "/f")
			syncDir(t, m, "/")
			if err := m.Remove("/f"); err != nil {
				t.Fatal(err)
			}
			syncDir(t, m, "/")
			appendSync(t, f, "gone", true)
		},
		want: map[string]string{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			tc.run(t, m)
			before := tree(t, m)
			c := m.CrashClone()
			if got := tree(t, c); !maps.Equal(got, tc.want) {
				t.Fatalf("crash clone = %q\nwant          %q", got, tc.want)
			}
			if got := tree(t, c.CrashClone()); !maps.Equal(got, tc.want) {
				t.Fatalf("clone of the clone = %q, want %q (invariant 5)", got, tc.want)
			}
			if got := tree(t, m); !maps.Equal(got, before) {
				t.Fatalf("CrashClone changed the original: %q, was %q", got, before)
			}
		})
	}
}

// TestCrashCloneKeepsLinks: two names for one node stay one node in the clone (invariant 4).
func TestCrashCloneKeepsLinks(t *testing.T) {
	m := NewMem()
	appendSync(t, create(t, m, "/a"), "x", true)
	if err := m.Link("/a", "/b"); err != nil {
		t.Fatal(err)
	}
	syncDir(t, m, "/")
	c := m.CrashClone()
	f, err := c.Create("/a") // truncates the shared node
	if err != nil {
		t.Fatal(err)
	}
	appendSync(t, f, "yz", false)
	f.Close()
	if got := readFile(t, c, "/b"); got != "yz" {
		t.Fatalf("/b = %q after writing /a in the clone; want the shared contents %q", got, "yz")
	}
}

// TestCrashCloneModel drives appends, syncs, re-creates and directory syncs at random and checks
// the clone against a model of what was synced, which exercises Sync's append-only shortcut and
// its fallback after truncation. It prints its seed; -seed replays one.
func TestCrashCloneModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = rand.Uint64()
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	m := NewMem()
	const nfiles = 4
	type node struct{ live, synced string }
	live := make([]*node, nfiles)    // the node each name refers to now, nil if none
	durable := make([]*node, nfiles) // the node each name refers to as of the last root sync
	handles := make([]File, nfiles)
	for step := 0; step < 2000; step++ {
		i := rng.IntN(nfiles)
		name := fmt.Sprintf("/f%d", i)
		switch r := rng.IntN(10); {
		case r < 4 && handles[i] != nil:
			s := fmt.Sprintf("<%d>", step)
			appendSync(t, handles[i], s, false)
			live[i].live += s
		case r < 6 && handles[i] != nil:
			appendSync(t, handles[i], "", true)
			live[i].synced = live[i].live
		case r < 7:
			if handles[i] != nil {
				handles[i].Close()
			}
			f, err := m.Create(name)
			if err != nil {
				t.Fatal(err)
			}
			handles[i] = f
			if live[i] == nil {
				live[i] = &node{}
			}
			live[i].live = "" // truncated in place; synced bytes stay until the next Sync
		case r < 8:
			syncDir(t, m, "/")
			copy(durable, live)
		case r < 9 && live[i] != nil:
			if err := m.Remove(name); err != nil {
				t.Fatal(err)
			}
			handles[i].Close()
			handles[i] = nil
			live[i] = nil
		default:
			want := map[string]string{}
			for j, n := range durable {
				if n != nil {
					want[fmt.Sprintf("/f%d", j)] = n.synced
				}
			}
			if got := tree(t, m.CrashClone()); !maps.Equal(got, want) {
				t.Fatalf("step %d: clone %q, want %q", step, got, want)
			}
		}
	}
}

// TestMemFSConcurrent exercises every operation from several goroutines under -race.
func TestMemFSConcurrent(t *testing.T) {
	m := NewMem()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			dir := fmt.Sprintf("/g%d", g)
			if err := m.MkdirAll(dir, 0o755); err != nil {
				t.Error(err)
				return
			}
			for i := range 50 {
				p := fmt.Sprintf("%s/%d", dir, i)
				f, err := m.Create(p)
				if err != nil {
					t.Error(err)
					return
				}
				f.Write([]byte("payload"))
				f.Sync()
				f.ReadAt(make([]byte, 3), 2)
				f.Close()
				m.Rename(p, p+".done")
				m.List(dir)
				m.Stat(p + ".done")
				if d, err := m.OpenDir(dir); err == nil {
					d.Sync()
					d.Close()
				}
				if i%10 == 0 {
					m.CrashClone()
				}
			}
		})
	}
	wg.Wait()
	for g := range 8 {
		names, err := m.List(fmt.Sprintf("/g%d", g))
		if err != nil || len(names) != 50 {
			t.Fatalf("g%d: %d names, %v", g, len(names), err)
		}
	}
}
