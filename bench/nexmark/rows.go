package nexmark

import (
	"encoding/binary"
	"fmt"

	"github.com/zeebo/xxh3"
)

// Out is what a query emitted, as a changelog of rows reduced to a digest: Rows is the net
// number of rows of the result (emissions less retractions: an upsert's result size), Sum the
// sum of a 64-bit mix of each net row's hash (retractions subtract), Changes the rows emitted
// and retracted. The sums are commutative, so Outs compare equal whatever order the back-ends
// fire equal timers in: the Strata run and the Go model must end with equal Outs (check: OK).
type Out struct {
	Rows, Changes int64
	Sum           uint64
}

// Emit adds the row of hash h.
func (o *Out) Emit(h uint64) { o.Rows++; o.Changes++; o.Sum += mix64(h) }

// EmitN adds n rows that hash together to h (a window's rows reduced to one hash).
func (o *Out) EmitN(n int64, h uint64) { o.Rows += n; o.Changes += n; o.Sum += mix64(h) }

// Retract removes the row of hash h (an update's -U, a rank's eviction).
func (o *Out) Retract(h uint64) { o.Rows--; o.Changes++; o.Sum -= mix64(h) }

// String formats o for the command's output and test failures.
func (o Out) String() string {
	return fmt.Sprintf("%d rows (%d changes), digest %016x", o.Rows, o.Changes, o.Sum)
}

// hh hashes integers into one 64-bit hash (order matters).
func hh(xs ...uint64) uint64 {
	h := uint64(0x243f6a8885a308d3)
	for _, x := range xs {
		h = mix64(h ^ x)
	}
	return h
}

func hs(b []byte) uint64 { return xxh3.Hash(b) }

// BidRow is a bid as state keeps it: its integers and its channel, URL and extra in one
// string (ChanLen and URLLen bytes, then the extra), one allocation per row.
type BidRow struct {
	Auction, Bidder, Price, DateTime int64
	ChanLen, URLLen                  uint16
	Text                             string
}

// RowOf returns the row of bid b.
func RowOf(b *Bid) BidRow {
	t := make([]byte, 0, len(b.Channel)+len(b.URL)+len(b.Extra))
	t = append(append(append(t, b.Channel...), b.URL...), b.Extra...)
	return BidRow{b.Auction, b.Bidder, b.Price, b.DateTime, uint16(len(b.Channel)), uint16(len(b.URL)), string(t)}
}

// Hash returns the hash of every field of r.
func (r *BidRow) Hash() uint64 {
	return hh(uint64(r.Auction), uint64(r.Bidder), uint64(r.Price), uint64(r.DateTime), uint64(r.ChanLen)<<16|uint64(r.URLLen),
		xxh3.HashString(r.Text))
}

// bidHash is BidRow.Hash of a bid, without making the row.
func bidHash(b *Bid) uint64 {
	h := xxh3.New()
	h.Write(b.Channel)
	h.Write(b.URL)
	h.Write(b.Extra)
	return hh(uint64(b.Auction), uint64(b.Bidder), uint64(b.Price), uint64(b.DateTime), uint64(len(b.Channel))<<16|uint64(len(b.URL)),
		h.Sum64())
}

// BidRowCodec encodes a BidRow: four 8-byte big-endian integers, the two lengths (2 bytes
// each), then the text.
type BidRowCodec struct{}

// Append appends the encoding of r.
func (BidRowCodec) Append(dst []byte, r BidRow) []byte {
	for _, x := range [4]int64{r.Auction, r.Bidder, r.Price, r.DateTime} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(x))
	}
	dst = binary.BigEndian.AppendUint16(dst, r.ChanLen)
	dst = binary.BigEndian.AppendUint16(dst, r.URLLen)
	return append(dst, r.Text...)
}

// Decode decodes a BidRow (the text is copied).
func (BidRowCodec) Decode(b []byte) (BidRow, error) {
	if len(b) < 36 {
		return BidRow{}, fmt.Errorf("%w: bid row: %d bytes, want 36 at least", ErrCodec, len(b))
	}
	u := binary.BigEndian.Uint64
	return BidRow{int64(u(b)), int64(u(b[8:])), int64(u(b[16:])), int64(u(b[24:])),
		binary.BigEndian.Uint16(b[32:]), binary.BigEndian.Uint16(b[34:]), string(b[36:])}, nil
}

// AuctionRow is an auction as state keeps it: its integers, and its item name, description
// and extra in one string.
type AuctionRow struct {
	ID, InitialBid, Reserve, DateTime, Expires, Seller, Category int64
	NameLen, DescLen                                             uint16
	Text                                                         string
}

// AuctionRowOf returns the row of auction a.
func AuctionRowOf(a *Auction) AuctionRow {
	t := make([]byte, 0, len(a.ItemName)+len(a.Description)+len(a.Extra))
	t = append(append(append(t, a.ItemName...), a.Description...), a.Extra...)
	return AuctionRow{a.ID, a.InitialBid, a.Reserve, a.DateTime, a.Expires, a.Seller, a.Category,
		uint16(len(a.ItemName)), uint16(len(a.Description)), string(t)}
}

// Hash returns the hash of every field of r.
func (r *AuctionRow) Hash() uint64 {
	return hh(uint64(r.ID), uint64(r.InitialBid), uint64(r.Reserve), uint64(r.DateTime), uint64(r.Expires), uint64(r.Seller),
		uint64(r.Category), uint64(r.NameLen)<<16|uint64(r.DescLen), xxh3.HashString(r.Text))
}

// AuctionRowCodec encodes an AuctionRow: seven 8-byte big-endian integers, the two lengths,
// then the text.
type AuctionRowCodec struct{}

// Append appends the encoding of r.
func (AuctionRowCodec) Append(dst []byte, r AuctionRow) []byte {
	for _, x := range [7]int64{r.ID, r.InitialBid, r.Reserve, r.DateTime, r.Expires, r.Seller, r.Category} {
		dst = binary.BigEndian.AppendUint64(dst, uint64(x))
	}
	dst = binary.BigEndian.AppendUint16(dst, r.NameLen)
	dst = binary.BigEndian.AppendUint16(dst, r.DescLen)
	return append(dst, r.Text...)
}

// Decode decodes an AuctionRow (the text is copied).
func (AuctionRowCodec) Decode(b []byte) (AuctionRow, error) {
	if len(b) < 60 {
		return AuctionRow{}, fmt.Errorf("%w: auction row: %d bytes, want 60 at least", ErrCodec, len(b))
	}
	u := func(i int) int64 { return int64(binary.BigEndian.Uint64(b[8*i:])) }
	return AuctionRow{u(0), u(1), u(2), u(3), u(4), u(5), u(6),
		binary.BigEndian.Uint16(b[56:]), binary.BigEndian.Uint16(b[58:]), string(b[60:])}, nil
}

// Acc is an accumulator of up to 8 int64s (counts, sums, a window's bounds): a plain array
// in the Go model, its first n fields as n × 8 bytes big-endian on Strata (accCodec).
type Acc [8]int64

// accCodec encodes the first n fields of an Acc.
type accCodec struct{ n int }

func (c accCodec) Append(dst []byte, a Acc) []byte {
	for _, x := range a[:c.n] {
		dst = binary.BigEndian.AppendUint64(dst, uint64(x))
	}
	return dst
}

func (c accCodec) Decode(b []byte) (Acc, error) {
	var a Acc
	if len(b) != 8*c.n {
		return a, fmt.Errorf("%w: accumulator of %d: %d bytes", ErrCodec, c.n, len(b))
	}
	for i := range c.n {
		a[i] = int64(binary.BigEndian.Uint64(b[8*i:]))
	}
	return a, nil
}

// Pair is a key of two int64s (bidder and auction, day and bidder, ...).
type Pair struct{ A, B int64 }

// pairCodec encodes a Pair as 16 bytes big-endian.
type pairCodec struct{}

func (pairCodec) Append(dst []byte, p Pair) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(dst, uint64(p.A)), uint64(p.B))
}

func (pairCodec) Decode(b []byte) (Pair, error) {
	if len(b) != 16 {
		return Pair{}, fmt.Errorf("%w: pair: %d bytes", ErrCodec, len(b))
	}
	return Pair{int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))}, nil
}
