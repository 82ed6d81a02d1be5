package engine

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
)

// registryGoldens are the state registry's golden files, kept with the root's format goldens
// (the root's golden tests write them from a Store's registered states), by version.
var registryGoldens = []struct {
	file    string
	version uint16
}{
	{"registry-v1.bin", 1}, {"registry-v2.bin", 2}, {"registry-v3.bin", 3},
	{"registry-v3-ops.bin", 3}, {"registry-v4.bin", 4}, {"registry-v5.bin", 5},
}

func readRegistryGolden(tb testing.TB, file string) []byte {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", file))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// TestRegistryGoldens: every golden registry decodes, with its version's content (the v1
// golden's exactly), and Encode gives its bytes back byte for byte — the operator state blob
// is opaque here, so even the goldens whose blob the root no longer writes re-encode exactly.
func TestRegistryGoldens(t *testing.T) {
	for _, g := range registryGoldens {
		b := readRegistryGolden(t, g.file)
		r, err := DecodeRegistry(b)
		if err != nil {
			t.Fatalf("%s: %v", g.file, err)
		}
		if v := uint16(b[8]) | uint16(b[9])<<8; v != g.version {
			t.Fatalf("%s: version %d, want %d", g.file, v, g.version)
		}
		if got := r.Encode(); !bytes.Equal(got, b) {
			t.Fatalf("%s: Encode of its decoding differs\n got %q\nwant %q", g.file, got, b)
		}
		if r.MaxParallelism != 256 || r.KeyGroups != (checkpoint.KeyGroupRange{Start: 3, End: 200}) {
			t.Fatalf("%s: max parallelism %d, key groups %v", g.file, r.MaxParallelism, r.KeyGroups)
		}
		if hasOps := g.file == "registry-v2.bin" || g.file == "registry-v3-ops.bin" || g.file == "registry-v4.bin"; hasOps != (len(r.Ops) > 0) {
			t.Fatalf("%s: operator state blob of %d bytes", g.file, len(r.Ops))
		}
		if (g.version == 4) != (r.TimerFile.Name != "") || (g.version == 5) != (r.Aliases != nil) {
			t.Fatalf("%s: timer file %+v, aliases %v", g.file, r.TimerFile, r.Aliases)
		}
	}
	const pkg = "github.com/strata-db/strata."
	r := must(DecodeRegistry(readRegistryGolden(t, "registry-v1.bin")))
	want := &Registry{MaxParallelism: 256, KeyGroups: checkpoint.KeyGroupRange{Start: 3, End: 200}, NextID: 9, States: map[string]PersistedState{
		"value":       {ID: 1, Kind: KindValue, Codecs: [2]string{pkg + "bytesCodec", ""}},
		"list":        {ID: 2, Kind: KindList, Codecs: [2]string{pkg + "int64Codec", ""}},
		"map":         {ID: 3, Kind: KindMap, Codecs: [2]string{pkg + "stringCodec", pkg + "int64Codec"}},
		"reducing":    {ID: 4, Kind: KindReducing, Codecs: [2]string{pkg + "int64Codec", ""}},
		"aggregating": {ID: 5, Kind: KindAggregating, Codecs: [2]string{pkg + "avgCodec", ""}},
		"old":         {ID: 7, Kind: KindMap, Codecs: [2]string{"example.com/job.KeyCodec", "*example.com/job.Row"}},
	}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("registry-v1.bin decodes to\n%+v\nwant\n%+v", r, want)
	}
	r5 := must(DecodeRegistry(readRegistryGolden(t, "registry-v5.bin")))
	wantAliases := map[string][]IDAlias{"list": {{Lo: 3, Hi: 99, ID: 8}}, "old": {{Lo: 100, Hi: 150, ID: 2}, {Lo: 151, Hi: 200, ID: 1}}}
	if !maps.EqualFunc(r5.Aliases, wantAliases, slices.Equal) {
		t.Fatalf("registry-v5.bin aliases %v, want %v", r5.Aliases, wantAliases)
	}
}

// TestRegistryDamage: each truncation and each flipped bit of every golden is an
// ErrCorruption (never a panic), a version above 5 ErrFormatVersion, a bad magic ErrBadMagic.
func TestRegistryDamage(t *testing.T) {
	for _, g := range registryGoldens {
		blob := readRegistryGolden(t, g.file)
		for n := range len(blob) {
			if _, err := DecodeRegistry(blob[:n]); !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("%s truncated to %d: %v", g.file, n, err)
			}
		}
		for i := range len(blob) * 8 {
			b := bytes.Clone(blob)
			b[i/8] ^= 1 << (i % 8)
			if _, err := DecodeRegistry(b); !errors.Is(err, base.ErrCorruption) {
				t.Fatalf("%s, bit %d flipped: %v", g.file, i, err)
			}
		}
	}
	b := readRegistryGolden(t, "registry-v1.bin")
	b[8] = 6
	if _, err := DecodeRegistry(b); !errors.Is(err, base.ErrFormatVersion) {
		t.Fatalf("version 6: %v", err)
	}
	b[0] ^= 1
	if _, err := DecodeRegistry(b); !errors.Is(err, base.ErrBadMagic) {
		t.Fatalf("bad magic: %v", err)
	}
}

// FuzzDecodeRegistry: DecodeRegistry never panics; what it accepts, Encode writes again in a
// form that decodes to the same registry (the version may drop to the lowest that holds it).
func FuzzDecodeRegistry(f *testing.F) {
	for _, g := range registryGoldens {
		f.Add(readRegistryGolden(f, g.file))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRegistry(b)
		if err != nil {
			return
		}
		if r == nil {
			t.Fatal("nil registry without an error")
		}
		r2, err := DecodeRegistry(r.Encode())
		if err != nil {
			t.Fatalf("re-encoded registry: %v", err)
		}
		r.OpsOffset, r2.OpsOffset = 0, 0
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-encoded registry decodes to\n%+v\nwant\n%+v", r2, r)
		}
	})
}
