package nexmark

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/strata-db/strata"
)

// Query is one Nexmark query as a keyed operator on a Backend. Event processes one event;
// Fire is called after the events whose watermark reached wm (in order, wm growing; math.MaxInt64
// at the end of the input, Flink's final watermark) and fires the windows it closes. Both
// write what the query emits to its Out.
type Query interface {
	Event(e *Event) error
	Fire(wm int64) error
}

// QuerySpec names a query and builds it on a back-end, emitting to out.
type QuerySpec struct {
	Name  string
	What  string // one line: what the query computes and with which state
	New   func(b Backend, out *Out) (Query, error)
	Flink float64 // Flink-on-RocksDB events/s per core published by nexmark/nexmark (0: none)
}

// Queries are the queries implemented, in the order of the suite.
var Queries = []QuerySpec{
	{"q0", "pass-through of the bids (no state): the floor", newQ0, 155e3},
	{"q1", "bids with prices in euros (no state)", newQ1, 0},
	{"q2", "bids of auctions whose id is a multiple of 123 (no state)", newQ2, 0},
	{"q3", "person ⋈ auction (sellers in OR, ID, CA; category 10): value + list state per person", newQ3, 0},
	{"q4", "average closing price per category: value state per auction, a timer at its expiry, then per category", newQ4, 0},
	{"q5", "hot items: bids per auction per HOP 10 s / 2 s window, the top ones per window: value state + timers, two stages", newQ5, 22.1e3},
	{"q7", "highest bid per 10 s tumbling window: value state per window + timers", newQ7, 12.3e3},
	{"q8", "new persons ⋈ their auctions per 10 s tumbling window: value state per (person, window) + timers", newQ8, 0},
	{"q11", "bids per bidder session, gap 10 s: merging windows (window set + accumulator per window, timer deletes)", newQ11, 39.7e3},
	{"q12", "bids per bidder per 10 s processing-time window: processing-time timers", newQ12, 0},
	{"q15", "bids, bidders and auctions per day by price rank, distinct counts: value state per (day, bidder|auction)", newQ15, 0},
	{"q16", "q15 per (channel, day)", newQ16, 0},
	{"q17", "per-auction per-day bid statistics: value state per (auction, day), updates", newQ17, 0},
	{"q18", "last bid per (bidder, auction): deduplication, a bid row per pair", newQ18, 53.7e3},
	{"q19", "top-10 bids per auction by price: map state per auction keyed by price (Flink's rank operator), a cache of rankings", newQ19, 44.0e3},
	{"q20", "bid ⋈ auction of category 10: unbounded join state (every bid kept in a list per auction)", newQ20, 19.0e3},
}

// Lookup returns the query named name.
func Lookup(name string) (QuerySpec, error) {
	for _, q := range Queries {
		if q.Name == name {
			return q, nil
		}
	}
	return QuerySpec{}, fmt.Errorf("nexmark: no query %q", name)
}

const (
	i64 = 8
	sec = 1000 // ms
)

var int64Codec = strata.Int64

// --- stateless ---

type q0 struct{ o *Out }

func newQ0(_ Backend, o *Out) (Query, error) { return &q0{o}, nil }

func (q *q0) Event(e *Event) error {
	if e.Kind == KindBid {
		q.o.Emit(bidHash(&e.Bid))
	}
	return nil
}
func (q *q0) Fire(int64) error { return nil }

type q1 struct{ o *Out }

func newQ1(_ Backend, o *Out) (Query, error) { return &q1{o}, nil }

func (q *q1) Event(e *Event) error {
	if e.Kind == KindBid {
		b := &e.Bid
		q.o.Emit(hh(uint64(b.Auction), uint64(b.Bidder), uint64(int64(float64(b.Price)*0.908)), uint64(b.DateTime), hs(b.Extra)))
	}
	return nil
}
func (q *q1) Fire(int64) error { return nil }

type q2 struct{ o *Out }

func newQ2(_ Backend, o *Out) (Query, error) { return &q2{o}, nil }

func (q *q2) Event(e *Event) error {
	if e.Kind == KindBid && e.Bid.Auction%123 == 0 {
		q.o.Emit(hh(uint64(e.Bid.Auction), uint64(e.Bid.Price)))
	}
	return nil
}
func (q *q2) Fire(int64) error { return nil }

// --- q3: person ⋈ auction, a regular join keyed by person id ---

type q3 struct {
	o        *Out
	persons  Value[int64, Acc]  // id -> hashes of name, city, state (persons in OR, ID, CA)
	auctions List[int64, int64] // seller -> ids of their auctions of category 10
}

func newQ3(b Backend, o *Out) (Query, error) {
	q := &q3{o: o}
	var err error
	if q.persons, err = NewValue[int64, Acc](b, "q3-person", int64Codec, accCodec{3}); err != nil {
		return nil, err
	}
	if q.auctions, err = NewList[int64, int64](b, "q3-auctions", int64Codec, int64Codec); err != nil {
		return nil, err
	}
	return q, nil
}

func (q *q3) Event(e *Event) error {
	switch e.Kind {
	case KindPerson:
		p := &e.Person
		if s := string(p.State); s != "OR" && s != "ID" && s != "CA" {
			return nil
		}
		row := Acc{int64(hs(p.Name)), int64(hs(p.City)), int64(hs(p.State))}
		if err := q.persons.Put(p.ID, Void, row); err != nil {
			return err
		}
		return q.auctions.ForEach(p.ID, Void, func(id int64) error {
			q.o.Emit(hh(uint64(row[0]), uint64(row[1]), uint64(row[2]), uint64(id)))
			return nil
		})
	case KindAuction:
		a := &e.Auction
		if a.Category != 10 {
			return nil
		}
		if err := q.auctions.Add(a.Seller, Void, a.ID); err != nil {
			return err
		}
		row, ok, err := q.persons.Get(a.Seller, Void)
		if ok {
			q.o.Emit(hh(uint64(row[0]), uint64(row[1]), uint64(row[2]), uint64(a.ID)))
		}
		return err
	}
	return nil
}
func (q *q3) Fire(int64) error { return nil }

// --- q4: average closing price per category ---

// q4 closes each auction at its expiry (an event-time timer; the SQL's join keeps only bids
// with dateTime BETWEEN A.dateTime AND A.expires, so nothing joins after it) with the highest
// such bid, and keeps per category the sum and number of closing prices, emitting the updated
// AVG (BIGINT: truncated) as Flink's GROUP BY category does. Bids come after their auction's
// first millisecond here (events are in order); a bid generated before its auction (the id
// lead) is dropped, as the SQL's BETWEEN drops it unless both share a millisecond.
type q4 struct {
	o        *Out
	auctions Value[int64, Acc] // id -> category, dateTime, expires, highest price, bids
	cats     Value[int64, Acc] // category -> sum of closing prices, auctions
	expiry   Timers[int64]
	fire     func(k, ns, ts int64) error
}

func newQ4(b Backend, o *Out) (Query, error) {
	q := &q4{o: o}
	var err error
	if q.auctions, err = NewValue[int64, Acc](b, "q4-auction", int64Codec, accCodec{5}); err != nil {
		return nil, err
	}
	if q.cats, err = NewValue[int64, Acc](b, "q4-category", int64Codec, accCodec{2}); err != nil {
		return nil, err
	}
	if q.expiry, err = NewTimers[int64](b, "q4-expiry", int64Codec, false); err != nil {
		return nil, err
	}
	q.fire = func(id, _, _ int64) error {
		a, _, err := q.auctions.Get(id, Void)
		if err != nil {
			return err
		}
		if err := q.auctions.Clear(id, Void); err != nil || a[4] == 0 {
			return err
		}
		c, ok, err := q.cats.Get(a[0], Void)
		if err != nil {
			return err
		}
		if ok {
			q.o.Retract(hh(uint64(a[0]), uint64(c[0]/c[1])))
		}
		c[0], c[1] = c[0]+a[3], c[1]+1
		q.o.Emit(hh(uint64(a[0]), uint64(c[0]/c[1])))
		return q.cats.Put(a[0], Void, c)
	}
	return q, nil
}

func (q *q4) Event(e *Event) error {
	switch e.Kind {
	case KindAuction:
		a := &e.Auction
		if err := q.auctions.Put(a.ID, Void, Acc{a.Category, a.DateTime, a.Expires}); err != nil {
			return err
		}
		return q.expiry.Register(a.ID, Void, a.Expires)
	case KindBid:
		b := &e.Bid
		a, ok, err := q.auctions.Get(b.Auction, Void)
		if err != nil || !ok || b.DateTime < a[1] || b.DateTime > a[2] || (a[4] > 0 && b.Price <= a[3]) {
			return err
		}
		a[3], a[4] = b.Price, a[4]+1
		return q.auctions.Put(b.Auction, Void, a)
	}
	return nil
}

func (q *q4) Fire(wm int64) error { return q.expiry.Advance(wm, q.fire) }

// --- q5: hot items ---

const (
	q5Size  = 10 * sec
	q5Slide = 2 * sec
)

// q5 counts bids per auction in 2 s slices and sums a window's 5 slices when it fires, as
// Flink's slicing window aggregation does for HOP windows (FLIP-145: a record updates one
// slice, not the 5 windows it belongs to): one read and one write per bid; per (auction,
// window) 5 reads at the firing, and the slice that no later window covers is cleared.
type q5 struct {
	o      *Out
	counts Value[int64, int64] // auction, ns = slice end -> bids in the slice
	wins   Timers[int64]       // auction, ns = window end, at end - 1
	maxes  Value[int64, Acc]   // window end -> max count, auctions at it, sum of their mixed hashes
	ends   Timers[int64]       // window end, at end - 1: the window's result is complete
	fire1  func(k, ns, ts int64) error
	fire2  func(k, ns, ts int64) error
}

func newQ5(b Backend, o *Out) (Query, error) {
	q := &q5{o: o}
	var err error
	if q.counts, err = NewValue[int64, int64](b, "q5-count", int64Codec, int64Codec); err != nil {
		return nil, err
	}
	if q.wins, err = NewTimers[int64](b, "q5-windows", int64Codec, false); err != nil {
		return nil, err
	}
	if q.maxes, err = NewValue[int64, Acc](b, "q5-max", int64Codec, accCodec{3}); err != nil {
		return nil, err
	}
	if q.ends, err = NewTimers[int64](b, "q5-ends", int64Codec, false); err != nil {
		return nil, err
	}
	q.fire1 = func(auction, end, _ int64) error {
		var n int64
		for s := end - q5Size + q5Slide; s <= end; s += q5Slide {
			c, _, err := q.counts.Get(auction, s)
			if err != nil {
				return err
			}
			n += c
		}
		if err := q.counts.Clear(auction, end-q5Size+q5Slide); err != nil {
			return err
		}
		m, _, err := q.maxes.Get(end, Void)
		if err != nil {
			return err
		}
		switch {
		case n > m[0]:
			m = Acc{n, 1, int64(mix64(uint64(auction)))}
		case n == m[0]:
			m[1]++
			m[2] += int64(mix64(uint64(auction)))
		default:
			return nil
		}
		if err := q.maxes.Put(end, Void, m); err != nil {
			return err
		}
		return q.ends.Register(end, Void, end-1)
	}
	q.fire2 = func(end, _, _ int64) error {
		m, _, err := q.maxes.Get(end, Void)
		if err != nil {
			return err
		}
		q.o.EmitN(m[1], hh(uint64(end), uint64(m[0]), uint64(m[2])))
		return q.maxes.Clear(end, Void)
	}
	return q, nil
}

func (q *q5) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	t, a := e.Bid.DateTime, e.Bid.Auction
	slice := t - t%q5Slide + q5Slide
	n, _, err := q.counts.Get(a, slice)
	if err != nil {
		return err
	}
	if err := q.counts.Put(a, slice, n+1); err != nil {
		return err
	}
	if n == 0 { // the windows that cover the slice
		for end := slice; end < slice+q5Size; end += q5Slide {
			if err := q.wins.Register(a, end, end-1); err != nil {
				return err
			}
		}
	}
	return nil
}

func (q *q5) Fire(wm int64) error {
	if err := q.wins.Advance(wm, q.fire1); err != nil {
		return err
	}
	return q.ends.Advance(wm, q.fire2)
}

// --- q7: highest bid per tumbling window ---

const q7Size = 10 * sec

type q7 struct {
	o    *Out
	max  Value[int64, Acc] // 0, ns = window end -> max price, bids at it, sum of their mixed hashes
	wins Timers[int64]
	fire func(k, ns, ts int64) error
}

func newQ7(b Backend, o *Out) (Query, error) {
	q := &q7{o: o}
	var err error
	if q.max, err = NewValue[int64, Acc](b, "q7-max", int64Codec, accCodec{3}); err != nil {
		return nil, err
	}
	if q.wins, err = NewTimers[int64](b, "q7-windows", int64Codec, false); err != nil {
		return nil, err
	}
	q.fire = func(k, end, _ int64) error {
		m, _, err := q.max.Get(k, end)
		if err != nil {
			return err
		}
		q.o.EmitN(m[1], hh(uint64(end), uint64(m[0]), uint64(m[2])))
		return q.max.Clear(k, end)
	}
	return q, nil
}

// Event keeps the bids at the window's highest price (as a count and a sum of row hashes): the
// rows of the SQL's join of the bids with their window's MAX(price). The SQL's BETWEEN also
// joins a bid at exactly window_end with the window before it; that bid belongs to the next
// window here (1 bid in about 10⁴ at 10 K events/s, and it must also equal the maximum).
func (q *q7) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	end := b.DateTime - b.DateTime%q7Size + q7Size
	m, ok, err := q.max.Get(0, end)
	if err != nil {
		return err
	}
	switch {
	case !ok || b.Price > m[0]:
		m = Acc{b.Price, 1, int64(mix64(bidHash(b)))}
	case b.Price == m[0]:
		m[1]++
		m[2] += int64(mix64(bidHash(b)))
	default:
		return nil
	}
	if err := q.max.Put(0, end, m); err != nil {
		return err
	}
	if !ok {
		return q.wins.Register(0, end, end-1)
	}
	return nil
}

func (q *q7) Fire(wm int64) error { return q.wins.Advance(wm, q.fire) }

// --- q8: new persons ⋈ their auctions per tumbling window ---

const q8Size = 10 * sec

type q8 struct {
	o    *Out
	seen Value[int64, Acc] // person id, ns = window end -> person seen, hash of name, auctions seen
	wins Timers[int64]
	fire func(k, ns, ts int64) error
}

func newQ8(b Backend, o *Out) (Query, error) {
	q := &q8{o: o}
	var err error
	if q.seen, err = NewValue[int64, Acc](b, "q8-seen", int64Codec, accCodec{3}); err != nil {
		return nil, err
	}
	if q.wins, err = NewTimers[int64](b, "q8-windows", int64Codec, false); err != nil {
		return nil, err
	}
	q.fire = func(id, end, _ int64) error {
		s, _, err := q.seen.Get(id, end)
		if err != nil {
			return err
		}
		if s[0] != 0 && s[2] != 0 {
			q.o.Emit(hh(uint64(id), uint64(s[1]), uint64(end-q8Size)))
		}
		return q.seen.Clear(id, end)
	}
	return q, nil
}

func (q *q8) Event(e *Event) error {
	var id, t int64
	switch e.Kind {
	case KindPerson:
		id, t = e.Person.ID, e.Person.DateTime
	case KindAuction:
		id, t = e.Auction.Seller, e.Auction.DateTime
	default:
		return nil
	}
	end := t - t%q8Size + q8Size
	s, ok, err := q.seen.Get(id, end)
	if err != nil {
		return err
	}
	if e.Kind == KindPerson {
		s[0], s[1] = 1, int64(hs(e.Person.Name))
	} else if s[2] != 0 {
		return nil
	} else {
		s[2] = 1
	}
	if err := q.seen.Put(id, end, s); err != nil {
		return err
	}
	if !ok {
		return q.wins.Register(id, end, end-1)
	}
	return nil
}

func (q *q8) Fire(wm int64) error { return q.wins.Advance(wm, q.fire) }

// --- q11: user sessions ---

const q11Gap = 10 * sec

// q11 runs Flink's merging session windows on in-order events: the bidder's latest window
// (Flink's MergingWindowSet, reduced to its newest entry: an older one can no longer merge)
// and an accumulator per window under its start as namespace; a bid that reaches the latest
// window (TimeWindow.intersects, ends inclusive) merges into it — its timer is deleted and one
// registered at the cover's end — or opens a new window.
type q11 struct {
	o    *Out
	win  Value[int64, Acc] // bidder -> latest window start, end
	acc  Value[int64, Acc] // bidder, ns = window start -> end, bids
	tims Timers[int64]     // bidder, ns = window start, at end - 1
	fire func(k, ns, ts int64) error
}

func newQ11(b Backend, o *Out) (Query, error) {
	q := &q11{o: o}
	var err error
	if q.win, err = NewValue[int64, Acc](b, "q11-window", int64Codec, accCodec{2}); err != nil {
		return nil, err
	}
	if q.acc, err = NewValue[int64, Acc](b, "q11-acc", int64Codec, accCodec{2}); err != nil {
		return nil, err
	}
	if q.tims, err = NewTimers[int64](b, "q11-sessions", int64Codec, false); err != nil {
		return nil, err
	}
	q.fire = func(bidder, start, _ int64) error {
		a, _, err := q.acc.Get(bidder, start)
		if err != nil {
			return err
		}
		q.o.Emit(hh(uint64(bidder), uint64(a[1]), uint64(start), uint64(a[0])))
		if err := q.acc.Clear(bidder, start); err != nil {
			return err
		}
		w, _, err := q.win.Get(bidder, Void)
		if err != nil || w[0] != start {
			return err
		}
		return q.win.Clear(bidder, Void)
	}
	return q, nil
}

func (q *q11) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b, t := e.Bid.Bidder, e.Bid.DateTime
	w, ok, err := q.win.Get(b, Void)
	if err != nil {
		return err
	}
	if ok && t <= w[1] && t+q11Gap >= w[0] {
		a, _, err := q.acc.Get(b, w[0])
		if err != nil {
			return err
		}
		end := max(w[1], t+q11Gap)
		a[0], a[1] = end, a[1]+1
		if err := q.acc.Put(b, w[0], a); err != nil {
			return err
		}
		if end == w[1] {
			return nil
		}
		if err := q.tims.Delete(b, w[0], w[1]-1); err != nil {
			return err
		}
		w[1] = end
		if err := q.win.Put(b, Void, w); err != nil {
			return err
		}
		return q.tims.Register(b, w[0], end-1)
	}
	w = Acc{t, t + q11Gap}
	if err := q.win.Put(b, Void, w); err != nil {
		return err
	}
	if err := q.acc.Put(b, t, Acc{t + q11Gap, 1}); err != nil {
		return err
	}
	return q.tims.Register(b, t, t+q11Gap-1)
}

func (q *q11) Fire(wm int64) error { return q.tims.Advance(wm, q.fire) }

// --- q12: processing-time windows ---

const q12Size = 10 * sec

// q12 counts bids per bidder in 10 s processing-time windows. Processing time is simulated
// deterministically as the time the generator would emit the event at its rate (its event
// time: Nexmark's wall-clock emission schedule), so the Strata run and the model agree;
// processing-time timers fire as it advances, and the end of the input fires the rest.
type q12 struct {
	o     *Out
	count Value[int64, int64] // bidder, ns = window end
	tims  Timers[int64]
	now   int64
	fire  func(k, ns, ts int64) error
}

func newQ12(b Backend, o *Out) (Query, error) {
	q := &q12{o: o, now: math.MinInt64}
	var err error
	if q.count, err = NewValue[int64, int64](b, "q12-count", int64Codec, int64Codec); err != nil {
		return nil, err
	}
	if q.tims, err = NewTimers[int64](b, "q12-windows", int64Codec, true); err != nil {
		return nil, err
	}
	q.fire = func(bidder, end, _ int64) error {
		n, _, err := q.count.Get(bidder, end)
		if err != nil {
			return err
		}
		q.o.Emit(hh(uint64(bidder), uint64(n), uint64(end)))
		return q.count.Clear(bidder, end)
	}
	return q, nil
}

func (q *q12) Event(e *Event) error {
	if now := e.Time(); now > q.now {
		q.now = now
		if err := q.tims.Advance(now, q.fire); err != nil {
			return err
		}
	}
	if e.Kind != KindBid {
		return nil
	}
	end := q.now - q.now%q12Size + q12Size
	n, _, err := q.count.Get(e.Bid.Bidder, end)
	if err != nil {
		return err
	}
	if err := q.count.Put(e.Bid.Bidder, end, n+1); err != nil {
		return err
	}
	if n == 0 {
		return q.tims.Register(e.Bid.Bidder, end, end-1)
	}
	return nil
}

func (q *q12) Fire(wm int64) error {
	if wm == math.MaxInt64 {
		return q.tims.Advance(wm, q.fire)
	}
	return nil
}

// --- q15, q16, q17: per-day aggregates (unbounded GROUP BY: every bid updates a row) ---

const dayMs = 24 * 3600 * sec

// rank returns the price rank bit of the queries' FILTERs: < 10 000, < 1 000 000, the rest.
func rank(price int64) int64 {
	switch {
	case price < 10_000:
		return 1
	case price < 1_000_000:
		return 2
	}
	return 4
}

// dayAgg is the state of q15 (key: day) and q16 (key: channel hash, day): the counters of the
// group (bids, bidders, auctions, each total and by rank: 12 counts in two Accs) and the price
// ranks seen per distinct bidder and auction of the group (Flink's distinct MapState, as a value
// per (group, bidder|auction)).
type dayAgg struct {
	o        *Out
	counts   Value[Pair, Acc] // group -> bids: total, rank1..3; bidders: total, rank1..3
	auctions Value[Pair, Acc] // group -> distinct auctions: total, rank1..3
	bidders  Value[Pair, int64]
	aucSeen  Value[Pair, int64]
	group    func(b *Bid) Pair
}

func newDayAgg(b Backend, o *Out, name string, group func(b *Bid) Pair) (*dayAgg, error) {
	q := &dayAgg{o: o, group: group}
	var err error
	if q.counts, err = NewValue[Pair, Acc](b, name+"-counts", pairCodec{}, accCodec{8}); err != nil {
		return nil, err
	}
	if q.auctions, err = NewValue[Pair, Acc](b, name+"-auctions", pairCodec{}, accCodec{4}); err != nil {
		return nil, err
	}
	if q.bidders, err = NewValue[Pair, int64](b, name+"-bidders", pairCodec{}, int64Codec); err != nil {
		return nil, err
	}
	if q.aucSeen, err = NewValue[Pair, int64](b, name+"-auction-ranks", pairCodec{}, int64Codec); err != nil {
		return nil, err
	}
	return q, nil
}

func rowHash(g Pair, a, b *Acc) uint64 {
	return hh(uint64(g.A), uint64(g.B), uint64(a[0]), uint64(a[1]), uint64(a[2]), uint64(a[3]), uint64(a[4]), uint64(a[5]),
		uint64(a[6]), uint64(a[7]), uint64(b[0]), uint64(b[1]), uint64(b[2]), uint64(b[3]))
}

// distinct adds rank r to the ranks seen of (g, id) in seen and counts, in c[off:], each
// rank seen for the first time (c[off] counts the first sighting at all).
func distinct(seen Value[Pair, int64], g Pair, id, r int64, c []int64) error {
	k := Pair{g.A ^ int64(mix64(uint64(g.B))), id}
	m, _, err := seen.Get(k, g.B)
	if err != nil || m&r != 0 {
		return err
	}
	if m == 0 {
		c[0]++
	}
	c[bitIndex(r)]++
	return seen.Put(k, g.B, m|r)
}

// bitIndex returns 1, 2, 3 for the rank bits 1, 2, 4.
func bitIndex(r int64) int { return int(r>>1) + 1 }

func (q *dayAgg) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	g, r := q.group(b), rank(b.Price)
	c, okc, err := q.counts.Get(g, Void)
	if err != nil {
		return err
	}
	a, _, err := q.auctions.Get(g, Void)
	if err != nil {
		return err
	}
	if okc {
		q.o.Retract(rowHash(g, &c, &a))
	}
	c[0]++
	c[bitIndex(r)]++
	if err := distinct(q.bidders, g, b.Bidder, r, c[4:]); err != nil {
		return err
	}
	a0 := a
	if err := distinct(q.aucSeen, g, b.Auction, r, a[:]); err != nil {
		return err
	}
	q.o.Emit(rowHash(g, &c, &a))
	if err := q.counts.Put(g, Void, c); err != nil {
		return err
	}
	if a != a0 {
		return q.auctions.Put(g, Void, a)
	}
	return nil
}

func (q *dayAgg) Fire(int64) error { return nil }

func newQ15(b Backend, o *Out) (Query, error) {
	return newDayAgg(b, o, "q15", func(b *Bid) Pair { return Pair{0, b.DateTime / dayMs} })
}

func newQ16(b Backend, o *Out) (Query, error) {
	return newDayAgg(b, o, "q16", func(b *Bid) Pair { return Pair{int64(hs(b.Channel)), b.DateTime / dayMs} })
}

type q17 struct {
	o   *Out
	agg Value[int64, Acc] // auction, ns = day -> total, rank1..3, min, max, sum
}

func newQ17(b Backend, o *Out) (Query, error) {
	q := &q17{o: o}
	var err error
	q.agg, err = NewValue[int64, Acc](b, "q17-auction-day", int64Codec, accCodec{7})
	return q, err
}

func (q *q17) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	day := b.DateTime/dayMs + 1 // + 1: never Void
	a, ok, err := q.agg.Get(b.Auction, day)
	if err != nil {
		return err
	}
	h := func(a *Acc) uint64 {
		return hh(uint64(b.Auction), uint64(day), uint64(a[0]), uint64(a[1]), uint64(a[2]), uint64(a[3]), uint64(a[4]),
			uint64(a[5]), uint64(a[6]), uint64(a[6]/a[0]))
	}
	if ok {
		q.o.Retract(h(&a))
		a[4], a[5] = min(a[4], b.Price), max(a[5], b.Price)
	} else {
		a[4], a[5] = b.Price, b.Price
	}
	a[0]++
	a[bitIndex(rank(b.Price))]++
	a[6] += b.Price
	q.o.Emit(h(&a))
	return q.agg.Put(b.Auction, day, a)
}

func (q *q17) Fire(int64) error { return nil }

// --- q18: last bid per (bidder, auction) ---

type q18 struct {
	o    *Out
	last Value[Pair, BidRow]
}

func newQ18(b Backend, o *Out) (Query, error) {
	q := &q18{o: o}
	var err error
	q.last, err = NewValue[Pair, BidRow](b, "q18-last", pairCodec{}, BidRowCodec{})
	return q, err
}

// Event keeps the newest bid of its (bidder, auction), as Flink's deduplication keeping the
// last row by event time (in-order events: every bid replaces the one before), emitting the
// update (-U of the old row, +U of the new).
func (q *q18) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	k := Pair{b.Bidder, b.Auction}
	old, ok, err := q.last.Get(k, Void)
	if err != nil {
		return err
	}
	if ok {
		q.o.Retract(old.Hash())
	}
	row := RowOf(b)
	q.o.Emit(row.Hash())
	return q.last.Put(k, Void, row)
}

func (q *q18) Fire(int64) error { return nil }

// --- q19: top 10 bids per auction ---

const q19N = 10

// topRow is a bid of a ranking: price, time, bidder and the hash of its whole row (the row's
// other fields reduced to it: the ranking's state holds 32 bytes per bid, not the row).
type topRow struct{ Price, DateTime, Bidder, Hash int64 }

// topCodec encodes rows (a price's rows of a ranking) as 32 bytes per row, in order. Decode
// returns a slice of its scratch buffer, valid until the next Decode.
type topCodec struct{ scratch *[]topRow }

func (topCodec) Append(dst []byte, rs []topRow) []byte {
	for _, r := range rs {
		for _, x := range [4]int64{r.Price, r.DateTime, r.Bidder, r.Hash} {
			dst = binary.BigEndian.AppendUint64(dst, uint64(x))
		}
	}
	return dst
}

func (c topCodec) Decode(b []byte) ([]topRow, error) {
	if len(b)%32 != 0 {
		return nil, fmt.Errorf("%w: ranking: %d bytes", ErrCodec, len(b))
	}
	rs := (*c.scratch)[:0]
	for ; len(b) > 0; b = b[32:] {
		u := binary.BigEndian.Uint64
		rs = append(rs, topRow{int64(u(b)), int64(u(b[8:])), int64(u(b[16:])), int64(u(b[24:]))})
	}
	*c.scratch = rs
	return rs, nil
}

// q19 keeps each auction's ranking as Flink's AppendOnlyTopNFunction does. Its data state is
// a map keyed by the sort key (the price) whose value is the ranking's rows of that price, in
// arrival order, so a bid entering the top 10 writes its price's rows and the evicted row's
// price's rows, not the whole ranking. It reads rankings through a cache on the Go heap
// (Flink's TopNBuffer cache, table.exec.rank.topn-cache-size, 10 000 keys by default) holding
// each auction's ranking, best first; a miss (a new auction, or after a restore: the cache is
// not state) reads the auction's map. The cache is cleared when it passes q19Cache auctions
// (Flink evicts the least recently used one). Both back-ends run this code, so the ratio
// compares their states only.
type q19 struct {
	o     *Out
	rows  Map[int64, int64, []topRow] // auction, price -> the ranking's rows of that price
	cache map[int64][]topRow
	scr   []topRow // scan's scratch
}

const q19Cache = 10_000

func newQ19(b Backend, o *Out) (Query, error) {
	q := &q19{o: o, cache: make(map[int64][]topRow, q19Cache)}
	var err error
	q.rows, err = NewMap[int64, int64, []topRow](b, "q19-rows", int64Codec, int64Codec, topCodec{scratch: new([]topRow)})
	return q, err
}

// scan reads an auction's ranking from its map, best first (a stable sort keeps each
// price's rows in arrival order).
func (q *q19) scan(auction int64) ([]topRow, error) {
	q.scr = q.scr[:0]
	err := q.rows.ForEach(auction, Void, func(_ int64, rs []topRow) error {
		q.scr = append(q.scr, rs...)
		return nil
	})
	rs := make([]topRow, len(q.scr), q19N)
	copy(rs, q.scr)
	slices.SortStableFunc(rs, func(a, b topRow) int { return cmp.Compare(b.Price, a.Price) })
	return rs, err
}

// run returns the rows of price p in a ranking (best first): a run, possibly empty.
func q19Run(rs []topRow, p int64) []topRow {
	i, _ := slices.BinarySearchFunc(rs, p, func(r topRow, p int64) int { return cmp.Compare(p, r.Price) })
	j := i
	for j < len(rs) && rs[j].Price == p {
		j++
	}
	return rs[i:j]
}

// Event ranks the bid among its auction's best 10 by price (ties: the earlier first), as
// ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) <= 10, emitting the rows that
// enter and leave the top 10 (not the rank numbers' shifts).
func (q *q19) Event(e *Event) error {
	if e.Kind != KindBid {
		return nil
	}
	b := &e.Bid
	rs, ok := q.cache[b.Auction]
	if !ok {
		var err error
		if rs, err = q.scan(b.Auction); err != nil {
			return err
		}
		if len(q.cache) >= q19Cache {
			clear(q.cache)
		}
		q.cache[b.Auction] = rs
	}
	i, _ := slices.BinarySearchFunc(rs, b.Price, func(r topRow, p int64) int {
		if r.Price >= p {
			return -1
		}
		return 1
	})
	if i >= q19N {
		return nil
	}
	if len(rs) == q19N {
		ev := rs[q19N-1]
		q.o.Retract(uint64(ev.Hash))
		rs = rs[:q19N-1]
		var err error
		if left := q19Run(rs, ev.Price); len(left) > 0 {
			err = q.rows.Put(b.Auction, Void, ev.Price, slices.Clone(left))
		} else {
			err = q.rows.Remove(b.Auction, Void, ev.Price)
		}
		if err != nil {
			return err
		}
	}
	r := topRow{b.Price, b.DateTime, b.Bidder, int64(bidHash(b))}
	rs = slices.Insert(rs, i, r)
	q.cache[b.Auction] = rs
	q.o.Emit(uint64(r.Hash))
	// The model keeps the value it is given: a copy, not the cache's array.
	return q.rows.Put(b.Auction, Void, b.Price, slices.Clone(q19Run(rs, b.Price)))
}

func (q *q19) Fire(int64) error { return nil }

// --- q20: bid ⋈ auction of category 10 ---

// q20 is Flink's regular inner join keyed by auction id without a unique key on the bid side:
// every bid is kept (a list per auction), whatever its auction's category (the category filter
// applies to the auction side only), so the state grows without bound, and an auction of
// category 10 is joined with the bids that came before it.
type q20 struct {
	o        *Out
	auctions Value[int64, AuctionRow]
	bids     List[int64, BidRow]
}

func newQ20(b Backend, o *Out) (Query, error) {
	q := &q20{o: o}
	var err error
	if q.auctions, err = NewValue[int64, AuctionRow](b, "q20-auction", int64Codec, AuctionRowCodec{}); err != nil {
		return nil, err
	}
	q.bids, err = NewList[int64, BidRow](b, "q20-bids", int64Codec, BidRowCodec{})
	return q, err
}

func (q *q20) Event(e *Event) error {
	switch e.Kind {
	case KindAuction:
		a := &e.Auction
		if a.Category != 10 {
			return nil
		}
		row := AuctionRowOf(a)
		if err := q.auctions.Put(a.ID, Void, row); err != nil {
			return err
		}
		ah := row.Hash()
		return q.bids.ForEach(a.ID, Void, func(b BidRow) error {
			q.o.Emit(hh(b.Hash(), ah))
			return nil
		})
	case KindBid:
		b := &e.Bid
		row := RowOf(b)
		if err := q.bids.Add(b.Auction, Void, row); err != nil {
			return err
		}
		a, ok, err := q.auctions.Get(b.Auction, Void)
		if ok {
			q.o.Emit(hh(row.Hash(), a.Hash()))
		}
		return err
	}
	return nil
}

func (q *q20) Fire(int64) error { return nil }
