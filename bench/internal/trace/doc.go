// Package trace decodes the US flight records of testdata/ (flights-3m.parquet, flights-20k.json)
// once into a compact in-memory trace that the demo job and the tests replay from memory.
//
// Terms:
//
//   - airport id: index into Trace.Airports (IATA codes, in order of first appearance).
//   - route id: index into Trace.Routes, an (origin, destination) pair of airport ids, in order of
//     first appearance.
//   - minute: departure time in minutes since the Unix epoch, taken from the local wall-clock
//     time at the origin as if it were UTC (the files carry no zone; see testdata/SOURCE.md).
//   - day: minute / 1440, the event-time day of a row.
//
// Layout of one row (12 bytes with alignment padding, Go struct Row):
//
//	+-----------+---------+------------+---------+-----------+
//	| Minute u32| Delay i16| Distance u16| Route u16| (pad 2) |
//	+-----------+---------+------------+---------+-----------+
//
// Invariants:
//
//  1. Rows are in non-decreasing Minute order (event-time order); Load* sorts stably if the input
//     is not, so the order of equal minutes is the file's order.
//  2. Every Row.Route < len(Trace.Routes) and every Route's Origin and Dest < len(Trace.Airports).
//  3. Delay fits int16 and Distance fits uint16; a row outside these ranges is an error
//     (ErrRange), never a silent truncation.
package trace
