//go:build !invariants

package invariants

// Enabled is false: the build has no "invariants" tag, and the checks it guards compile away.
const Enabled = false
