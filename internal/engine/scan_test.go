package engine

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/strata-db/strata/checkpoint"
)

// TestScanReusesLowerWalk: a scan closed gives its lower-tier walk (and the read buffers it
// holds, 256 KiB per table read) to the next scan, so a TTL cleanup cursor that starts a new
// scan every few accesses over a small state does not allocate them each time (the model's
// ttl configuration spent most of its time there: 95 s → 16 s).
func TestScanReusesLowerWalk(t *testing.T) {
	e := openTest(t, Options{Dir: t.TempDir(), SegmentSize: 4 << 20})
	v := bytes.Repeat([]byte{3}, 100)
	const n = 2000
	for i := uint64(0); i < n; i++ {
		k, h := testKey(1, u64(i))
		if err := e.Apply(opPut(k, h, v)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Persist(nil); err != nil {
		t.Fatal(err)
	}
	pass := func() {
		sc := e.NewScan(ScanSpec{State: 1, AnyNamespace: true, KeyGroups: checkpoint.KeyGroupRange{Start: 0, End: 127}})
		defer sc.Close()
		got := 0
		for {
			keys, _, err := sc.Next(1024)
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) == 0 {
				break
			}
			got += len(keys)
		}
		if got != n {
			t.Fatalf("scan yielded %d keys, want %d", got, n)
		}
	}
	pass() // the walk's buffers are made here
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	for range 5 {
		pass()
	}
	runtime.ReadMemStats(&m1)
	// Each pass allocates its batches' key arenas (2000 keys of about 14 bytes) and the scan's
	// own staging (about 72 KiB for batches of 1024), well under one read buffer of 256 KiB.
	if per := (m1.TotalAlloc - m0.TotalAlloc) / 5; per > 200<<10 {
		t.Errorf("a scan pass allocated %d bytes: its lower-tier walk's buffers were not reused", per)
	}
}
