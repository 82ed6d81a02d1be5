package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/strata-db/strata/bench/internal/report"
)

// matches is the testing package's -bench matching of a full benchmark name: each
// /-separated level of the name against the pattern's level of the same index, levels
// beyond the pattern's unconstrained (none of gatedBench's levels has a / inside a group).
func matches(t *testing.T, pattern, name string) bool {
	pl, nl := strings.Split(pattern, "/"), strings.Split(name, "/")
	for i, s := range nl {
		if i >= len(pl) {
			break
		}
		ok, err := regexp.MatchString(pl[i], s)
		if err != nil {
			t.Fatalf("pattern %q: %v", pattern, err)
		}
		if !ok {
			return false
		}
	}
	return len(nl) >= len(pl)
}

// TestGatedBenchCoversGates: -fresh runs, at full depth, the Strata and peer row of every gate.
func TestGatedBenchCoversGates(t *testing.T) {
	for _, g := range report.Gates {
		impls := []string{"strata"}
		if g.Peer != "" {
			impls = append(impls, g.Peer)
		}
		for _, impl := range impls {
			name := "Benchmark" + report.Join(g.Workload, impl, g.Row)
			found := false
			for _, p := range gatedBench {
				found = found || matches(t, p, name)
			}
			if !found {
				t.Errorf("no gatedBench pattern runs %s", name)
			}
		}
	}
	if matches(t, gatedBench[0], "BenchmarkFlinkValue/keys=1M/key=8B/impl=badger/op=get") {
		t.Error("gatedBench runs peers no gate reads")
	}
}
