// Package flightjob is the part of the flight demo that runs on Kafka (issue 25 item 4), with
// the plain Go computation it is checked against. The single-process demo
// (bench/cmd/flightdemo) and the Kafka command (bench/cmd/flightkafka) share from here the
// delay statistics (DelayAcc and its codec), the delay codec and the length of the list of
// last delays.
//
// # The job on Kafka
//
// An input record is one flight: key the route "ORG-DST", value EncodeFlight (departure
// minute, delay). The input is in event-time order (the trace's order), so every input
// partition, a subsequence of it, is too: a partition's watermark (its largest event time) never
// passes a record still to come, no record is late, and the windows a partition fires are
// exactly those that end at or before its last event time, however the records were batched,
// whichever runner read them and however often it was killed. Per route key, three of the
// demo's states:
//
//	route "ORG-DST"            AggregatingState  delay count, sum, sum of squares, min, max
//	route "ORG-DST"            ListState         the last LastN delays (Add; Get + Update
//	                                             when the count exceeds LastN)
//	route, ns = day (8 bytes)  AggregatingState  the day's delay statistics: a tumbling
//	                                             event-time day window, fired by a timer at
//	                                             the day's last millisecond, emitted
//	                                             (WindowValue) and cleared
//
// Not on Kafka (the demo's other states): the per-origin MapState (its key is the origin, not
// the record's key: it needs a second, origin-keyed topic), the kept day history, the session
// windows, the TTL and the broadcast state.
//
// # The check
//
// Model replays the trace into Go maps. The check compares (1) the committed output, a
// multiset of window records, with the model's: no loss and no duplicate; (2) each route's
// statistics and last delays in the state the job committed last, restored from its
// checkpoints, with the model's.
package flightjob
