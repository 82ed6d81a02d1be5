package nexmark

import (
	"math"
	"math/bits"
	"strconv"
)

// The generator's parameters: the defaults of the Nexmark benchmark's NexmarkConfiguration and
// generator (nexmark/nexmark, nexmark-flink; the Beam original has the same ones).
const (
	PersonProportion  = 1  // events of every TotalProportion that are persons
	AuctionProportion = 3  // ... auctions
	BidProportion     = 46 // ... bids
	TotalProportion   = PersonProportion + AuctionProportion + BidProportion

	AvgPersonBytes  = 200 // average size of a person in bytes (its extra field pads to it)
	AvgAuctionBytes = 500 // ... of an auction
	AvgBidBytes     = 100 // ... of a bid

	HotAuctionRatio = 2 // a bid is for a hot auction with probability 1 - 1/HotAuctionRatio
	HotSellersRatio = 4 // an auction is by a hot seller with probability 1 - 1/HotSellersRatio
	HotBiddersRatio = 4 // a bid is by a hot bidder with probability 1 - 1/HotBiddersRatio

	NumInFlightAuctions = 100  // auctions a bid may be for (plus auctionIDLead)
	NumActivePeople     = 1000 // persons a bid or auction may come from (plus personIDLead)

	FirstAuctionID  = 1000 // ids start here so that small runs still join
	FirstPersonID   = 1000
	FirstCategoryID = 10
	NumCategories   = 5

	// DefaultRate is the default event-time rate in events per second: Nexmark's own default
	// (firstEventRate 10 000). 10 M events then span 1 000 s of event time, so the 10 s windows
	// and sessions of q5, q7, q8, q11 fire about 100 times. (At the suite's nominal 10 M
	// events/s no 10 s window would ever fire in a run of a few million events.)
	DefaultRate = 10_000

	// DefaultBaseTime is the event time of event 0 in ms since the epoch (2025-01-01T00:00Z),
	// fixed so that every run is identical (Nexmark's own generator takes the wall clock).
	DefaultBaseTime = 1_735_689_600_000

	// WatermarkDelay is the bound of the watermark behind the event time in ms, as the
	// Nexmark DDL's WATERMARK FOR dateTime AS dateTime - INTERVAL '4' SECOND.
	WatermarkDelay = 4000

	auctionIDLead  = 10  // ids ahead of the last auction a bid may name (AUCTION_ID_LEAD)
	personIDLead   = 10  // ... of the last person (PERSON_ID_LEAD)
	hotGroup       = 100 // hot sellers, bidders and auctions are the first of each group of 100
	hotChannels    = 2   // a bid comes from a hot channel with probability 1 - 1/hotChannels
	numChannels    = 10_000
	minStringBytes = 3
)

var (
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	hotChans   = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// Kind is the kind of an event.
type Kind uint8

// The event kinds.
const (
	KindPerson Kind = iota
	KindAuction
	KindBid
)

// Person is a new person of the auction site, as Nexmark's Person. Its byte slices alias the
// Event's buffer.
type Person struct {
	ID                                   int64
	Name, Email, CreditCard, City, State []byte
	DateTime                             int64 // event time, ms since the epoch
	Extra                                []byte
}

// Auction is a new auction, as Nexmark's Auction. Its byte slices alias the Event's buffer.
type Auction struct {
	ID                    int64
	ItemName, Description []byte
	InitialBid, Reserve   int64 // prices in cents
	DateTime, Expires     int64 // ms since the epoch
	Seller, Category      int64
	Extra                 []byte
}

// Bid is a bid on an auction, as Nexmark's Bid (with the channel and URL of its later
// queries). Its byte slices alias the Event's buffer.
type Bid struct {
	Auction, Bidder, Price int64
	Channel, URL           []byte
	DateTime               int64 // ms since the epoch
	Extra                  []byte
}

// Event is one generated event: the member named by Kind is set. The byte slices of its
// members alias buf and are valid until the Event is generated into again.
type Event struct {
	Kind    Kind
	N       int64 // the event number
	Person  Person
	Auction Auction
	Bid     Bid
	buf     []byte
}

// Time returns the event time of e in ms.
func (e *Event) Time() int64 {
	switch e.Kind {
	case KindPerson:
		return e.Person.DateTime
	case KindAuction:
		return e.Auction.DateTime
	}
	return e.Bid.DateTime
}

// eventBufBytes bounds the bytes of one event's strings (an auction: 19 + 99 + extra of at
// most 1.2 × 500): buf is allocated once with this capacity, so the slices never move.
const eventBufBytes = 2048

// Generator generates the Nexmark event stream: event n is a function of the seed, the rate
// and n alone (the random source is seeded per event number), so any range of events can be
// generated alone, by any number of workers, and every run is identical. Use one Generator per
// goroutine. Nexmark's own generator differs in three ways: it takes wall-clock base times and
// unseeded java.util.Random draws (runs differ), and its bids add FIRST_PERSON_ID twice to
// the bidder (a bug of nexmark-flink's BidGenerator; we add it once, as the Beam original).
type Generator struct {
	Seed     uint64
	Rate     int64 // events per second of event time (> 0)
	BaseTime int64 // event time of event 0, ms
	delayUs  float64
	chanURL  [numChannels]string
	hotURL   [4]string // of hotChans
}

// NewGenerator returns a generator of seed at rate events per second of event time (0:
// DefaultRate), starting at DefaultBaseTime.
func NewGenerator(seed uint64, rate int64) *Generator {
	if rate <= 0 {
		rate = DefaultRate
	}
	g := &Generator{Seed: seed, Rate: rate, BaseTime: DefaultBaseTime, delayUs: 1e6 / float64(rate)}
	// The channels' URLs: Nexmark draws them from unseeded randoms once per process; here
	// they derive from the seed and the channel number.
	for i := range g.hotURL {
		r := rng{s: mix64(seed ^ 0xc4a1 ^ uint64(i)<<32)}
		g.hotURL[i] = string(r.baseURL(nil))
	}
	for i := range g.chanURL {
		r := rng{s: mix64(seed ^ 0x9e37 ^ uint64(i)<<20)}
		u := r.baseURL(nil)
		if r.intn(10) > 0 {
			u = append(u, "&channel_id="...)
			u = strconv.AppendInt(u, int64(math.Abs(float64(int32(reverse32(uint32(i)))))), 10)
		}
		g.chanURL[i] = string(u)
	}
	return g
}

func reverse32(x uint32) uint32 {
	var r uint32
	for i := 0; i < 32; i++ {
		r = r<<1 | x&1
		x >>= 1
	}
	return r
}

// Timestamp returns the event time of event n in ms: base + n × 10⁶ / rate µs, as Nexmark's
// GeneratorConfig.timestampForEvent (out-of-order group size 1: events are in order).
func (g *Generator) Timestamp(n int64) int64 {
	return g.BaseTime + int64(float64(n)*g.delayUs)/1000
}

// Watermark returns the watermark after event n: its event time less WatermarkDelay.
func (g *Generator) Watermark(n int64) int64 { return g.Timestamp(n) - WatermarkDelay }

// KindOf returns the kind of event n: of every 50 events, 1 person, 3 auctions and 46 bids.
func KindOf(n int64) Kind {
	switch r := n % TotalProportion; {
	case r < PersonProportion:
		return KindPerson
	case r < PersonProportion+AuctionProportion:
		return KindAuction
	}
	return KindBid
}

// lastPersonID returns the last person id (base 0) at event n: the current one if n is a
// person (PersonGenerator.lastBase0PersonId).
func lastPersonID(n int64) int64 {
	epoch, off := n/TotalProportion, n%TotalProportion
	if off >= PersonProportion {
		off = PersonProportion - 1
	}
	return epoch*PersonProportion + off
}

// lastAuctionID returns the last auction id (base 0) at event n (lastBase0AuctionId).
func lastAuctionID(n int64) int64 {
	epoch, off := n/TotalProportion, n%TotalProportion
	switch {
	case off < PersonProportion:
		epoch--
		off = AuctionProportion - 1
	case off >= PersonProportion+AuctionProportion:
		off = AuctionProportion - 1
	default:
		off -= PersonProportion
	}
	return epoch*AuctionProportion + off
}

func (r *rng) nextPersonID(n int64) int64 {
	num := lastPersonID(n) + 1
	active := min(num, NumActivePeople)
	return num - active + r.int63n(active+personIDLead)
}

func (r *rng) nextAuctionID(n int64) int64 {
	last := lastAuctionID(n)
	lo := max(last-NumInFlightAuctions, 0)
	return lo + r.int63n(last-lo+1+auctionIDLead)
}

// Next generates event n into e (reusing e's buffer).
func (g *Generator) Next(n int64, e *Event) {
	if cap(e.buf) < eventBufBytes {
		e.buf = make([]byte, 0, eventBufBytes)
	}
	b := e.buf[:0]
	r := rng{s: mix64(g.Seed ^ mix64(uint64(n)+0x632be59bd9b4e019))}
	ts := g.Timestamp(n)
	e.N, e.Kind = n, KindOf(n)
	switch e.Kind {
	case KindPerson:
		p := &e.Person
		p.ID, p.DateTime = lastPersonID(n)+FirstPersonID, ts
		s := len(b)
		b = append(b, firstNames[r.intn(len(firstNames))]...)
		b = append(b, ' ')
		b = append(b, lastNames[r.intn(len(lastNames))]...)
		p.Name, s = b[s:len(b):len(b)], len(b)
		b = r.appendString(b, 7)
		b = append(b, '@')
		b = r.appendString(b, 5)
		b = append(b, ".com"...)
		p.Email, s = b[s:len(b):len(b)], len(b)
		for i := 0; i < 4; i++ {
			if i > 0 {
				b = append(b, ' ')
			}
			v := r.intn(10000)
			b = append(b, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
		}
		p.CreditCard, s = b[s:len(b):len(b)], len(b)
		b = append(b, usCities[r.intn(len(usCities))]...)
		p.City, s = b[s:len(b):len(b)], len(b)
		b = append(b, usStates[r.intn(len(usStates))]...)
		p.State, s = b[s:len(b):len(b)], len(b)
		size := 8 + len(p.Name) + len(p.Email) + len(p.CreditCard) + len(p.City) + len(p.State)
		b = r.appendExtra(b, size, AvgPersonBytes)
		p.Extra = b[s:len(b):len(b)]
	case KindAuction:
		a := &e.Auction
		a.ID, a.DateTime = lastAuctionID(n)+FirstAuctionID, ts
		if r.intn(HotSellersRatio) > 0 {
			a.Seller = lastPersonID(n) / hotGroup * hotGroup
		} else {
			a.Seller = r.nextPersonID(n)
		}
		a.Seller += FirstPersonID
		a.Category = FirstCategoryID + int64(r.intn(NumCategories))
		a.InitialBid = r.price()
		// The auction lasts 1 + U[0, 2 × horizon) ms, the horizon being the time until
		// NumInFlightAuctions more auctions have been generated (nextAuctionLengthMs).
		horizon := g.Timestamp(n+NumInFlightAuctions*TotalProportion/AuctionProportion) - ts
		a.Expires = ts + 1 + r.int63n(max(horizon*2, 1))
		s := len(b)
		b = r.appendString(b, 20)
		a.ItemName, s = b[s:len(b):len(b)], len(b)
		b = r.appendString(b, 100)
		a.Description, s = b[s:len(b):len(b)], len(b)
		a.Reserve = a.InitialBid + r.price()
		b = r.appendExtra(b, 8+len(a.ItemName)+len(a.Description)+8+8+8+8+8, AvgAuctionBytes)
		a.Extra = b[s:len(b):len(b)]
	default:
		d := &e.Bid
		d.DateTime = ts
		if r.intn(HotAuctionRatio) > 0 {
			d.Auction = lastAuctionID(n) / hotGroup * hotGroup
		} else {
			d.Auction = r.nextAuctionID(n)
		}
		d.Auction += FirstAuctionID
		if r.intn(HotBiddersRatio) > 0 {
			d.Bidder = lastPersonID(n)/hotGroup*hotGroup + 1
		} else {
			d.Bidder = r.nextPersonID(n)
		}
		d.Bidder += FirstPersonID
		d.Price = r.price()
		s := len(b)
		if r.intn(hotChannels) > 0 {
			i := r.intn(len(hotChans))
			b = append(b, hotChans[i]...)
			d.Channel, s = b[s:len(b):len(b)], len(b)
			b = append(b, g.hotURL[i]...)
		} else {
			i := r.intn(numChannels)
			b = append(b, "channel-"...)
			b = strconv.AppendInt(b, int64(i), 10)
			d.Channel, s = b[s:len(b):len(b)], len(b)
			b = append(b, g.chanURL[i]...)
		}
		d.URL, s = b[s:len(b):len(b)], len(b)
		b = r.appendExtra(b, 8+8+8+8, AvgBidBytes)
		d.Extra = b[s:len(b):len(b)]
	}
	if cap(b) != eventBufBytes {
		panic("nexmark: invariant: an event outgrew its buffer")
	}
	e.buf = b
}

// rng is the per-event random source: splitmix64 (Steele, Lea and Flood; the generator of
// Java's SplittableRandom, which nexmark-flink's price and long generators take).
type rng struct{ s uint64 }

func mix64(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix64(r.s)
}

// int63n returns a uniform integer in [0, n), n > 0 (Lemire's multiply-shift, unbiased enough
// for a benchmark's draws: the bias is below n / 2⁶⁴).
func (r *rng) int63n(n int64) int64 {
	hi, _ := bits.Mul64(r.next(), uint64(n))
	return int64(hi)
}

func (r *rng) intn(n int) int { return int(r.int63n(int64(n))) }

// float returns a uniform float64 in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// price returns round(10^(6u) × 100) cents for a uniform u: 1 to 100 000 000 cents, log-uniform
// (PriceGenerator.nextPrice).
func (r *rng) price() int64 { return int64(math.Round(math.Pow(10, r.float()*6) * 100)) }

// appendString appends a string of 3 to maxLen-1 letters, about 1 in 13 a space, trimmed of
// spaces at its ends (StringsGenerator.nextString).
func (r *rng) appendString(b []byte, maxLen int) []byte {
	return r.appendStringSep(b, maxLen, ' ')
}

func (r *rng) appendStringSep(b []byte, maxLen int, sep byte) []byte {
	n := minStringBytes + r.intn(maxLen-minStringBytes)
	s := len(b)
	for ; n > 0; n-- {
		if r.intn(13) == 0 {
			b = append(b, sep)
		} else {
			b = append(b, byte('a'+r.intn(26)))
		}
	}
	if sep != ' ' {
		return b
	}
	i, j := s, len(b)
	for i < j && b[i] == ' ' {
		i++
	}
	for j > i && b[j-1] == ' ' {
		j--
	}
	n = copy(b[s:], b[i:j])
	return b[:s+n]
}

// appendExtra appends letters so that size plus them averages avg: uniform in avg-size ± 20 %
// (StringsGenerator.nextExtra).
func (r *rng) appendExtra(b []byte, size, avg int) []byte {
	if size > avg {
		return b
	}
	avg -= size
	delta := int(math.Round(float64(avg) * 0.2))
	n := avg - delta
	if delta != 0 {
		n += r.intn(2 * delta)
	}
	for ; n > 0; n-- {
		b = append(b, byte('a'+r.intn(26)))
	}
	return b
}

// baseURL appends a URL of the form Nexmark's bids carry.
func (r *rng) baseURL(b []byte) []byte {
	b = append(b, "https://www.nexmark.com/"...)
	for i := 0; i < 3; i++ {
		b = r.appendStringSep(b, 5, '_')
		b = append(b, '/')
	}
	return append(b, "item.htm?query=1"...)
}
