package strata

import (
	"encoding/binary"
	"flag"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/strata-db/strata/internal/engine"

	goldenfile "github.com/strata-db/strata/internal/golden"
)

var updateGolden = flag.Bool("update", false, "TestGoldenRegistryV1: rewrite testdata/registry-v1.bin")

// goldenRegistryStore returns an in-memory Store holding the fixed content of
// testdata/registry-v1.bin: MaxParallelism 256 over key groups 3..200, one state of every kind
// (codecs of both identities: a named type and an instantiated generic), ids 1..5, and a state
// recovered from disk but not registered again (id 7; the next id is 9).
func goldenRegistryStore(t *testing.T) *Store {
	t.Helper()
	s := openTest(t, Options{MaxParallelism: 256, KeyGroups: &KeyGroupRange{Start: 3, End: 200}})
	must(NewValueState(s, ValueDescriptor[[]byte]{Name: "value", Codec: Bytes}))
	must(NewListState(s, ListDescriptor[int64]{Name: "list", Codec: Int64}))
	must(NewMapState(s, MapDescriptor[string, int64]{Name: "map", KeyCodec: String, ValueCodec: Int64}))
	must(NewReducingState(s, ReducingDescriptor[int64]{Name: "reducing", Codec: Int64, Reduce: func(a, b int64) int64 { return a + b }}))
	must(NewAggregatingState(s, avgDescriptor("aggregating")))
	s.persisted = map[string]engine.PersistedState{
		"old": {ID: 7, Kind: kindMap, Codecs: [2]string{"example.com/job.KeyCodec", "*example.com/job.Row"}},
	}
	s.nextID = 9
	return s
}

// TestGoldenRegistryV1: the state registry (persist.go, registryVersion 1) encodes the fixed
// content of goldenRegistryStore to exactly testdata/registry-v1.bin, and the file decodes to
// it. If the encoding check fails, the format changed: bump registryVersion and add a new
// golden file rather than regenerating this one. Run with -update to (re)create the file.
func TestGoldenRegistryV1(t *testing.T) {
	s := goldenRegistryStore(t)
	fresh := s.encodeRegistry()
	path := filepath.Join("testdata", "registry-v1.bin")
	golden := goldenfile.Check(t, path, fresh, *updateGolden)
	r, err := decodeReg(golden)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	const pkg = "github.com/strata-db/strata."
	want := &engine.Registry{MaxParallelism: 256, KeyGroups: KeyGroupRange{Start: 3, End: 200}, NextID: 9, States: map[string]engine.PersistedState{
		"value":       {ID: 1, Kind: kindValue, Codecs: [2]string{pkg + "bytesCodec", ""}},
		"list":        {ID: 2, Kind: kindList, Codecs: [2]string{pkg + "int64Codec", ""}},
		"map":         {ID: 3, Kind: kindMap, Codecs: [2]string{pkg + "stringCodec", pkg + "int64Codec"}},
		"reducing":    {ID: 4, Kind: kindReducing, Codecs: [2]string{pkg + "int64Codec", ""}},
		"aggregating": {ID: 5, Kind: kindAggregating, Codecs: [2]string{pkg + "avgCodec", ""}},
		"old":         {ID: 7, Kind: kindMap, Codecs: [2]string{"example.com/job.KeyCodec", "*example.com/job.Row"}},
	}}
	if !reflect.DeepEqual(r.Registry, want) || r.ops != nil {
		t.Fatalf("%s decodes to\n%+v\nwant\n%+v", path, r, want)
	}
}

// TestGoldenRegistryV3: a registry with TTL states (persist.go, registryVersion 3: a flags
// byte per state) encodes to exactly testdata/registry-v3.bin, without and with operator
// state, and decodes back; run with -update to (re)create the files.
func TestGoldenRegistryV3(t *testing.T) {
	s := openTest(t, Options{MaxParallelism: 256, KeyGroups: &KeyGroupRange{Start: 3, End: 200}})
	ttl := &TTLConfig{TTL: time.Hour}
	must(NewValueState(s, ValueDescriptor[[]byte]{Name: "value", Codec: Bytes, TTL: ttl}))
	must(NewListState(s, ListDescriptor[int64]{Name: "list", Codec: Int64}))
	must(NewMapState(s, MapDescriptor[string, int64]{Name: "map", KeyCodec: String, ValueCodec: Int64, TTL: ttl}))
	must(NewReducingState(s, ReducingDescriptor[int64]{Name: "reducing", Codec: Int64, TTL: &TTLConfig{TTL: time.Hour, UpdateType: TTLUpdateDisabled},
		Reduce: func(a, b int64) int64 { return a + b }}))
	s.persisted = map[string]engine.PersistedState{
		"old": {ID: 7, Kind: kindList, Codecs: [2]string{"acme/job.Row", ""}, TTL: true},
	}
	s.nextID = 9
	const pkg = "github.com/strata-db/strata."
	want := map[string]engine.PersistedState{
		"value":    {ID: 1, Kind: kindValue, Codecs: [2]string{pkg + "bytesCodec", ""}, TTL: true},
		"list":     {ID: 2, Kind: kindList, Codecs: [2]string{pkg + "int64Codec", ""}},
		"map":      {ID: 3, Kind: kindMap, Codecs: [2]string{pkg + "stringCodec", pkg + "int64Codec"}, TTL: true},
		"reducing": {ID: 4, Kind: kindReducing, Codecs: [2]string{pkg + "int64Codec", ""}},
		"old":      {ID: 7, Kind: kindList, Codecs: [2]string{"acme/job.Row", ""}, TTL: true},
	}
	for _, c := range []struct {
		path string
		ops  *engine.OpSnapshot
	}{{"testdata/registry-v3.bin", nil}, {"testdata/registry-v3-ops.bin", goldenOpSnapshotV1()}} {
		r := s.registry()
		var golden []byte
		if c.ops == nil {
			golden = goldenfile.Check(t, c.path, r.Encode(), *updateGolden)
		} else { // its operator state blob is of version 1, no longer written: decoded only
			golden = goldenfile.Read(t, c.path)
		}
		if v := binary.LittleEndian.Uint16(golden[8:]); v != 3 {
			t.Fatalf("%s: version %d", c.path, v)
		}
		got, err := decodeReg(golden)
		if err != nil {
			t.Fatalf("decoding %s: %v", c.path, err)
		}
		if !maps.Equal(got.States, want) || got.NextID != 9 || got.MaxParallelism != 256 || (c.ops != nil) != (got.ops != nil) ||
			(c.ops != nil && !opEqual(got.ops, c.ops)) {
			t.Fatalf("%s decodes to %+v", c.path, got)
		}
	}
}

// TestGoldenRegistryV5: the state registry with state id aliases (persist.go, version 5)
// encodes goldenRegistryStore's registry with aliases of two states (one of them persisted
// only) to exactly testdata/registry-v5.bin, and the file decodes back to it.
func TestGoldenRegistryV5(t *testing.T) {
	s := goldenRegistryStore(t)
	s.aliases = map[string][]engine.IDAlias{"list": {{Lo: 3, Hi: 99, ID: 8}}, "old": {{Lo: 100, Hi: 150, ID: 2}, {Lo: 151, Hi: 200, ID: 1}}}
	r := s.registry()
	golden := goldenfile.Check(t, "testdata/registry-v5.bin", r.Encode(), *updateGolden)
	got, err := decodeReg(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got.States, r.States) || !maps.EqualFunc(got.Aliases, r.Aliases, slices.Equal) || got.NextID != 9 {
		t.Fatalf("registry-v5.bin decodes to %+v", got)
	}
	if v := binary.LittleEndian.Uint16(golden[8:]); v != 5 {
		t.Fatalf("version %d", v)
	}
}
