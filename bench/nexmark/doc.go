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
package nexmark
