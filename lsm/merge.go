package lsm

import (
	"bytes"

	"github.com/strata-db/strata/internal/base"
)

// resolver applies the merge rules of a compaction (doc.go, "Merge rules")
// to a stream of entries in entry order, calling emit with what survives, in
// entry order. It buffers one group — the versions of one (Order, Key,
// UserKey), newest first — copying their bytes into an arena, and remembers
// across the groups of one run (Order, Key) the newest map tombstone.
type resolver struct {
	filter  CompactionFilter
	bottom  bool
	emit    func(*base.Entry) error
	dropped int64 // entries the filter dropped
	hidden  int64 // entries hidden by a newer version or map tombstone

	group   []base.Entry
	arena   []byte
	runTomb uint64 // Seq of the run's newest map tombstone; valid if hasTomb
	hasTomb bool
	out     [2]base.Entry
	val     []byte
}

func (r *resolver) copyBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	n := len(r.arena)
	r.arena = append(r.arena, b...)
	return r.arena[n:len(r.arena):len(r.arena)]
}

// push takes the next entry of the merged stream.
func (r *resolver) push(e *base.Entry) error {
	if len(r.group) > 0 {
		g := &r.group[0]
		sameRun := e.Order == g.Order && bytes.Equal(e.Key, g.Key)
		if sameRun && bytes.Equal(e.UserKey, g.UserKey) {
			if e.Seq == r.group[len(r.group)-1].Seq {
				r.hidden++ // a duplicate from an older source
				return nil
			}
			r.append(e)
			return nil
		}
		if err := r.flush(); err != nil {
			return err
		}
		if !sameRun {
			r.hasTomb = false
		}
	}
	r.append(e)
	return nil
}

func (r *resolver) append(e *base.Entry) {
	c := *e
	c.Key = r.copyBytes(e.Key)
	c.UserKey = r.copyBytes(e.UserKey)
	c.Value = r.copyBytes(e.Value)
	r.group = append(r.group, c)
}

// flush resolves the buffered group and emits the survivors.
func (r *resolver) flush() error {
	g := r.group
	r.group = r.group[:0]
	defer func() { r.arena = r.arena[:0] }()
	if r.hasTomb && len(g) > 0 && len(g[0].UserKey) > 0 {
		// A newer map tombstone hides older entries of every user key.
		n := 0
		for n < len(g) && g[n].Seq > r.runTomb {
			n++
		}
		r.hidden += int64(len(g) - n)
		g = g[:n]
	}
	if len(g) == 0 {
		return nil
	}
	out := r.out[:0]
	ops := 0
	for ops < len(g) && g[ops].Kind == base.KindListAppend {
		ops++
	}
	if ops == 0 {
		out = append(out, g[0]) // newest wins
		r.hidden += int64(len(g) - 1)
	} else {
		// Operands stack on the newest base below them.
		res := g[0]
		r.val = r.val[:0]
		switch {
		case ops < len(g) && g[ops].Kind == base.KindListBase:
			r.val = append(r.val, g[ops].Value...)
			res.Kind = base.KindListBase
		case ops < len(g) || r.bottom:
			// A tombstone (or any other base) below: the operands are the
			// whole list. At the bottom nothing lies below them.
			res.Kind = base.KindListBase
		default:
			res.Kind = base.KindListAppend // base not in the inputs: stay an operand
		}
		for i := ops - 1; i >= 0; i-- {
			r.val = append(r.val, g[i].Value...)
		}
		res.Value = r.val
		out = append(out, res)
		r.hidden += int64(len(g) - 1)
	}
	if len(g[0].UserKey) == 0 {
		// The newest KindTombstone of (Key, "") is the map's clear: it hides
		// older entries of every user key of the run. Keep it beside a newer
		// map entry of user key "" (maps only; a value or list key has no
		// other user keys to hide).
		for i := range g {
			if g[i].Kind == base.KindTombstone {
				r.hasTomb, r.runTomb = true, g[i].Seq
				if i > 0 && (out[0].Kind == base.KindMapEntry || out[0].Kind == base.KindMapEntryTombstone) {
					out = append(out, g[i])
					r.hidden--
				}
				break
			}
		}
	}
	for i := range out {
		if r.filter(&out[i], r.bottom) {
			r.dropped++
			continue
		}
		if err := r.emit(&out[i]); err != nil {
			return err
		}
	}
	return nil
}
