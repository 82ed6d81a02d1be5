//go:build !race && !invariants

package strata

// guard detects overlapping use of a Store from two goroutines. In normal builds it is empty
// and its methods compile to nothing; see guard_on.go.
type guard struct{}

func (*guard) enter() {}
func (*guard) exit()  {}
