package scheduler

import "strconv"

// Class is the priority class of a task. A lower value is a higher priority: a free worker
// always takes the oldest queued task of the highest-priority class that may run (see
// invariant 2 in the package documentation). The values are explicit because Stats arrays,
// metrics and tests index by them; they are not stored on disk.
type Class uint8

const (
	// Transform turns sealed FreshTable segments into slices. Highest priority: writers wait
	// on it when the memory budget is full (backpressure).
	Transform Class = 0
	// Compaction merges slice chains and LSM levels, keeping reads short.
	Compaction Class = 1
	// Eviction moves cold slices into the LSM store, freeing memory.
	Eviction Class = 2
	// Persist stores the changelog's buffered records (one small object per persist). Its
	// own class, so that a reserved worker runs it beside a long checkpoint or
	// materialization upload: a Store whose changelog buffer is full waits for a persist,
	// never for an upload (issue 22).
	Persist Class = 3
	// Upload stores checkpoint and materialization files in checkpoint storage. Lowest
	// priority: it waits whenever in-memory work is ready.
	Upload Class = 4

	// NumClasses is the number of classes; valid classes are < NumClasses.
	NumClasses = 5
)

var classNames = [NumClasses]string{
	Transform:  "transform",
	Compaction: "compaction",
	Eviction:   "eviction",
	Persist:    "persist",
	Upload:     "upload",
}

// String returns the class name used as the value of the pprof label strata.task
// ("transform", "compaction", "eviction", "persist", "upload"), or "class(N)" for an invalid
// class.
func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return "class(" + strconv.Itoa(int(c)) + ")"
}
