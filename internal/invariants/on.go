//go:build invariants

package invariants

// Enabled is true: the build has the "invariants" tag.
const Enabled = true
