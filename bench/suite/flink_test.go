package suite

import (
	"testing"

	"github.com/strata-db/strata/bench/peers"
)

// Flink's state micro-benchmarks (apache/flink-benchmarks,
// org.apache.flink.state.benchmark): Long keys 0..n-1 preloaded and visited
// in a shuffled order, new keys n..2n-1 shuffled, 8-byte values drawn from a
// shuffled array of 1M, map user keys 0..9 (MAP_KEY_COUNT), addAll of 100
// (LIST_VALUE_COUNT). Flink's SETUP_KEY_COUNT is 500K; the value rows also
// run at 1M keys for DESIGN.md §5. Every row runs in both key Shapes (key=8B:
// Flink's Long in the void namespace; key=16B+ns8B: a windowed job's 16 B key
// in an 8 B namespace); the TTL rows (ttl_test.go) use the 8 B keys.

const (
	flinkKeys      = 500_000
	flinkValues    = 1_000_000
	flinkMapKeys   = 10
	flinkListBatch = 100
)

type flinkData struct {
	n       int
	setup   []int32 // shuffled 0..n-1
	newKeys []int32 // shuffled n..2n-1
	values  [][]byte
	batch   [][]byte // addAll batch
	keyBuf  [8]byte
	ukBuf   [8]byte
	one     [][]byte
}

var flinkCache = map[int]*flinkData{}

func flink(n int) *flinkData {
	if d := flinkCache[n]; d != nil {
		return d
	}
	d := &flinkData{
		n:       n,
		setup:   Perm(0, n, 1),
		newKeys: Perm(n, n, 2),
		values:  Values(flinkValues, 8, 3),
		one:     make([][]byte, 1),
	}
	d.batch = d.values[:flinkListBatch]
	flinkCache[n] = d
	return d
}

func (d *flinkData) key(id int32) peers.Key {
	return peers.Key{K: LongKey(&d.keyBuf, int64(id))}
}

func (d *flinkData) uk(u int) []byte { return LongKey(&d.ukBuf, int64(u)) }

func (d *flinkData) value(i int) []byte { return d.values[i%flinkValues] }

func BenchmarkFlinkValue(b *testing.B) {
	for _, n := range []int{flinkKeys, 1_000_000} {
		d := flink(n)
		for _, shape := range Shapes {
			kr := NewKeyer(shape)
			b.Run("keys="+SizeLabel(n)+"/key="+shape.Name, func(b *testing.B) {
				load := func(st peers.Store) {
					for i := range n {
						st.ValuePut(kr.Key(int64(i)), d.value(i))
					}
				}
				forImpls(b, *flagBudget, load, func(b *testing.B, l *lazyStore) {
					leaf(b, l, "op=get", func(st peers.Store, i int) {
						v, _ := st.ValueGet(kr.Key(int64(d.setup[i%n])))
						sink += len(v)
					})
					leaf(b, l, "op=update", func(st peers.Store, i int) {
						st.ValuePut(kr.Key(int64(d.setup[i%n])), d.value(i))
					})
					leaf(b, l, "op=add", func(st peers.Store, i int) {
						st.ValuePut(kr.Key(int64(d.newKeys[i%n])), d.value(i))
					})
				})
			})
		}
	}
}

func BenchmarkFlinkList(b *testing.B) {
	n := flinkKeys
	d := flink(n)
	for _, shape := range Shapes {
		kr := NewKeyer(shape)
		key := func(id int32) peers.Key { return kr.Key(int64(id)) }
		b.Run("keys="+SizeLabel(n)+"/key="+shape.Name, func(b *testing.B) {
			load := func(st peers.Store) {
				for i := range n {
					st.ListAdd(key(int32(i)), d.value(i))
				}
			}
			forImpls(b, *flagBudget, load, func(b *testing.B, l *lazyStore) {
				// Reads first, on one-element lists, as in Flink's setup.
				leaf(b, l, "op=get", func(st peers.Store, i int) {
					if st.ListGet(key(d.setup[i%n])) {
						sink++
					}
				})
				leaf(b, l, "op=getAndIterate", func(st peers.Store, i int) {
					c, _ := st.ListIterate(key(d.setup[i%n]))
					sink += c
				})
				leaf(b, l, "op=update", func(st peers.Store, i int) {
					d.one[0] = d.value(i)
					st.ListUpdate(key(d.setup[i%n]), d.one)
				})
				leaf(b, l, "op=add", func(st peers.Store, i int) { // Flink listAdd: update on a new key
					d.one[0] = d.value(i)
					st.ListUpdate(key(d.newKeys[i%n]), d.one)
				})
				leaf(b, l, "op=append", func(st peers.Store, i int) {
					st.ListAdd(key(d.setup[i%n]), d.value(i))
				})
				leaf(b, l, "op=addAll", func(st peers.Store, i int) {
					st.ListAddAll(key(d.setup[i%n]), d.batch)
				})
			})
		})
	}
}

func BenchmarkFlinkMap(b *testing.B) {
	n := flinkKeys
	d := flink(n)
	for _, shape := range Shapes {
		kr := NewKeyer(shape)
		key := func(id int32) peers.Key { return kr.Key(int64(id)) }
		b.Run("keys="+SizeLabel(n)+"/key="+shape.Name, func(b *testing.B) {
			load := func(st peers.Store) {
				for i := range n {
					k := key(int32(i))
					for u := range flinkMapKeys {
						st.MapPut(k, d.uk(u), d.value(i*flinkMapKeys+u))
					}
				}
			}
			forImpls(b, *flagBudget, load, func(b *testing.B, l *lazyStore) {
				leaf(b, l, "op=get", func(st peers.Store, i int) {
					v, _ := st.MapGet(key(d.setup[i%n]), d.uk(i%flinkMapKeys))
					sink += len(v)
				})
				leaf(b, l, "op=contains-miss", func(st peers.Store, i int) {
					if st.MapContains(key(d.setup[i%n]), d.uk(flinkMapKeys+i%flinkMapKeys)) {
						panic("contains-miss hit")
					}
				})
				leaf(b, l, "op=iterate10", func(st peers.Store, i int) {
					c, _ := st.MapIterate(key(d.setup[i%n]))
					sink += c
				})
				leaf(b, l, "op=put", func(st peers.Store, i int) {
					st.MapPut(key(d.setup[i%n]), d.uk(i%flinkMapKeys), d.value(i))
				})
				leaf(b, l, "op=put-new", func(st peers.Store, i int) { // Flink mapAdd: a new key
					st.MapPut(key(d.newKeys[i%n]), d.uk(i%flinkMapKeys), d.value(i))
				})
				leaf(b, l, "op=remove", func(st peers.Store, i int) {
					st.MapRemove(key(d.setup[i%n]), d.uk(i%flinkMapKeys))
				})
			})
		})
	}
}
