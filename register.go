package strata

import (
	"fmt"

	"github.com/strata-db/strata/internal/engine"
)

// stateKind is the kind of a registered state, as the state registry records it
// (engine.StateKind; its values are part of the registry's format).
type stateKind = engine.StateKind

const (
	kindValue       = engine.KindValue
	kindList        = engine.KindList
	kindMap         = engine.KindMap
	kindReducing    = engine.KindReducing
	kindAggregating = engine.KindAggregating
	// kindTimerService is a timer service (timers.go): registered by name like a state, with
	// its namespace codec, so it survives Close and Open and travels with checkpoints; it
	// keeps no data in the tiers (its id names none). Registry version 4 and later.
	kindTimerService = engine.KindTimerService
)

// maxStates is the number of states one Store can register: state ids are uint16 and 0 is
// reserved.
const maxStates = engine.MaxStates

// registration is one registered state: its name, kind, id, codecs, TTL and the state object.
type registration struct {
	name   string
	kind   stateKind
	id     uint16
	ids    []uint16 // its effective ids by key group (stateBase.ids); nil: id everywhere
	codecs [2]any
	ttl    *ttlState // nil: no TTL
	state  any       // *ValueState[T], *ListState[T], ...
}

// register returns the state registered under name, creating it with mk when the name is
// new: registerTTL without a TTL, for kinds of state that take no TTL option (the keyed
// state kinds pass their descriptor's TTL to registerTTL).
func register[S any](s *Store, name string, kind stateKind, codecs [2]any, mk func(b stateBase) *S) (*S, error) {
	return registerTTL(s, name, kind, codecs, nil, mk)
}

// registerTTL returns the state registered under name, creating it with mk when the name is
// new. A name registered in this run with another kind, other codecs, other type parameters
// or with a TTL where it had none (or the reverse) fails with ErrIncompatibleState; an
// invalid ttl with ErrInvalidOptions. A name stored (Open, Restore) with another kind or
// other codecs fails with ErrIncompatibleState; one stored with the other TTL flag is
// migrated to the requested one before it is returned (ttl_migrate.go, as Flink 2.x), and a
// failed migration discards the Store (the error includes ErrClosed).
func registerTTL[S any](s *Store, name string, kind stateKind, codecs [2]any, ttl *TTLConfig, mk func(b stateBase) *S) (*S, error) {
	if s.closed {
		return nil, ErrClosed
	}
	if name == "" {
		return nil, fmt.Errorf("%w: empty state name", ErrIncompatibleState)
	}
	if ttl != nil {
		if err := ttl.validate(name); err != nil {
			return nil, err
		}
	}
	for i, c := range codecs {
		if c == nil && (i == 0 || kind == kindMap) {
			return nil, fmt.Errorf("%w: state %q: nil codec", ErrIncompatibleState, name)
		}
	}
	if st, ok := s.ops[name]; ok {
		return nil, fmt.Errorf("%w: state %q is %v state, requested as %v state", ErrIncompatibleState, name, st.Kind, kind)
	}
	if r, ok := s.states[name]; ok {
		if r.kind != kind {
			return nil, fmt.Errorf("%w: state %q is registered as %v state, requested as %v state",
				ErrIncompatibleState, name, r.kind, kind)
		}
		if !sameCodec(r.codecs[0], codecs[0]) || !sameCodec(r.codecs[1], codecs[1]) {
			return nil, fmt.Errorf("%w: state %q is registered with codec %T/%T, requested with %T/%T",
				ErrIncompatibleState, name, r.codecs[0], r.codecs[1], codecs[0], codecs[1])
		}
		if (r.ttl != nil) != ttl.enabled() {
			return nil, fmt.Errorf("%w: state %q is registered %s, requested %s",
				ErrIncompatibleState, name, withTTL(r.ttl != nil), withTTL(ttl.enabled()))
		}
		st, ok := r.state.(*S)
		if !ok {
			return nil, fmt.Errorf("%w: state %q is registered as %T, requested as %T",
				ErrIncompatibleState, name, r.state, (*S)(nil))
		}
		return st, nil
	}
	id, migrate, err := s.checkPersistedTTL(name, kind, codecs, ttl.enabled())
	if err != nil {
		return nil, err
	}
	if migrate && kind > kindAggregating {
		return nil, fmt.Errorf("%w: state %q is stored %s, requested %s", ErrIncompatibleState, name,
			withTTL(!ttl.enabled()), withTTL(ttl.enabled()))
	}
	if id == 0 {
		if s.nextID > maxStates {
			return nil, fmt.Errorf("%w: state %q: more than %d states", ErrIncompatibleState, name, maxStates)
		}
		id = uint16(s.nextID)
		s.nextID++
	}
	var ts *ttlState
	if ttl.enabled() {
		ts = newTTLState(ttl, kind)
	}
	sb := stateBase{s: s, id: id, name: name, ttl: ts, kg0: s.kgStart, ids: s.aliasIDs(name, id)}
	if migrate {
		// Stored with the other TTL flag: rewrite its values before the state is registered
		// (ttl_migrate.go, invariant 1); a failure discards the Store.
		if err := s.migrateTTL(&sb, kind, ttl.enabled()); err != nil {
			return nil, err
		}
		p := s.persisted[name]
		p.TTL = ttl.enabled()
		s.persisted[name] = p
	}
	sb.hot = s.newHotTable(kind, ts, append([]uint16{id}, sb.ids...)...)
	st := mk(sb)
	s.states[name] = &registration{name: name, kind: kind, id: id, ids: sb.ids, codecs: codecs, ttl: ts, state: st}
	if ts != nil {
		s.setTTLTable()
	}
	if ts != nil && ts.incr > 0 && ttl.Cleanup.EveryRecord {
		s.perRecord = append(s.perRecord, sb)
	}
	return st, nil
}

// withTTL names a TTL flag in errors.
func withTTL(on bool) string {
	if on {
		return "with a TTL"
	}
	return "without a TTL"
}

// stateBase is what every state holds: its Store, id, name and TTL.
type stateBase struct {
	s    *Store
	id   uint16
	name string
	ttl  *ttlState // nil: the state has no TTL
	// ids is the state's effective id by key group (index: key group - kg0) when the registry has
	// aliases for it (internal/engine/registry.go, "State id aliases"); nil: id everywhere.
	ids []uint16
	kg0 uint32
	// hot is the state's hot table (hot.go); nil: the tier is off, or the state has a TTL.
	hot *hotTable
}

// idAt returns the id the state's data of k's key group is stored under: id, or its alias
// there. A key group outside the Store's gets id (the access fails its check anyway).
func (b *stateBase) idAt(k Key) uint16 {
	if b.ids != nil {
		if i := k.kg - b.kg0; i < uint32(len(b.ids)) {
			return b.ids[i]
		}
	}
	return b.id
}

// aliasIDs returns the effective ids by key group of the state name with id (stateBase.ids),
// or nil when the registry has no alias for it.
func (s *Store) aliasIDs(name string, id uint16) []uint16 {
	as := s.aliases[name]
	if len(as) == 0 {
		return nil
	}
	ids := make([]uint16, s.kgSpan+1)
	for i := range ids {
		ids[i] = id
	}
	for _, a := range as {
		for kg := int(a.Lo); kg <= int(a.Hi); kg++ {
			ids[kg-int(s.kgStart)] = a.ID
		}
	}
	return ids
}

// Name returns the name the state was registered under.
func (b *stateBase) Name() string { return b.name }

// wrap adds the state name to an error from the layers below (error path only).
//
//go:noinline
func (b *stateBase) wrap(op string, err error) error {
	return fmt.Errorf("strata: %s state %q: %w", op, b.name, err)
}

//go:noinline
func stateError(name, msg string) error {
	return fmt.Errorf("%w: state %q: %s", ErrIncompatibleState, name, msg)
}
