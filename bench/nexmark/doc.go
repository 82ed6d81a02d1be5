// Package nexmark is the Nexmark benchmark in Go: a faithful, deterministic generator of its
// auction site's events (persons, auctions and bids), written from the published parameters
// of the Nexmark configuration (nexmark/nexmark's NexmarkConfiguration and generator), and its
// queries as keyed operators written once over two state back-ends: Strata, and a plain Go
// model (Go maps and a heap, no serialization), so that their ratio measures the state
// back-end and not the operator code.
//
// # Generator (gen.go)
//
// Event n (n = 0, 1, ...) is a function of (seed, rate, n) alone:
//
//  1. Its kind is n mod 50: 0 a person, 1..3 an auction, 4..49 a bid (1 : 3 : 46).
//  2. Its event time is DefaultBaseTime + ⌊n × 10⁶ / rate⌋ µs, in ms (events are in order:
//     Nexmark's out-of-order group size 1); the watermark after it is its time − 4 s.
//  3. Person and auction ids are dense from 1000 in event order; a bid names one of the last
//     100 auctions (+ 10 ahead), hot (the first of the last group of 100) with probability
//     1/2; a bidder or seller is one of the last 1000 persons (+ 10 ahead), hot with
//     probability 3/4 (bidders are the second of the group, sellers the first).
//  4. Prices are round(10^(6u) × 100) cents; extras pad persons, auctions and bids to 200,
//     500 and 100 bytes on average (± 20 %, uniform).
//  5. Its random draws come from splitmix64 seeded with mix(seed, n): any range of events is
//     generated alone (splittable across workers), and every run is identical.
//
// # Operators (backend.go, queries.go)
//
// A query is a keyed operator built on a Backend from three state kinds: Value and List per
// (key, namespace) — Flink's ValueState and ListState — and Timers — Flink's
// InternalTimerService of one time domain. Keys are comparable Go values (int64, Pair) with a
// strata.Codec for Strata; namespaces are int64 (a window's end, a window's start, a day),
// Void (0) outside windows. On Strata a Value is a ValueState, a List a ListState, Timers a
// TimerService[int64], the key encoded by its codec and the namespace as 8 bytes big-endian;
// on the model they are map[(key, namespace)]T, map[...][]T and a binary heap with the set of
// pending timers beside it (a deleted timer leaves the set; the heap skips it).
//
//  6. The operator code is the same on both back-ends; the model holds Go values (rows with
//     Go strings), Strata their encodings (rows.go: fixed-width big-endian integers, then text).
//  7. Windows are Flink's: an event-time window [start, end) fires when the watermark reaches
//     end − 1 (window.maxTimestamp()); the driver (run.go) advances the watermark after each
//     event whose time moved it, and to math.MaxInt64 at the end of the input.
//  8. What a query emits is reduced to an Out: rows, changes and a commutative sum of mixed row
//     hashes (retractions subtract). Timers of equal timestamps fire in an order of the
//     back-end's (Strata: key group, then key hash), so no output may depend on that order:
//     q5's per-window maximum is a second stage with its own timer service, advanced after
//     the first.
//  9. A checkpoint's input position (Position) is the number of events done and the Out at
//     that point; the state after events [0, n) plus the replay of [n, N) from a restored
//     Store emits what a run of [0, N) emits (TestRestoreMatchesModel).
//
// # Where the queries depart from Nexmark's SQL
//
//   - q7: a bid at exactly a window's end is not joined with the window before it (the SQL's
//     BETWEEN includes it): about 1 bid in 10⁴, which must also carry that window's maximum.
//   - q8: the person side keeps a hash of the name, not the name.
//   - q12: processing time is simulated as the generator's emission schedule (the event time),
//     so that both back-ends see the same windows.
//   - q16: the channel is keyed by its 64-bit hash.
//   - q19: the ranking holds (price, time, bidder, hash of the row) per bid, not the row, and
//     its output is the rows entering and leaving the top 10, not the rank numbers' shifts.
//     Its state is Flink's rank operator's (a map per auction keyed by price, read through a
//     cache of rankings on the Go heap); the cache is cleared when full rather than LRU.
//   - q4 closes an auction at its expiry (a timer) instead of updating its maximum on every
//     bid; its final rows are the SQL's.
//   - q6, q9, q10, q13, q14, q21, q22 are not implemented.
package nexmark
