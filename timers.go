package strata

import (
	"fmt"
	"math"

	"github.com/strata-db/strata/internal/engine"
	"github.com/zeebo/xxh3"
)

// Timers: Flink's InternalTimerService (getInternalTimerService(name, namespaceSerializer,
// triggerable)) — event-time and processing-time timers per key, namespace and timestamp,
// fired in timestamp order when the caller advances the watermark or processing time. This
// file is the typed API; the queues are the engine's (internal/engine, timers.go: package
// timer's queues, per key group, outside the Go heap, charged to the memory budget,
// memory.PurposeTimers), and so is everything that moves them. Where they go:
//
//   - a checkpoint: frozen at the cut (copy on write: O(key groups), nothing copied per
//     timer), written whole in the background as one object of one section per key group,
//     listed in the manifest (format version 4, kind timers), at every checkpoint, changelog
//     ones too (internal/engine, doc.go "Timers": timers are snapshotted, not logged);
//   - Restore: the sections of the Store's key groups, from every checkpoint given, so timers
//     move with their key groups when rescaling (engine.RestoreTimers);
//   - the Store's directory (Close, Open): the same sections in one file, "TIMERS-<16 hex
//     digits>", written and read by the engine (internal/engine/timerfile.go: PersistAll,
//     LoadTimerFile) before the persist point that names it (its name, size and CRC32C are in the state registry,
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
	name string
	q    *engine.TimerQueues // the engine's queues of the service, by time domain
	now  [2]int64            // the watermark and the processing time
	busy [2]bool             // an advance of the domain is running
	iter int                 // ForEach calls running
}

// The time domains, by their short names.
const (
	eventTime      = engine.EventTime
	processingTime = engine.ProcessingTime
)

// NewTimerService registers d on s (Flink's getInternalTimerService(name, ...)), or returns the
// timer service registered under d.Name before (same codec). A service of that name restored
// by Open or Restore comes back with its timers. Timer services and states share one
// namespace of names. Errors: ErrIncompatibleState (the name is a state's, or a timer
// service's with another codec type), ErrClosed.
func NewTimerService[N any](s *Store, d TimerServiceDescriptor[N]) (*TimerService[N], error) {
	return register(s, d.Name, kindTimerService, [2]any{d.NamespaceCodec, nil}, func(b stateBase) *TimerService[N] {
		return &TimerService[N]{b: b, c: s.timerCore(d.Name), codec: d.NamespaceCodec}
	})
}

// timerCore returns the core of timer service name, making it (and the engine's queues of it)
// when it is new.
func (s *Store) timerCore(name string) *timerCore {
	if c, ok := s.timers[name]; ok {
		return c
	}
	c := &timerCore{name: name, q: s.e.TimerQueues(name), now: [2]int64{math.MinInt64, math.MinInt64}}
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
func (t *TimerService[N]) NumEventTimeTimers() int { return t.c.q.Len(eventTime) }

// NumProcessingTimeTimers returns the number of pending processing-time timers.
func (t *TimerService[N]) NumProcessingTimeTimers() int { return t.c.q.Len(processingTime) }

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
	if len(k.b) > engine.MaxTimerKeyLen || len(t.nsbuf) > engine.MaxTimerNamespaceLen {
		return fmt.Errorf("%w: a timer's key of %d bytes (at most %d) or namespace of %d (at most %d)",
			ErrKeyTooLarge, len(k.b), engine.MaxTimerKeyLen, len(t.nsbuf), engine.MaxTimerNamespaceLen)
	}
	return nil
}

func (t *TimerService[N]) register(op string, d engine.TimerDomain, k Key, ns N, ts int64) error {
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
	_, err := t.c.q.Add(d, int(k.kg), k.kh, k.hash, k.b, t.nsbuf, ts)
	return t.wrapNil(op, err)
}

func (t *TimerService[N]) delete(op string, d engine.TimerDomain, k Key, ns N, ts int64) error {
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
	return t.wrapNil(op, t.c.q.Delete(d, int(k.kg), k.kh, k.b, t.nsbuf, ts))
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

func (t *TimerService[N]) advance(op string, d engine.TimerDomain, to int64, fn func(Timer[N]) error) error {
	s, c := t.b.s, t.c
	if s.closed {
		return t.wrap(op, ErrClosed)
	}
	if c.iter > 0 || c.busy[d] {
		return t.wrap(op, fmt.Errorf("%w: %s inside a callback of this service", ErrTimerServiceBusy, op))
	}
	c.now[d] = to
	c.busy[d] = true
	q := c.q.Queue(d)
	defer func() { c.busy[d] = false }()
	for {
		if s.closed {
			return t.wrap(op, ErrClosed)
		}
		s.enter(opTimer)
		tm, buf, ok, err := q.Pop(to, t.fbuf)
		t.fbuf = buf
		if err != nil {
			err = c.q.Retry(err)
			s.exit()
			if err == nil {
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
func (t *TimerService[N]) timerOf(tm engine.Timer) (Timer[N], error) {
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

func (t *TimerService[N]) forEach(d engine.TimerDomain, fn func(Timer[N]) error) error {
	s, c := t.b.s, t.c
	op := "for each " + d.String() + " timer"
	if s.closed {
		return t.wrap(op, ErrClosed)
	}
	c.iter++
	defer func() { c.iter-- }()
	var cur engine.TimerCursor
	for {
		if s.closed {
			return t.wrap(op, ErrClosed)
		}
		s.enter(opTimer)
		tm, buf, ok := c.q.Next(d, &cur, t.ibuf)
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
