package base

// MergingIter merges sorted sources into one stream in entry order
// (Compare): a binary min-heap of source indices, one heap step per entry.
// Each source must yield its entries in entry order. Of two equal entries
// (the same version in two sources, which a correct writer never produces)
// the one of the lower source index comes first, so callers list sources
// newest first and a Resolver skips the older copy. Both memory compaction
// (slice.Compaction.Run: one source per run) and LSM compaction
// (lsm.CompactionJob.Run: one source per L0 file and one for the next
// level) merge through it.
//
// It implements Iterator: the Entry it returns is the current source's
// and is valid until the next Next. It stops at the first source error,
// which Err returns. Per entry it makes two interface calls (the current
// source's Next and Entry) and log2(sources) Compare calls; it allocates
// only in Init. Not safe for concurrent use.
type MergingIter struct {
	srcs    []Iterator
	cur     []*Entry // cur[i]: source i's current entry while i is in heap
	heap    []int    // source indices, a binary min-heap by (cur, index)
	top     *Entry
	started bool
	err     error
}

// NewMergingIter returns an iterator over srcs (sorted by age, newest
// first, when equal entries can occur). The slice is kept, not copied.
func NewMergingIter(srcs ...Iterator) *MergingIter {
	m := &MergingIter{}
	m.Init(srcs)
	return m
}

// Init resets m to merge srcs, reusing its memory. The slice is kept, not
// copied.
func (m *MergingIter) Init(srcs []Iterator) {
	m.srcs = srcs
	if cap(m.cur) < len(srcs) {
		m.cur = make([]*Entry, len(srcs))
		m.heap = make([]int, 0, len(srcs))
	}
	m.cur = m.cur[:len(srcs)]
	m.heap = m.heap[:0]
	m.top, m.started, m.err = nil, false, nil
}

// Next advances to the next entry in entry order and reports whether there
// is one; false at the end or at a source's error (Err).
func (m *MergingIter) Next() bool {
	if m.err != nil {
		return false
	}
	if !m.started {
		m.started = true
		for i, s := range m.srcs {
			if s.Next() {
				m.cur[i] = s.Entry()
				m.heap = append(m.heap, i)
			} else if err := s.Err(); err != nil {
				m.err = err
				return false
			}
		}
		for i := len(m.heap)/2 - 1; i >= 0; i-- {
			m.down(i)
		}
	} else if len(m.heap) > 0 {
		i := m.heap[0]
		if s := m.srcs[i]; s.Next() {
			m.cur[i] = s.Entry()
		} else {
			if err := s.Err(); err != nil {
				m.err = err
				m.top = nil
				return false
			}
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap = m.heap[:last]
		}
		if len(m.heap) > 1 {
			m.down(0)
		}
	}
	if len(m.heap) == 0 {
		m.top = nil
		return false
	}
	m.top = m.cur[m.heap[0]]
	return true
}

// Entry returns the current entry (after Next returned true).
func (m *MergingIter) Entry() *Entry { return m.top }

// Source returns the index in srcs of the source the current entry came
// from.
func (m *MergingIter) Source() int { return m.heap[0] }

// Err returns the source error that stopped the merge, nil at a clean end.
func (m *MergingIter) Err() error { return m.err }

func (m *MergingIter) less(a, b int) bool {
	if c := Compare(m.cur[a], m.cur[b]); c != 0 {
		return c < 0
	}
	return a < b
}

func (m *MergingIter) down(i int) {
	h := m.heap
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		j := l
		if r := l + 1; r < len(h) && m.less(h[r], h[l]) {
			j = r
		}
		if !m.less(h[j], h[i]) {
			return
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
