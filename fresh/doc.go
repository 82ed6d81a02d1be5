// Package fresh is the FreshTable: the newest tier of Strata, holding the
// keyed state just written in off-heap segments with a per-segment swiss
// style hash index. (The full design document is being written; see the
// layouts in record.go and segment.go.)
package fresh
