package strata

import (
	"fmt"
	"reflect"

	"github.com/strata-db/strata/internal/engine"
)

// Persistence (Store.Close, Open over an existing directory): the engine persists its tiers
// (internal/engine, persist.go); what the root adds is the state registry, the persist point's
// opaque metadata, which also carries the operator state (opstate.go) and names the timer file
// (timers.go), so that both are persisted atomically with the keyed state. The registry's
// byte layout, its versions, its state id aliases and its decoder live in the engine
// (internal/engine, registry.go: engine.Registry, engine.DecodeRegistry); the root fills it
// from its registered states, decodes the operator state blob it carries, and checks a
// registration against what is stored.

// codecID is a codec's identity in the registry: the import path and name of its Go type
// (with type arguments), "*" for pointers; "" for none. Two codecs of one type are assumed to
// encode alike (the registry cannot compare their values, as sameCodec does within a run).
func codecID(c any) string {
	if c == nil {
		return ""
	}
	t := reflect.TypeOf(c)
	ptr := ""
	for t.Kind() == reflect.Pointer && t.Name() == "" {
		ptr += "*"
		t = t.Elem()
	}
	if t.PkgPath() != "" {
		return ptr + t.PkgPath() + "." + t.Name()
	}
	return ptr + t.String()
}

// persistMeta returns the metadata of the Store's persist point: its registry with its
// operator state, if it has any, naming the timer file tf (Close, Restore; zero: none).
func (s *Store) persistMeta(tf engine.TimerFileRef) []byte {
	r := s.registry()
	if len(s.ops) > 0 {
		r.Ops = s.opSnapshot().Encode()
	}
	r.TimerFile = tf
	return r.Encode()
}

// encodeRegistry returns the registry blob of the Store, without operator state (a checkpoint
// manifest's, which carries the operator state in a field of its own): every state registered
// now and every state recovered from disk that was not registered again (its data is still
// there).
func (s *Store) encodeRegistry() []byte { return s.registry().Encode() }

// registry returns the Store's keyed state registry.
func (s *Store) registry() *engine.Registry {
	r := &engine.Registry{MaxParallelism: int(s.maxP), KeyGroups: *s.opts.KeyGroups, NextID: s.nextID,
		States: make(map[string]engine.PersistedState, len(s.states)+len(s.persisted))}
	for name, reg := range s.states {
		r.States[name] = engine.PersistedState{ID: reg.id, Kind: reg.kind, Codecs: [2]string{codecID(reg.codecs[0]), codecID(reg.codecs[1])}, TTL: reg.ttl != nil}
	}
	if len(s.aliases) > 0 {
		r.Aliases = s.aliases // never changed in place: replaced whole
	}
	for name, p := range s.persisted {
		if _, ok := s.states[name]; !ok {
			r.States[name] = p
		}
	}
	return r
}

// encodeRegistryOps returns the registry blob of r with the operator state ops (in its
// directory form; nil or without states: none): what Restore's persist point holds (tests).
func encodeRegistryOps(r *engine.Registry, ops *engine.OpSnapshot) []byte {
	r.Ops = nil
	if ops != nil && len(ops.States) > 0 {
		r.Ops = ops.Encode()
	}
	return r.Encode()
}

// decodeRegistry decodes a registry blob and the operator state blob it carries
// (engine.DecodeRegistryOps; nil: none). Errors are *base.CorruptionError values: the
// engine's, naming the "state registry", or engine.DecodeOps's, naming the "operator state in
// the state registry".
func decodeRegistry(b []byte) (*engine.Registry, *engine.OpSnapshot, error) {
	return engine.DecodeRegistryOps(b)
}

// checkPersisted checks a registration against the recovered registry and returns the id the
// state's data is stored under (0 when the name is new).
func (s *Store) checkPersisted(name string, kind stateKind, codecs [2]any) (uint16, error) {
	id, migrate, err := s.checkPersistedTTL(name, kind, codecs, false)
	if err == nil && migrate {
		// Only the keyed state kinds take a TTL (ttl_migrate.go); a registry giving another
		// kind a TTL flag is refused as before.
		err = fmt.Errorf("%w: state %q is stored with a TTL, requested without a TTL", ErrIncompatibleState, name)
	}
	return id, err
}

// checkPersistedTTL is checkPersisted of a state with a TTL (ttl) or without: migrate reports
// that the stored state has the other TTL flag, so that its values must be migrated to the
// requested shape before use (ttl_migrate.go; only kinds value to aggregating, which take a
// TTL, report it; Flink 2.x migrates so too, TtlAwareSerializer).
func (s *Store) checkPersistedTTL(name string, kind stateKind, codecs [2]any, ttl bool) (id uint16, migrate bool, err error) {
	p, ok := s.persisted[name]
	if !ok {
		return 0, false, nil
	}
	if p.Kind != kind {
		return 0, false, fmt.Errorf("%w: state %q is stored as %v state, requested as %v state",
			ErrIncompatibleState, name, p.Kind, kind)
	}
	if c0, c1 := codecID(codecs[0]), codecID(codecs[1]); c0 != p.Codecs[0] || c1 != p.Codecs[1] {
		return 0, false, fmt.Errorf("%w: state %q is stored with codec %s/%s, requested with %s/%s",
			ErrIncompatibleState, name, p.Codecs[0], p.Codecs[1], c0, c1)
	}
	return p.ID, p.TTL != ttl, nil
}
