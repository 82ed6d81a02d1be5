package strata

import (
	"fmt"

	"github.com/strata-db/strata/checkpoint"
)

// Bounds of MaxParallelism, as Flink's KeyGroupRangeAssignment.
const (
	// DefaultMaxParallelism is the number of key groups when Options.MaxParallelism is 0:
	// Flink's DEFAULT_LOWER_BOUND_MAX_PARALLELISM (128).
	DefaultMaxParallelism = 128
	// UpperBoundMaxParallelism is the largest number of key groups (1<<15), Flink's
	// UPPER_BOUND_MAX_PARALLELISM; a key group always fits in a uint16.
	UpperBoundMaxParallelism = 1 << 15
)

// KeyGroupRange is an inclusive range [Start, End] of key groups (ints), as Flink's
// KeyGroupRange. A Store owns one KeyGroupRange out of Options.MaxParallelism key groups;
// operations on a Key whose key group lies outside it fail with ErrKeyGroupOutOfRange. It is an
// alias of checkpoint.KeyGroupRange, the one range type that manifests, changelog segments and
// object names also record (Contains, NumberOfKeyGroups and the Flink-style String are its
// methods).
type KeyGroupRange = checkpoint.KeyGroupRange

// murmurHash is Flink's MathUtils.murmurHash(int): one murmur3 x86_32 round over a 4-byte
// input followed by the fmix32 finalizer, folded to a non-negative int
// (Integer.MIN_VALUE maps to 0).
func murmurHash(code int32) int32 {
	h := uint32(code)
	h *= 0xcc9e2d51
	h = h<<15 | h>>17
	h *= 0x1b873593
	h = h<<13 | h>>19
	h = h*5 + 0xe6546b64
	h ^= 4
	// bitMix (fmix32)
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	c := int32(h)
	switch {
	case c >= 0:
		return c
	case c != -1<<31:
		return -c
	default:
		return 0
	}
}

// AssignToKeyGroup returns the key group in [0, maxParallelism) of a key whose 32-bit hash
// (Java's key.hashCode()) is hash: murmurHash(hash) mod maxParallelism, exactly Flink's
// KeyGroupRangeAssignment.assignToKeyGroup / computeKeyGroupForKeyHash, so that a caller who
// supplies Flink's hash reproduces Flink's partitioning. It panics if maxParallelism is not in
// [1, UpperBoundMaxParallelism].
func AssignToKeyGroup(hash int32, maxParallelism int) int {
	checkMaxParallelism(maxParallelism)
	return int(murmurHash(hash)) % maxParallelism
}

// ComputeOperatorIndexForKeyGroup returns the operator (subtask) index in [0, parallelism)
// that owns keyGroup: keyGroup*parallelism/maxParallelism, as Flink's
// KeyGroupRangeAssignment.computeOperatorIndexForKeyGroup. It panics unless
// 1 <= parallelism <= maxParallelism <= UpperBoundMaxParallelism and
// 0 <= keyGroup < maxParallelism.
func ComputeOperatorIndexForKeyGroup(maxParallelism, parallelism, keyGroup int) int {
	checkParallelism(maxParallelism, parallelism)
	if keyGroup < 0 || keyGroup >= maxParallelism {
		panic(fmt.Sprintf("strata: invariant: key group %d not in [0, %d)", keyGroup, maxParallelism))
	}
	return keyGroup * parallelism / maxParallelism
}

// ComputeKeyGroupRangeForOperatorIndex returns the key groups owned by subtask operatorIndex
// when maxParallelism key groups are spread over parallelism subtasks, as Flink's
// KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex:
// Start = (operatorIndex*maxParallelism + parallelism - 1) / parallelism,
// End = ((operatorIndex+1)*maxParallelism - 1) / parallelism. The ranges of the subtasks
// 0..parallelism-1 partition [0, maxParallelism). It panics unless
// 1 <= parallelism <= maxParallelism <= UpperBoundMaxParallelism and
// 0 <= operatorIndex < parallelism.
func ComputeKeyGroupRangeForOperatorIndex(maxParallelism, parallelism, operatorIndex int) KeyGroupRange {
	checkParallelism(maxParallelism, parallelism)
	if operatorIndex < 0 || operatorIndex >= parallelism {
		panic(fmt.Sprintf("strata: invariant: operator index %d not in [0, %d)", operatorIndex, parallelism))
	}
	return KeyGroupRange{
		Start: (operatorIndex*maxParallelism + parallelism - 1) / parallelism,
		End:   ((operatorIndex+1)*maxParallelism - 1) / parallelism,
	}
}

func checkMaxParallelism(maxParallelism int) {
	if maxParallelism < 1 || maxParallelism > UpperBoundMaxParallelism {
		panic(fmt.Sprintf("strata: invariant: maxParallelism %d not in [1, %d]", maxParallelism, UpperBoundMaxParallelism))
	}
}

func checkParallelism(maxParallelism, parallelism int) {
	checkMaxParallelism(maxParallelism)
	if parallelism < 1 || parallelism > maxParallelism {
		panic(fmt.Sprintf("strata: invariant: parallelism %d not in [1, maxParallelism=%d]", parallelism, maxParallelism))
	}
}
