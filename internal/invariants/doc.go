// Package invariants says whether this build checks the expensive structure invariants, as
// Pebble's internal/invariants: Enabled is a constant, true only when the build has the
// "invariants" tag, so the checks it guards compile away in a normal build.
//
// What it turns on (each a panic "strata: invariant: …" when the check fails, since a failure
// means a bug, not bad input):
//
//   - fresh: Table.Verify of the whole FreshTable after every Seal (O(data));
//   - slice: the layout validation of every slice Table.Install installs (O(slice));
//   - lsm: after every manifest edit applied (logAndApply), that no table file is in the
//     version twice, besides the level-shape check that always runs.
//
// Run it with `go test -race -tags invariants` (scripts/test.sh does for these packages).
// It imports nothing; any package may import it.
package invariants
