package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/vfs"
	"github.com/strata-db/strata/memory"
	"github.com/strata-db/strata/timer"
	"github.com/zeebo/xxh3"
)

// The timer queues (doc.go, "Timers"): the engine owns the queues of every timer service of
// the Store — package timer's, one per time domain of a service, per key group a set, a heap
// and an arena in one region outside the Go heap (memory.PurposeTimers) — and everything that
// moves them: the freeze at a checkpoint's cut (StartCheckpoint), the timer file of the
// directory (PersistAll, LoadTimerFile), the restore of the timer sections of a Store's key
// groups from checkpoints (RestoreTimers: timers move with their key groups on rescale), and
// the canonical savepoint's timers (CanonicalTimers, AddTimer). The root's timers.go keeps the
// typed API: namespaces encoded by their codec, the watermark and processing time, the
// callbacks.

// TimerDomain is a timer's time domain (timer.Domain: part of the section format).
type TimerDomain = timer.Domain

// The time domains.
const (
	EventTime      = timer.EventTime
	ProcessingTime = timer.ProcessingTime
)

// Timer is one timer as the queues give it out (timer.Timer): its Key and Namespace alias the
// buffer of the call that returned it.
type Timer = timer.Timer

// TimerCursor is the position of an iteration over a queue (TimerQueues.Next); the zero
// value starts at the first key group.
type TimerCursor = timer.Cursor

// Limits of a timer's bytes (timer.MaxKeyLen, timer.MaxNamespaceLen).
const (
	MaxTimerKeyLen       = timer.MaxKeyLen
	MaxTimerNamespaceLen = timer.MaxNamespaceLen
)

// timers is the engine's part of the timer services: the queues by service name, and what
// loading and persisting them needs.
type timers struct {
	byName     map[string]*TimerQueues
	fs         vfs.FS
	dir        string
	kg         checkpoint.KeyGroupRange
	keyGroupOf func(keyHash int32) int
	file       TimerFileRef // the timer file the directory's persist point names (zero: none)
}

// initTimers keeps what the timer queues need from o (Open).
func (t *Engine) initTimers(o *Options) {
	t.tm = timers{fs: o.FS, dir: o.Dir, kg: o.KeyGroups, keyGroupOf: o.KeyGroupOfHash}
}

// TimerQueues is the queues of one timer service, one per time domain, over the Store's key
// groups (Options.KeyGroups), charged to the engine's budget. Its methods are the timer hot
// paths: no allocation once a key group's region has grown. A change that needs memory the
// budget lacks waits as a keyed write does (backpressure, then ErrMemoryBudget). Owner
// goroutine only.
type TimerQueues struct {
	t *Engine
	q [2]*timer.Queue // by TimerDomain
}

// TimerQueues returns the queues of the timer service name, making them empty when they are
// new (a service registered, or named by the registry a Store was opened or restored with).
func (t *Engine) TimerQueues(name string) *TimerQueues {
	if c, ok := t.tm.byName[name]; ok {
		return c
	}
	kg := t.tm.kg
	c := &TimerQueues{t: t}
	for d := range c.q {
		c.q[d] = timer.NewQueue(t.budget, kg.Start, kg.End-kg.Start+1)
	}
	if t.tm.byName == nil {
		t.tm.byName = map[string]*TimerQueues{}
	}
	t.tm.byName[name] = c
	return c
}

// Len returns the number of pending timers of domain d.
func (c *TimerQueues) Len(d TimerDomain) int { return c.q[d].Len() }

// retry turns a queue's error *err (not nil) that is ErrMemoryBudget into backpressure: true
// after the wait freed memory, false otherwise, with *err the error to fail with (err itself
// when it is no budget error). The callers test err != nil first: no call on the hot path.
func (c *TimerQueues) retry(err *error) bool {
	if !errors.Is(*err, memory.ErrMemoryBudget) {
		return false
	}
	*err = c.t.backpressure(*err)
	return *err == nil
}

// Add registers the timer (key, ns, ts) of key group kg in domain d; kh is the key's xxh3
// hash, keyHash the 32-bit hash its key group was assigned from. A pending timer is left as
// it is (added false). The key's and namespace's lengths are the caller's to check
// (MaxTimerKeyLen, MaxTimerNamespaceLen). Errors: ErrMemoryBudget after backpressure,
// timer.ErrGroupFull. Nothing changes on error.
func (c *TimerQueues) Add(d TimerDomain, kg int, kh uint64, keyHash int32, key, ns []byte, ts int64) (bool, error) {
	h := timer.Hash(kh, base.HashNamespace(ns), ts)
	for {
		added, err := c.q[d].Add(kg, h, keyHash, key, ns, ts)
		if err == nil || !c.retry(&err) {
			return added, err
		}
	}
}

// Delete deletes the timer (key, ns, ts) of key group kg in domain d (kh: the key's xxh3
// hash); deleting a timer that is not pending does nothing. Errors: ErrMemoryBudget after
// backpressure (a key group frozen by a checkpoint is copied by its first change).
func (c *TimerQueues) Delete(d TimerDomain, kg int, kh uint64, key, ns []byte, ts int64) error {
	h := timer.Hash(kh, base.HashNamespace(ns), ts)
	for {
		_, err := c.q[d].Delete(kg, h, key, ns, ts)
		if err == nil || !c.retry(&err) {
			return err
		}
	}
}

// TimerQueue is one time domain's queue of a service (timer.Queue). The root fires timers
// with its Pop straight away: firing is the hottest timer path, and a wrapper frame around
// Pop's large result cost 13-18% of BenchmarkTimers/op=fire/pending=1K (thread CPU, p<0.07
// in three runs). Its ErrMemoryBudget goes to Retry.
type TimerQueue = timer.Queue

// Queue returns the queue of domain d. Pop on it removes and returns the first timer in firing
// order if its timestamp is at most a limit; ErrMemoryBudget (a key group frozen by a
// checkpoint is copied by its first change; the timer stays pending): call Retry with it,
// then Pop again if it returns nil.
func (c *TimerQueues) Queue(d TimerDomain) *TimerQueue { return c.q[d] }

// Retry waits for memory after an operation of c failed with err (backpressure, as a keyed
// write refused for memory): nil when the wait freed memory and the operation is to be tried
// again, else the error to fail with (err itself when it is no ErrMemoryBudget).
func (c *TimerQueues) Retry(err error) error {
	if c.retry(&err) {
		return nil
	}
	return err
}

// Next returns the timer of domain d at cur and advances cur (ok false: no more), key group
// by key group; its bytes alias buf, grown as needed and returned. The queue must not change
// during an iteration.
func (c *TimerQueues) Next(d TimerDomain, cur *TimerCursor, buf []byte) (Timer, []byte, bool) {
	return c.q[d].Next(cur, buf)
}

// timerSources returns the queues by service name and domain (timer.Freeze's order).
func (t *Engine) timerSources() []timer.Source {
	names := make([]string, 0, len(t.tm.byName))
	for name := range t.tm.byName {
		names = append(names, name)
	}
	slices.Sort(names)
	srcs := make([]timer.Source, 0, 2*len(names))
	for _, name := range names {
		c := t.tm.byName[name]
		srcs = append(srcs, timer.Source{Service: name, Domain: EventTime, Queue: c.q[EventTime]},
			timer.Source{Service: name, Domain: ProcessingTime, Queue: c.q[ProcessingTime]})
	}
	return srcs
}

// timerCount returns the number of pending timers of every service and domain.
func (t *Engine) timerCount() int {
	n := 0
	for _, c := range t.tm.byName {
		n += c.q[EventTime].Len() + c.q[ProcessingTime].Len()
	}
	return n
}

// freezeTimers is the checkpoint cut's hook (CheckpointSpec.timers): it freezes the queues
// (timer.Freeze); nil without timer services.
func (t *Engine) freezeTimers() func() *timer.Snapshot {
	if len(t.tm.byName) == 0 {
		return nil
	}
	return func() *timer.Snapshot { return timer.Freeze(t.timerSources()) }
}

// closeTimers releases the queues' memory (Close, after the checkpoints are closed: no upload
// reads them any more).
func (t *Engine) closeTimers() {
	for _, c := range t.tm.byName {
		for _, q := range c.q {
			q.Close()
		}
	}
	t.tm.byName = nil
}

// PersistAll writes the timers as a new timer file of the directory (none without timers),
// then the persist point (Persist) with meta(ref), the root's registry naming that file, and
// removes the timer files the persist point does not name (Close, Restore). The queues do not
// change meanwhile (the owner holds the Store). On error the previous persist point stands;
// a timer file written for it is removed by the next PersistAll or Open. Errors: Persist's;
// the file system's (ErrNoSpace for a full disk). Owner goroutine only.
func (t *Engine) PersistAll(meta func(TimerFileRef) []byte) error {
	if t.tail != nil {
		// A pending lazy tail first: its install records the restore's persist point and
		// removes every timer file but the restore's (invariant 36), which would take the
		// file written below with it.
		if err := t.awaitTail(); err != nil {
			return err
		}
	}
	var ref TimerFileRef
	if t.timerCount() > 0 {
		var err error
		if ref, err = writeTimerFile(t.tm.fs, t.tm.dir, t.timerSources()); err != nil {
			return err
		}
	}
	if err := t.Persist(meta(ref)); err != nil {
		return err
	}
	t.tm.file = ref
	removeStrayTimerFiles(t.tm.fs, t.tm.dir, ref.Name)
	return nil
}

// LoadTimerFile reads the timer file ref of the directory into the timer queues (Open, after
// TimerQueues made the queues of every service the registry names), then removes the stray
// timer files (of a Close that failed or crashed after writing one). Errors: ErrCorruption
// naming the file (missing, of another size or CRC32C, damaged inside, or holding timers the
// registry or the key groups do not allow); ErrMemoryBudget.
func (t *Engine) LoadTimerFile(ref TimerFileRef) error {
	if ref.Name != "" {
		b, err := readTimerFile(t.tm.fs, t.tm.dir, ref)
		if err != nil {
			return err
		}
		if err := timer.DecodeSections(ref.Name, b, t.loadTimer(ref.Name)); err != nil {
			return err
		}
	}
	t.tm.file = ref
	if t.tm.dir != "" {
		removeStrayTimerFiles(t.tm.fs, t.tm.dir, ref.Name)
	}
	return nil
}

// AddTimer puts tm, a timer of service in domain d read from file (a canonical savepoint's
// object), into its queue, checked as a restored timer is (loadTimer). Errors: ErrCorruption
// naming file; ErrMemoryBudget.
func (t *Engine) AddTimer(file, service string, d TimerDomain, tm Timer) error {
	return t.loadTimer(file)(service, d, tm)
}

// loadTimer returns the function that puts a decoded timer of file into its service's queue,
// checking it: a service with queues (the registry names it), a key group of the Store whose
// key hash gives it, not there already.
func (t *Engine) loadTimer(file string) func(service string, d TimerDomain, tm Timer) error {
	kg := t.tm.kg
	return func(service string, d TimerDomain, tm Timer) error {
		c, ok := t.tm.byName[service]
		switch {
		case !ok:
			return base.Corrupt(file, -1, nil, "timers of service %q, which the state registry does not name", service)
		case tm.KeyGroup < kg.Start || tm.KeyGroup > kg.End:
			return base.Corrupt(file, -1, nil, "timers of key group %d, outside the Store's %v", tm.KeyGroup, kg)
		case t.tm.keyGroupOf(tm.KeyHash) != tm.KeyGroup:
			return base.Corrupt(file, -1, nil, "a timer of key group %d whose key hash %d gives key group %d",
				tm.KeyGroup, tm.KeyHash, t.tm.keyGroupOf(tm.KeyHash))
		}
		added, err := c.Add(d, tm.KeyGroup, xxh3.Hash(tm.Key), tm.KeyHash, tm.Key, tm.Namespace, tm.Timestamp)
		if err != nil {
			return err
		}
		if !added {
			return base.Corrupt(file, -1, nil, "a %v timer of service %q in key group %d twice", d, service, tm.KeyGroup)
		}
		return nil
	}
}

// RestoreTimers puts the timers of the Store's key groups that sources hold into the timer
// queues (Restore, after TimerQueues made the queues of every timer service the registries
// name), so that timers move with their key groups when rescaling: each checkpoint's timer
// object is read once, the span of the sections of the Store's key groups, and each section
// checked against its manifest entry (size, CRC32C, key group) before it is decoded. It
// returns the number of timers restored. Errors: ErrCorruption naming the object and offset;
// the storage's; ErrMemoryBudget.
func (t *Engine) RestoreTimers(ctx context.Context, storage checkpoint.Storage, sources []*checkpoint.Manifest) (int, error) {
	kg := t.tm.kg
	byObj := map[string][]checkpoint.Object{}
	var names []string
	for _, m := range sources {
		for _, o := range m.Objects {
			k := int(o.KeyGroups.Start)
			if o.Kind != checkpoint.KindTimers || k < kg.Start || k > kg.End || o.KeyGroups.Start < m.KeyGroups.Start || o.KeyGroups.End > m.KeyGroups.End {
				continue
			}
			if _, ok := byObj[o.Name]; !ok {
				names = append(names, o.Name)
			}
			byObj[o.Name] = append(byObj[o.Name], o)
		}
	}
	before := t.timerCount()
	for _, name := range names {
		parts := byObj[name]
		lo, hi := parts[0].Offset, parts[0].Offset+parts[0].Length
		if !parts[0].Packed {
			lo, hi = 0, parts[0].Size
		}
		for _, o := range parts {
			if o.Packed {
				lo, hi = min(lo, o.Offset), max(hi, o.Offset+o.Length)
			} else {
				lo, hi = 0, max(hi, o.Size)
			}
		}
		b, err := checkpoint.GetObjectRange(ctx, storage, name, parts[0].Size, lo, hi-lo)
		if err != nil {
			return 0, fmt.Errorf("timers %s: %w", name, err)
		}
		for _, o := range parts {
			off, n := o.Offset, o.Length
			if !o.Packed {
				off, n = 0, o.Size
			}
			sec := b[off-lo : off-lo+n]
			if crc := crc32.Checksum(sec, base.CRC32C); crc != o.CRC {
				return 0, base.Corrupt(name, off, base.ErrChecksum, "timers of key group %d: crc32c %#08x, the manifest says %#08x", o.KeyGroups.Start, crc, o.CRC)
			}
			k, used, err := timer.DecodeSection(name, off, sec, t.loadTimer(name))
			if err != nil {
				return 0, err
			}
			if k != int(o.KeyGroups.Start) || used != len(sec) {
				return 0, base.Corrupt(name, off, nil, "a section of key group %d and %d bytes where the manifest lists key group %d and %d bytes",
					k, used, o.KeyGroups.Start, len(sec))
			}
		}
	}
	return t.timerCount() - before, nil
}

// CanonicalTimers calls fn for every pending timer, key group by key group (a canonical
// savepoint's order), from a snapshot that freezes nothing (a checkpoint still uploading keeps
// its own); the timer's bytes are valid during the call only. fn's error stops the walk and is
// returned; ctx's too. Owner goroutine only.
func (t *Engine) CanonicalTimers(ctx context.Context, fn func(service string, d TimerDomain, tm Timer) error) error {
	if t.timerCount() == 0 {
		return nil
	}
	snap := timer.Capture(t.timerSources())
	defer snap.Release()
	var b bytes.Buffer
	secs, err := snap.WriteTo(ctx, &b)
	if err != nil {
		return err
	}
	slices.SortFunc(secs, func(a, b timer.Section) int { return cmp.Compare(a.KeyGroup, b.KeyGroup) })
	for _, sec := range secs {
		if _, _, err := timer.DecodeSection("timers", sec.Offset, b.Bytes()[sec.Offset:sec.Offset+sec.Length], fn); err != nil {
			return err
		}
	}
	return nil
}
