// Package changelog will hold Strata's durable short-term log of state changes
// (Flink's DSTL, FLIP-158): batched persistence of change records, checkpoints
// that upload only the unpersisted tail, periodic materialization, truncation,
// and restore as materialized snapshot plus replay — and the TTL layer with
// Flink's StateTtlConfig semantics.
//
// Not built yet: it is the subject of a later issue.
package changelog
