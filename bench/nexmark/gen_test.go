package nexmark

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden-events.txt")

// format renders e field by field, one line.
func format(e *Event) string {
	switch e.Kind {
	case KindPerson:
		p := &e.Person
		return fmt.Sprintf("%d person id=%d name=%q email=%q card=%q city=%q state=%q time=%d extra=%d:%.12s",
			e.N, p.ID, p.Name, p.Email, p.CreditCard, p.City, p.State, p.DateTime, len(p.Extra), p.Extra)
	case KindAuction:
		a := &e.Auction
		return fmt.Sprintf("%d auction id=%d item=%q desc=%q initial=%d reserve=%d time=%d expires=%d seller=%d category=%d extra=%d:%.12s",
			e.N, a.ID, a.ItemName, a.Description, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category, len(a.Extra), a.Extra)
	}
	b := &e.Bid
	return fmt.Sprintf("%d bid auction=%d bidder=%d price=%d channel=%q url=%q time=%d extra=%d:%.12s",
		e.N, b.Auction, b.Bidder, b.Price, b.Channel, b.URL, b.DateTime, len(b.Extra), b.Extra)
}

// TestGolden pins the first events of seed 1 at the default rate, field by field: a change to
// the generator changes every benchmark's input, and must be deliberate (-update).
func TestGolden(t *testing.T) {
	g := NewGenerator(1, 0)
	var e Event
	var sb strings.Builder
	for _, n := range []int64{0, 1, 2, 3, 4, 5, 6, 49, 50, 51, 1_000_000} {
		g.Next(n, &e)
		sb.WriteString(format(&e))
		sb.WriteByte('\n')
	}
	const path = "testdata/golden-events.txt"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.String(); got != string(want) {
		t.Fatalf("events differ from %s:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestGeneratorShape checks the published parameters on 500 000 events: proportions 1:3:46 by
// event number, ids, timestamps, average sizes, hot ratios, prices, in-flight ranges; and that
// any range of events generated alone equals the same events generated in sequence.
func TestGeneratorShape(t *testing.T) {
	const N = 500_000
	g := NewGenerator(7, 0)
	var e Event
	var kinds [3]int64
	var bytes [3]int64
	var hotAuction, hotBidder, hotSeller, bidderSeen, minPrice, maxPrice int64
	minPrice = 1 << 62
	var lastPerson, lastAuction int64 = FirstPersonID - 1, FirstAuctionID - 1
	for n := int64(0); n < N; n++ {
		g.Next(n, &e)
		kinds[e.Kind]++
		if want := DefaultBaseTime + n*1_000_000/DefaultRate/1000; e.Time() != want {
			t.Fatalf("event %d: time %d, want %d", n, e.Time(), want)
		}
		switch e.Kind {
		case KindPerson:
			p := &e.Person
			if p.ID != lastPerson+1 {
				t.Fatalf("event %d: person id %d after %d", n, p.ID, lastPerson)
			}
			lastPerson = p.ID
			bytes[0] += int64(8 + len(p.Name) + len(p.Email) + len(p.CreditCard) + len(p.City) + len(p.State) + len(p.Extra))
		case KindAuction:
			a := &e.Auction
			if a.ID != lastAuction+1 {
				t.Fatalf("event %d: auction id %d after %d", n, a.ID, lastAuction)
			}
			lastAuction = a.ID
			if a.Seller == (lastPerson-FirstPersonID)/100*100+FirstPersonID {
				hotSeller++
			}
			if a.Category < FirstCategoryID || a.Category >= FirstCategoryID+NumCategories || a.Expires <= a.DateTime || a.Reserve <= a.InitialBid {
				t.Fatalf("event %d: bad auction %s", n, format(&e))
			}
			bytes[1] += int64(8 + len(a.ItemName) + len(a.Description) + 40 + len(a.Extra))
		case KindBid:
			b := &e.Bid
			if b.Auction == (lastAuction-FirstAuctionID)/100*100+FirstAuctionID {
				hotAuction++
			}
			if b.Auction > lastAuction+auctionIDLead || b.Auction < lastAuction-NumInFlightAuctions {
				t.Fatalf("event %d: auction %d out of flight (last %d)", n, b.Auction, lastAuction)
			}
			if b.Bidder == (lastPerson-FirstPersonID)/100*100+1+FirstPersonID {
				hotBidder++
			}
			if b.Bidder > lastPerson+personIDLead || b.Bidder < lastPerson-NumActivePeople {
				t.Fatalf("event %d: bidder %d not active (last %d)", n, b.Bidder, lastPerson)
			}
			bidderSeen++
			minPrice, maxPrice = min(minPrice, b.Price), max(maxPrice, b.Price)
			bytes[2] += int64(32 + len(b.Extra))
		}
	}
	if kinds != [3]int64{N / 50, N / 50 * 3, N / 50 * 46} {
		t.Fatalf("kinds %v, want 1:3:46 of %d", kinds, N)
	}
	for i, avg := range []int64{AvgPersonBytes, AvgAuctionBytes, AvgBidBytes} {
		if got := bytes[i] / kinds[i]; got < avg*95/100 || got > avg*105/100 {
			t.Errorf("kind %d: average %d bytes, want %d ± 5%%", i, got, avg)
		}
	}
	// P(hot) = 1 - 1/ratio, plus the uniform draws that hit the hot one.
	for _, c := range []struct {
		what   string
		hot, n int64
		ratio  float64
	}{{"auction", hotAuction, kinds[2], HotAuctionRatio}, {"bidder", hotBidder, kinds[2], HotBiddersRatio}, {"seller", hotSeller, kinds[1], HotSellersRatio}} {
		if f, want := float64(c.hot)/float64(c.n), 1-1/c.ratio; f < want-0.01 || f > want+0.02 {
			t.Errorf("hot %s: %.3f of events, want about %.3f", c.what, f, want)
		}
	}
	if minPrice < 100 || maxPrice > 100_000_000 || maxPrice < 50_000_000 || minPrice > 200 {
		t.Errorf("prices in [%d, %d], want about [100, 1e8]", minPrice, maxPrice)
	}
	// A range alone: a second generator (another worker) produces event 123 456 alone.
	var a, b Event
	g.Next(123_456, &a)
	NewGenerator(7, 0).Next(123_456, &b)
	if format(&a) != format(&b) {
		t.Fatalf("event generated alone differs:\n%s\n%s", format(&a), format(&b))
	}
	NewGenerator(8, 0).Next(123_456, &b)
	if format(&a) == format(&b) {
		t.Fatal("another seed generated the same event")
	}
}

// TestGeneratorAllocs pins 0 allocations per event after the first.
func TestGeneratorAllocs(t *testing.T) {
	g := NewGenerator(1, 0)
	var e Event
	g.Next(0, &e)
	n := int64(0)
	if a := testing.AllocsPerRun(1000, func() { g.Next(n, &e); n++ }); a != 0 {
		t.Fatalf("%v allocs per event", a)
	}
}
