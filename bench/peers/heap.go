package peers

import (
	"bytes"
	"unsafe"

	"github.com/cockroachdb/swiss"
)

// view is a string sharing b's bytes, for lookups and deletes that do not
// retain the key (b must not change during the call).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// goMap is the Go builtin map peer, in the shape of Flink's heap backend.
type goMap struct {
	kbuf []byte
	val  map[string][]byte
	list map[string]*[]byte
	maps map[string]map[string][]byte
}

func newGoMap() *goMap {
	return &goMap{
		kbuf: make([]byte, 0, 64),
		val:  make(map[string][]byte),
		list: make(map[string]*[]byte),
		maps: make(map[string]map[string][]byte),
	}
}

func (m *goMap) Name() string { return "gomap" }

func (m *goMap) ValueGet(k Key) ([]byte, bool) {
	m.kbuf = composite(m.kbuf, k, nil)
	v, ok := m.val[string(m.kbuf)]
	return v, ok
}

func (m *goMap) ValuePut(k Key, v []byte) {
	m.kbuf = composite(m.kbuf, k, nil)
	if old, ok := m.val[string(m.kbuf)]; ok && len(old) == len(v) {
		copy(old, v) // in place, as Strata overwrites in place
		return
	}
	m.val[string(m.kbuf)] = bytes.Clone(v)
}

func (m *goMap) ValueDelete(k Key) {
	m.kbuf = composite(m.kbuf, k, nil)
	delete(m.val, view(m.kbuf))
}

func (m *goMap) listOf(k Key, create bool) *[]byte {
	m.kbuf = composite(m.kbuf, k, nil)
	p := m.list[string(m.kbuf)]
	if p == nil && create {
		p = new([]byte)
		m.list[string(m.kbuf)] = p
	}
	return p
}

func (m *goMap) ListAdd(k Key, e []byte) {
	p := m.listOf(k, true)
	*p = appendFrame(*p, e)
}

func (m *goMap) ListAddAll(k Key, es [][]byte) {
	if len(es) == 0 {
		return
	}
	p := m.listOf(k, true)
	*p = appendFrames(*p, es)
}

func (m *goMap) ListUpdate(k Key, es [][]byte) {
	if len(es) == 0 {
		m.ListClear(k)
		return
	}
	p := m.listOf(k, true)
	*p = appendFrames((*p)[:0], es)
}

func (m *goMap) ListGet(k Key) bool {
	p := m.listOf(k, false)
	return p != nil && len(*p) > 0
}

func (m *goMap) ListIterate(k Key) (n, bytes int) {
	if p := m.listOf(k, false); p != nil {
		return walkFrames(*p)
	}
	return 0, 0
}

func (m *goMap) ListClear(k Key) {
	m.kbuf = composite(m.kbuf, k, nil)
	delete(m.list, view(m.kbuf))
}

func (m *goMap) MapGet(k Key, uk []byte) ([]byte, bool) {
	m.kbuf = composite(m.kbuf, k, nil)
	v, ok := m.maps[string(m.kbuf)][string(uk)]
	return v, ok
}

func (m *goMap) MapContains(k Key, uk []byte) bool {
	_, ok := m.MapGet(k, uk)
	return ok
}

func (m *goMap) MapPut(k Key, uk, v []byte) {
	m.kbuf = composite(m.kbuf, k, nil)
	inner := m.maps[string(m.kbuf)]
	if inner == nil {
		inner = make(map[string][]byte)
		m.maps[string(m.kbuf)] = inner
	}
	if old, ok := inner[string(uk)]; ok && len(old) == len(v) {
		copy(old, v)
		return
	}
	inner[string(uk)] = bytes.Clone(v)
}

func (m *goMap) MapRemove(k Key, uk []byte) {
	m.kbuf = composite(m.kbuf, k, nil)
	inner := m.maps[string(m.kbuf)]
	if inner == nil {
		return
	}
	delete(inner, view(uk))
	if len(inner) == 0 { // as Flink's HeapMapState.remove drops an empty map
		delete(m.maps, view(m.kbuf))
	}
}

func (m *goMap) MapIterate(k Key) (n, bytes int) {
	m.kbuf = composite(m.kbuf, k, nil)
	for uk, v := range m.maps[string(m.kbuf)] {
		n++
		bytes += len(uk) + len(v)
	}
	return n, bytes
}

func (m *goMap) Bulk(bool)    {}
func (m *goMap) Close() error { *m = goMap{}; return nil }

// swissMap is the cockroachdb/swiss peer, in goMap's shape.
type swissMap struct {
	kbuf []byte
	val  *swiss.Map[string, []byte]
	list *swiss.Map[string, *[]byte]
	maps *swiss.Map[string, *swiss.Map[string, []byte]]
}

func newSwiss() *swissMap {
	return &swissMap{
		kbuf: make([]byte, 0, 64),
		val:  swiss.New[string, []byte](0),
		list: swiss.New[string, *[]byte](0),
		maps: swiss.New[string, *swiss.Map[string, []byte]](0),
	}
}

func (m *swissMap) Name() string { return "swiss" }

func (m *swissMap) ValueGet(k Key) ([]byte, bool) {
	m.kbuf = composite(m.kbuf, k, nil)
	return m.val.Get(view(m.kbuf))
}

func (m *swissMap) ValuePut(k Key, v []byte) {
	m.kbuf = composite(m.kbuf, k, nil)
	if old, ok := m.val.Get(view(m.kbuf)); ok && len(old) == len(v) {
		copy(old, v)
		return
	}
	m.val.Put(string(m.kbuf), bytes.Clone(v))
}

func (m *swissMap) ValueDelete(k Key) {
	m.kbuf = composite(m.kbuf, k, nil)
	m.val.Delete(view(m.kbuf))
}

func (m *swissMap) listOf(k Key, create bool) *[]byte {
	m.kbuf = composite(m.kbuf, k, nil)
	p, _ := m.list.Get(view(m.kbuf))
	if p == nil && create {
		p = new([]byte)
		m.list.Put(string(m.kbuf), p)
	}
	return p
}

func (m *swissMap) ListAdd(k Key, e []byte) {
	p := m.listOf(k, true)
	*p = appendFrame(*p, e)
}

func (m *swissMap) ListAddAll(k Key, es [][]byte) {
	if len(es) == 0 {
		return
	}
	p := m.listOf(k, true)
	*p = appendFrames(*p, es)
}

func (m *swissMap) ListUpdate(k Key, es [][]byte) {
	if len(es) == 0 {
		m.ListClear(k)
		return
	}
	p := m.listOf(k, true)
	*p = appendFrames((*p)[:0], es)
}

func (m *swissMap) ListGet(k Key) bool {
	p := m.listOf(k, false)
	return p != nil && len(*p) > 0
}

func (m *swissMap) ListIterate(k Key) (n, bytes int) {
	if p := m.listOf(k, false); p != nil {
		return walkFrames(*p)
	}
	return 0, 0
}

func (m *swissMap) ListClear(k Key) {
	m.kbuf = composite(m.kbuf, k, nil)
	m.list.Delete(view(m.kbuf))
}

func (m *swissMap) inner(k Key) *swiss.Map[string, []byte] {
	m.kbuf = composite(m.kbuf, k, nil)
	in, _ := m.maps.Get(view(m.kbuf))
	return in
}

func (m *swissMap) MapGet(k Key, uk []byte) ([]byte, bool) {
	if in := m.inner(k); in != nil {
		return in.Get(view(uk))
	}
	return nil, false
}

func (m *swissMap) MapContains(k Key, uk []byte) bool {
	_, ok := m.MapGet(k, uk)
	return ok
}

func (m *swissMap) MapPut(k Key, uk, v []byte) {
	in := m.inner(k)
	if in == nil {
		in = swiss.New[string, []byte](0)
		m.maps.Put(string(m.kbuf), in)
	}
	if old, ok := in.Get(view(uk)); ok && len(old) == len(v) {
		copy(old, v)
		return
	}
	in.Put(string(uk), bytes.Clone(v))
}

func (m *swissMap) MapRemove(k Key, uk []byte) {
	in := m.inner(k)
	if in == nil {
		return
	}
	in.Delete(view(uk))
	if in.Len() == 0 {
		m.maps.Delete(view(m.kbuf))
	}
}

func (m *swissMap) MapIterate(k Key) (n, bytes int) {
	if in := m.inner(k); in != nil {
		in.All(func(uk string, v []byte) bool {
			n++
			bytes += len(uk) + len(v)
			return true
		})
	}
	return n, bytes
}

func (m *swissMap) Bulk(bool)    {}
func (m *swissMap) Close() error { *m = swissMap{}; return nil }
