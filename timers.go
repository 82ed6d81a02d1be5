package strata

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
	"github.com/strata-db/strata/timer"
	"github.com/zeebo/xxh3"
)

// Timers: Flink's InternalTimerService (getInternalTimerService(name, namespaceSerializer,
// triggerable)) — event-time and processing-time timers per key, namespace and timestamp,
// fired in timestamp order when the caller advances the watermark or processing time. The
// queues are package timer's: per key group, outside the Go heap, charged to the memory budget
// (memory.PurposeTimers). Where they go:
//
//   - a checkpoint: frozen at the cut (copy on write: O(key groups), nothing copied per
//     timer), written whole in the background as one object of one section per key group,
//     listed in the manifest (format version 4, kind timers), at every checkpoint, changelog
//     ones too (internal/engine, doc.go "Timers": timers are snapshotted, not logged);
//   - Restore: the sections of the Store's key groups, from every checkpoint given, so timers
//     move with their key groups when rescaling;
//   - the Store's directory (Close, Open): the same sections in one file, "TIMERS-<16 hex
//     digits>", written and read by the engine (internal/engine/timerfile.go) before the
//     persist point that names it (its name, size and CRC32C are in the state registry,
//     version 4: internal/engine/registry.go), so a crash reopens to the timers of the last
//     Close with its keyed state; the file of the previous Close is removed after the persist
//     point, stray ones at Open.
//
// The watermark and processing time are not persisted: a Store from Open or Restore starts at
// math.MinInt64, as Flink's InternalTimerServiceImpl does after a restore; the next advance
// fires what is due.

// TimerServiceDescriptor describes a timer service, as the name and namespace serializer
// given to Flink's InternalTimeServiceManager.getInternalTimerService.
type TimerServiceDescriptor[N any] struct {
	Name           string   // unique per Store, among states and timer services
	NamespaceCodec Codec[N] // required; a namespace is stored as its encoding
}

// Timer is a timer as a TimerService hands it to a callback, as Flink's InternalTimer.
type Timer[N any] struct {
	// Key is the timer's key in its namespace (Key.In of the namespace's encoding), ready for
	// state operations: ValueState.Get(t.Key) reads the state of the timer's key and window.
	// Its key group and hash are those of the Key the timer was registered with (a key made
	// with KeyWithHash keeps the host's hash). Its bytes alias a buffer of the service that
	// the next timer reuses: valid during the callback only (copy them to keep them).
	Key Key
	// Namespace is the decoded namespace (it may alias Key's bytes, as Bytes does).
	Namespace N
	// Timestamp is the timer's time in milliseconds (event time or processing time).
	Timestamp int64
}

// TimerService is the event-time and processing-time timers of one name on a Store, as
// Flink's InternalTimerService: at most one timer per (key, namespace, timestamp) in each time
// domain; Register twice is a no-op, Delete of an absent or already fired timer is a no-op.
// The caller drives time: AdvanceWatermark fires every event-time timer at or before the new
// watermark, AdvanceProcessingTime every processing-time timer at or before the new time —
// there is no clock and no goroutine.
//
// Firing order: by timestamp; timers with equal timestamps by key group, then by a hash of
// key, namespace and timestamp, then by key and namespace bytes — an order fixed by the timers
// themselves, the same on every run and after restores and rescales (not registration order;
// Flink leaves ties unspecified). A callback may register and delete timers and read and write
// state; a timer it registers at or before the watermark being advanced to fires in the same
// advance, as in Flink.
//
// Every timer change takes the key group of its Key (FLINK-26063): a Key outside the Store's
// key groups fails with ErrKeyGroupOutOfRange. Register, Delete and the advances are writes
// for the validity of aliased reads (package doc, invariant 2): one that waits for memory may
// install background work. Use from the Store's goroutine only.
type TimerService[N any] struct {
	b     stateBase
	c     *timerCore
	codec Codec[N]
	nsbuf []byte // encoded namespace of the operation
	fbuf  []byte // the fired timer's key and namespace (AdvanceWatermark, AdvanceProcessingTime)
	ibuf  []byte // the iterated timer's (ForEach)
}

// timerCore is a timer service's untyped part: registered, or restored (Open, Restore) and not
// registered again yet, whose timers are kept (and checkpointed) all the same.
type timerCore struct {
	name  string
	codec string          // codecID of the namespace codec
	q     [2]*timer.Queue // by timer.Domain
	now   [2]int64        // the watermark and the processing time
	busy  [2]bool         // an advance of the domain is running
	iter  int             // ForEach calls running
}

// The time domains, by their short names.
const (
	eventTime      = timer.EventTime
	processingTime = timer.ProcessingTime
)

// NewTimerService registers d on s (Flink's getInternalTimerService(name, ...)), or returns the
// timer service registered under d.Name before (same codec). A service of that name restored
// by Open or Restore comes back with its timers. Timer services and states share one
// namespace of names. Errors: ErrIncompatibleState (the name is a state's, or a timer
// service's with another codec type), ErrClosed.
func NewTimerService[N any](s *Store, d TimerServiceDescriptor[N]) (*TimerService[N], error) {
	return register(s, d.Name, kindTimerService, [2]any{d.NamespaceCodec, nil}, func(b stateBase) *TimerService[N] {
		return &TimerService[N]{b: b, c: s.timerCore(d.Name, codecID(d.NamespaceCodec)), codec: d.NamespaceCodec}
	})
}

// timerCore returns the core of timer service name, making it when it is new.
func (s *Store) timerCore(name, codec string) *timerCore {
	if c, ok := s.timers[name]; ok {
		return c
	}
	kg := *s.opts.KeyGroups
	c := &timerCore{name: name, codec: codec, now: [2]int64{math.MinInt64, math.MinInt64}}
	for d := range c.q {
		c.q[d] = timer.NewQueue(s.budget, kg.Start, kg.End-kg.Start+1)
	}
	if s.timers == nil {
		s.timers = map[string]*timerCore{}
	}
	s.timers[name] = c
	return c
}

// Name returns the name the service was registered under.
func (t *TimerService[N]) Name() string { return t.b.name }

// RegisterEventTimeTimer registers an event-time timer of k's key in namespace ns at ts
// (milliseconds), as Flink's registerEventTimeTimer(namespace, time) with k the current key:
// it fires at the first AdvanceWatermark to a watermark >= ts. k's own namespace is not used
// (the timer's is ns). Registering a timer that is pending does nothing. Errors:
// ErrKeyGroupOutOfRange, ErrClosed, ErrKeyTooLarge (a key over 65535 bytes or a namespace
// encoding over 32767), ErrMemoryBudget (after waiting for background work to free memory,
// as a keyed write does), ErrTimerServiceBusy (inside ForEach), timer.ErrGroupFull (a key
// group's timers beyond 4 GiB). Nothing changes on error. Cost: a set probe and an append or
// a short sift in memory outside the Go heap; no allocation.
func (t *TimerService[N]) RegisterEventTimeTimer(k Key, ns N, ts int64) error {
	return t.register("register event-time timer", eventTime, k, ns, ts)
}

// RegisterProcessingTimeTimer registers a processing-time timer, as
// RegisterEventTimeTimer does an event-time one (Flink's registerProcessingTimeTimer): it
// fires at the first AdvanceProcessingTime to a time >= ts. Errors as RegisterEventTimeTimer.
func (t *TimerService[N]) RegisterProcessingTimeTimer(k Key, ns N, ts int64) error {
	return t.register("register processing-time timer", processingTime, k, ns, ts)
}

// DeleteEventTimeTimer deletes the event-time timer of k's key in namespace ns at ts, as
// Flink's deleteEventTimeTimer; deleting a timer that is not pending (never registered,
// deleted or fired) does nothing. Errors: ErrKeyGroupOutOfRange, ErrClosed, ErrMemoryBudget
// (a timer's key group copied after a checkpoint's cut needs memory), ErrTimerServiceBusy
// (inside ForEach).
func (t *TimerService[N]) DeleteEventTimeTimer(k Key, ns N, ts int64) error {
	return t.delete("delete event-time timer", eventTime, k, ns, ts)
}

// DeleteProcessingTimeTimer deletes a processing-time timer, as DeleteEventTimeTimer does an
// event-time one (Flink's deleteProcessingTimeTimer).
func (t *TimerService[N]) DeleteProcessingTimeTimer(k Key, ns N, ts int64) error {
	return t.delete("delete processing-time timer", processingTime, k, ns, ts)
}

// CurrentWatermark returns the last watermark AdvanceWatermark was given, math.MinInt64 before
// the first (also after Open or Restore: it is not persisted, as in Flink).
func (t *TimerService[N]) CurrentWatermark() int64 { return t.c.now[eventTime] }

// CurrentProcessingTime returns the last time AdvanceProcessingTime was given, math.MinInt64
// before the first.
func (t *TimerService[N]) CurrentProcessingTime() int64 { return t.c.now[processingTime] }

// NumEventTimeTimers returns the number of pending event-time timers (Flink's
// numEventTimeTimers).
func (t *TimerService[N]) NumEventTimeTimers() int { return t.c.q[eventTime].Len() }

// NumProcessingTimeTimers returns the number of pending processing-time timers.
func (t *TimerService[N]) NumProcessingTimeTimers() int { return t.c.q[processingTime].Len() }

// AdvanceWatermark sets the watermark to wm and fires, in the service's order, every
// event-time timer with a timestamp <= wm, as Flink's InternalTimerServiceImpl.advanceWatermark:
// each is removed, then fn is called with it. Timers fn registers at or before wm fire in this
// call too. fn may register and delete timers of any service and read and write state; it
// must not advance this service's time in the same domain or Close the Store (later timers
// then stay pending, and the advance returns ErrClosed). The watermark is not checked to grow
// (Flink's is not either). If fn returns an error the advance stops and returns it: the timers
// after it stay pending, the one fn got is fired. Errors: fn's; ErrClosed; ErrMemoryBudget (a
// key group copied after a checkpoint's cut needs memory; the timer stays pending);
// ErrCorruption from the namespace codec's Decode; ErrTimerServiceBusy (inside ForEach, or
// inside an advance of the same domain).
func (t *TimerService[N]) AdvanceWatermark(wm int64, fn func(Timer[N]) error) error {
	return t.advance("advance watermark", eventTime, wm, fn)
}

// AdvanceProcessingTime sets the processing time to now (milliseconds) and fires, in the
// service's order, every processing-time timer with a timestamp <= now, as Flink's
// InternalTimerServiceImpl.onProcessingTime; everything else as AdvanceWatermark. The caller
// drives processing time (from its clock, or a test's): the Store reads no clock for timers.
func (t *TimerService[N]) AdvanceProcessingTime(now int64, fn func(Timer[N]) error) error {
	return t.advance("advance processing time", processingTime, now, fn)
}

// ForEachEventTimeTimer calls fn for every pending event-time timer, as Flink's
// forEachEventTimeTimer: key group by key group, in no particular order within one (not the
// firing order). fn may read and write state, but must not register, delete or fire timers of
// this service (ErrTimerServiceBusy) or Close the Store. fn's error stops the iteration and is
// returned. Errors: fn's, ErrClosed, ErrCorruption from the namespace codec.
func (t *TimerService[N]) ForEachEventTimeTimer(fn func(Timer[N]) error) error {
	return t.forEach(eventTime, fn)
}

// ForEachProcessingTimeTimer calls fn for every pending processing-time timer, as
// ForEachEventTimeTimer does for event-time ones.
func (t *TimerService[N]) ForEachProcessingTimeTimer(fn func(Timer[N]) error) error {
	return t.forEach(processingTime, fn)
}

// encodeNS encodes ns into t.nsbuf and checks the timer's sizes.
func (t *TimerService[N]) encodeNS(k Key, ns N) error {
	t.nsbuf = t.codec.Append(t.nsbuf[:0], ns)
	if len(k.b) > timer.MaxKeyLen || len(t.nsbuf) > timer.MaxNamespaceLen {
		return fmt.Errorf("%w: a timer's key of %d bytes (at most %d) or namespace of %d (at most %d)",
			ErrKeyTooLarge, len(k.b), timer.MaxKeyLen, len(t.nsbuf), timer.MaxNamespaceLen)
	}
	return nil
}

func (t *TimerService[N]) register(op string, d timer.Domain, k Key, ns N, ts int64) error {
	s := t.b.s
	s.enter(opTimer)
	defer s.exit()
	if err := s.check(k); err != nil {
		return t.wrap(op, err)
	}
	if t.c.iter > 0 {
		return t.wrap(op, fmt.Errorf("%w: inside ForEach", ErrTimerServiceBusy))
	}
	if err := t.encodeNS(k, ns); err != nil {
		return t.wrap(op, err)
	}
	h := timer.Hash(k.kh, base.HashNamespace(t.nsbuf), ts)
	for {
		_, err := t.c.q[d].Add(int(k.kg), h, k.hash, k.b, t.nsbuf, ts)
		if err = s.timerRetry(err); err != errRetry {
			return t.wrapNil(op, err)
		}
	}
}

func (t *TimerService[N]) delete(op string, d timer.Domain, k Key, ns N, ts int64) error {
	s := t.b.s
	s.enter(opTimer)
	defer s.exit()
	if err := s.check(k); err != nil {
		return t.wrap(op, err)
	}
	if t.c.iter > 0 {
		return t.wrap(op, fmt.Errorf("%w: inside ForEach", ErrTimerServiceBusy))
	}
	if err := t.encodeNS(k, ns); err != nil {
		return nil // no such timer can be pending
	}
	h := timer.Hash(k.kh, base.HashNamespace(t.nsbuf), ts)
	for {
		_, err := t.c.q[d].Delete(int(k.kg), h, k.b, t.nsbuf, ts)
		if err = s.timerRetry(err); err != errRetry {
			return t.wrapNil(op, err)
		}
	}
}

// errRetry is timerRetry's "try again".
var errRetry = errors.New("retry")

// timerRetry turns a timer operation's ErrMemoryBudget into backpressure: errRetry after the
// wait freed memory, the error to fail with otherwise (err itself when it is no budget error).
func (s *Store) timerRetry(err error) error {
	if err == nil || !errors.Is(err, ErrMemoryBudget) {
		return err
	}
	if err = s.e.Backpressure(err); err != nil {
		return err
	}
	return errRetry
}

// wrap adds the operation and the service's name to an error from below (error path only).
//
//go:noinline
func (t *TimerService[N]) wrap(op string, err error) error {
	return fmt.Errorf("strata: %s (timer service %q): %w", op, t.b.name, err)
}

// wrapNil is wrap for an error that may be nil.
func (t *TimerService[N]) wrapNil(op string, err error) error {
	if err == nil {
		return nil
	}
	return t.wrap(op, err)
}

func (t *TimerService[N]) advance(op string, d timer.Domain, to int64, fn func(Timer[N]) error) error {
	s, c := t.b.s, t.c
	if s.closed {
		return t.wrap(op, ErrClosed)
	}
	if c.iter > 0 || c.busy[d] {
		return t.wrap(op, fmt.Errorf("%w: %s inside a callback of this service", ErrTimerServiceBusy, op))
	}
	c.now[d] = to
	c.busy[d] = true
	defer func() { c.busy[d] = false }()
	for {
		if s.closed {
			return t.wrap(op, ErrClosed)
		}
		s.enter(opTimer)
		tm, buf, ok, err := c.q[d].Pop(to, t.fbuf)
		t.fbuf = buf
		if err != nil {
			err = s.timerRetry(err)
			s.exit()
			if err == errRetry {
				continue
			}
			return t.wrap(op, err)
		}
		s.exit()
		if !ok {
			return nil
		}
		x, err := t.timerOf(tm)
		if err != nil {
			return t.wrap(op, err)
		}
		if err := fn(x); err != nil {
			return err
		}
	}
}

// timerOf returns the typed timer of tm (its bytes aliased).
func (t *TimerService[N]) timerOf(tm timer.Timer) (Timer[N], error) {
	s := t.b.s
	k := s.makeKey(tm.Key, xxh3.Hash(tm.Key), tm.KeyHash).In(tm.Namespace)
	if int(k.kg) != tm.KeyGroup {
		panic(fmt.Sprintf("strata: invariant: a timer of key group %d has a key of key group %d", tm.KeyGroup, k.kg))
	}
	ns, err := t.codec.Decode(tm.Namespace)
	if err != nil {
		return Timer[N]{}, fmt.Errorf("timer namespace %x: %w", tm.Namespace, err)
	}
	return Timer[N]{Key: k, Namespace: ns, Timestamp: tm.Timestamp}, nil
}

func (t *TimerService[N]) forEach(d timer.Domain, fn func(Timer[N]) error) error {
	s, c := t.b.s, t.c
	op := "for each " + d.String() + " timer"
	if s.closed {
		return t.wrap(op, ErrClosed)
	}
	c.iter++
	defer func() { c.iter-- }()
	var cur timer.Cursor
	for {
		if s.closed {
			return t.wrap(op, ErrClosed)
		}
		s.enter(opTimer)
		tm, buf, ok := c.q[d].Next(&cur, t.ibuf)
		t.ibuf = buf
		s.exit()
		if !ok {
			return nil
		}
		x, err := t.timerOf(tm)
		if err != nil {
			return t.wrap(op, err)
		}
		if err := fn(x); err != nil {
			return err
		}
	}
}

// timerSources returns the Store's timer queues, by service name and domain (timer.Freeze's
// order).
func (s *Store) timerSources() []timer.Source {
	names := make([]string, 0, len(s.timers))
	for name := range s.timers {
		names = append(names, name)
	}
	slices.Sort(names)
	srcs := make([]timer.Source, 0, 2*len(names))
	for _, name := range names {
		c := s.timers[name]
		srcs = append(srcs, timer.Source{Service: name, Domain: eventTime, Queue: c.q[eventTime]},
			timer.Source{Service: name, Domain: processingTime, Queue: c.q[processingTime]})
	}
	return srcs
}

// freezeTimers is the checkpoint cut's hook (engine.CheckpointSpec.Timers); nil without timer
// services.
func (s *Store) freezeTimers() func() *timer.Snapshot {
	if len(s.timers) == 0 {
		return nil
	}
	return func() *timer.Snapshot { return timer.Freeze(s.timerSources()) }
}

// closeTimers releases the timer queues' memory (Close, Discard, after the engine closed: no
// checkpoint reads them any more).
func (s *Store) closeTimers() {
	for _, c := range s.timers {
		for _, q := range c.q {
			q.Close()
		}
	}
}

// writeTimerFile writes the Store's timers as a new timer file of its directory
// (engine.WriteTimerFile) and returns its reference (zero, and no file, without timers). Close
// calls it before the persist point that names it; the queues do not change meanwhile (Close
// holds the Store). Errors: the file system's (ErrNoSpace for a full disk); nothing is left
// behind then.
func (s *Store) writeTimerFile() (engine.TimerFileRef, error) {
	n := 0
	for _, c := range s.timers {
		n += c.q[eventTime].Len() + c.q[processingTime].Len()
	}
	if n == 0 {
		return engine.TimerFileRef{}, nil
	}
	return engine.WriteTimerFile(s.opts.fs, s.dir, s.timerSources())
}

// loadTimerFile reads the timer file ref of the Store's directory into the timer services
// (Open). Errors: ErrCorruption naming the file (missing, of another size or CRC32C, damaged
// inside, or holding timers the registry or the key groups do not allow); ErrMemoryBudget.
func (s *Store) loadTimerFile(ref engine.TimerFileRef) error {
	if ref.Name == "" {
		return nil
	}
	b, err := engine.ReadTimerFile(s.opts.fs, s.dir, ref)
	if err != nil {
		return err
	}
	return timer.DecodeSections(ref.Name, b, s.loadTimer(ref.Name))
}

// loadTimer returns the function that puts a decoded timer of file into its service's queue,
// checking it: a service the registry names, a key group of the Store whose key hash gives it,
// not there already.
func (s *Store) loadTimer(file string) func(service string, d timer.Domain, t timer.Timer) error {
	kg := *s.opts.KeyGroups
	return func(service string, d timer.Domain, t timer.Timer) error {
		c, ok := s.timers[service]
		switch {
		case !ok:
			return base.Corrupt(file, -1, nil, "timers of service %q, which the state registry does not name", service)
		case t.KeyGroup < kg.Start || t.KeyGroup > kg.End:
			return base.Corrupt(file, -1, nil, "timers of key group %d, outside the Store's %v", t.KeyGroup, kg)
		case int(uint32(murmurHash(t.KeyHash))%s.maxP) != t.KeyGroup:
			return base.Corrupt(file, -1, nil, "a timer of key group %d whose key hash %d gives key group %d",
				t.KeyGroup, t.KeyHash, uint32(murmurHash(t.KeyHash))%s.maxP)
		}
		h := timer.Hash(xxh3.Hash(t.Key), base.HashNamespace(t.Namespace), t.Timestamp)
		for {
			added, err := c.q[d].Add(t.KeyGroup, h, t.KeyHash, t.Key, t.Namespace, t.Timestamp)
			if err = s.timerRetry(err); err == errRetry {
				continue
			} else if err != nil {
				return err
			}
			if !added {
				return base.Corrupt(file, -1, nil, "a %v timer of service %q in key group %d twice", d, service, t.KeyGroup)
			}
			return nil
		}
	}
}

// removeStrayTimerFiles removes the timer files of the Store's directory other than keep
// (engine.RemoveStrayTimerFiles; best effort).
func (s *Store) removeStrayTimerFiles(keep string) {
	engine.RemoveStrayTimerFiles(s.opts.fs, s.dir, keep)
}

func crc32c(b []byte) uint32 { return crc32.Checksum(b, base.CRC32C) }
