//go:build arm64

package slice

import "github.com/strata-db/strata/asm_arm64"

// On arm64 the fingerprint search is asm_arm64's kernel (NEON or SVE, or
// its Go twin under the purego tag), chosen once at its init.
func init() { lowerBound = asm_arm64.LowerBound }
