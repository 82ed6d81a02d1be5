package strata

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// TTL migration: a state stored with a TTL (its values carry timestamps, base.TSLen bytes in
// front of each value, list element or map entry value; internal/base ttl.go) may be
// registered without one, and a state stored without a TTL may be registered with one, after
// Open of a directory, after Restore from native or changelog checkpoints and after a rescale
// (a Restore of other key-group ranges): registration rewrites every stored value of the
// state into the new shape before it returns the state, as Flink 2.x's state migration does
// when TTL is enabled or disabled for existing state (TtlAwareSerializer,
// needTtlStateMigration, migrateValueFromPriorSerializer). The rules are Flink's:
//
//   - TTL turned on: every value — value, reducing and aggregating state's value, each list
//     element, each map entry — is stamped with the migration time (Options.Clock, read once
//     when the migration starts), as Flink's migrateValueFromPriorSerializer wraps a bare
//     value in a TtlValue with ttlTimeProvider.currentTimestamp(): migration is the value's
//     last access, so it expires TTL after the registration that migrated it.
//   - TTL turned off: the timestamp is dropped from every value, expired or not, as Flink
//     unwraps getUserValue() without an expiry check: a value that had expired but that no
//     cleanup (read, compaction, sweep, FullSnapshot) had removed yet becomes visible again,
//     and nothing of the state expires from then on.
//   - Flink covers value state (TtlAwareSerializer), list elements (TtlAwareListSerializer)
//     and map entry values (TtlAwareMapSerializer; map keys carry no timestamp); reducing and
//     aggregating state store a value as value state does. So does Strata.
//   - A change of the TTL's duration, update type, visibility or cleanup is no migration
//     (stored timestamps are kept and judged by the new TTL: TTLConfig, "Restore").
//
// Another kind or other codecs stay ErrIncompatibleState: only the TTL flag migrates.
//
// Eager conversion. The migration scans the state's keys (every key group of the Store, each under
// its effective id: state id aliases, internal/engine/registry.go) in batches of ttlBatch keys and
// rewrites each key through the engine's write path — a value with OpPut, a list with one
// OpListReplace of the converted list (pieces as Update writes them), a map with OpMapPut of each
// entry — so memory is one batch of keys plus one key's list or map, and writes wait for the memory
// budget as every write does. Invariants:
//
//  1. While the migration runs the state is not registered: no read of the state, no
//     compaction filter and no sweep judges its data by the new shape (the engine's TTL table
//     holds only registered states, setTTLTable), so neither a converted nor an unconverted
//     value is ever taken for expired and dropped. The TTL table gains the state (TTL on) only
//     after every key is converted.
//  2. Every key of the state is rewritten exactly once: the scan yields each key once, also
//     when the key it yielded is rewritten before the next batch (stateScan, as Store.Keys and
//     ApplyToAllKeys, FLINK-9060), nothing else writes the state while the registration runs,
//     and a rewrite replaces the key's newest version whole
//     (a value, the whole list, every entry of the map), so older versions below in the
//     tiers, of the old shape, are shadowed and never read again. Compactions that meet such
//     an older version judge it, as any shadowed version, only to drop it.
//  3. The registry's TTL flag of the state changes with the registration (Store.registry
//     writes the registered shape), and it reaches disk only with a persist point (Close) or a
//     checkpoint manifest — both taken after registration returned, when every key has the
//     new shape. A crash during the migration therefore leaves the previous persist point or
//     checkpoint, the old flag with data of the old shape, which the next Open or Restore
//     migrates again from the start.
//  4. A migration that fails part way (ErrMemoryBudget, damage, a failing tier) has a state
//     of mixed shapes in memory that no registry flag describes: the Store is discarded
//     (Store.Discard: nothing is persisted, the directory keeps its previous persist point)
//     and registration returns the error joined with ErrClosed — the same as a crash at that
//     point, which invariant 3 covers.
//
// Cost: one read and one write of every entry of the state, at registration; Stats count the
// writes as any writes. Registration without a change of the TTL flag costs nothing more.

// migrateTTL rewrites every stored value of the state b into the shape of a TTL on (stamped
// with the clock now) or off (timestamp dropped), b's kind giving the layout. On failure it
// discards the Store (invariant 4 above) and returns the error naming the state.
func (s *Store) migrateTTL(b *stateBase, kind stateKind, on bool) error {
	s.enter(opCall)
	err := s.migrateTTLKeys(b, layoutOf(kind), on)
	s.exit()
	if err == nil {
		return nil
	}
	err = fmt.Errorf("strata: migrating state %q %s: %w; the Store is discarded (its last persist point or checkpoint holds the state unmigrated)",
		b.name, migrateDir(on), err)
	if derr := s.Discard(); derr != nil {
		err = errors.Join(err, derr)
	}
	return errors.Join(err, ErrClosed)
}

// migrateDir names the direction of a TTL migration in errors.
func migrateDir(on bool) string {
	if on {
		return "to a TTL"
	}
	return "off its TTL"
}

// migrateTTLKeys is migrateTTL's scan and rewrite; inside the guard.
func (s *Store) migrateTTLKeys(b *stateBase, layout base.TTLLayout, on bool) error {
	now := s.clock()
	sc := s.newScan(b, nil, true)
	defer sc.close()
	var (
		lb   [][]byte // list batches of a key
		buf  []byte   // a converted value, list or map
		offs []int    // a map's entries in buf: ends of user key, then of value
	)
	for {
		keys, _, err := sc.next(ttlBatch)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		for _, ck := range keys {
			h, _, ok := base.HashCompositeKey(ck)
			if !ok {
				return fmt.Errorf("%w: malformed composite key %x", ErrCorruption, ck)
			}
			switch layout {
			case base.TTLValue:
				raw, st := s.e.Get(h, ck)
				if st == failed {
					return s.e.TakeErr()
				}
				if st != found {
					continue
				}
				if buf, err = convertTS(buf[:0], raw, now, on); err != nil {
					return err
				}
				if err := s.apply(engine.OpPut, ck, h, nil, buf); err != nil {
					return err
				}
			case base.TTLList:
				var st status
				lb, st, _ = s.e.ListGet(h, ck, lb[:0], nil)
				if st == failed {
					return s.e.TakeErr()
				}
				if st != found {
					continue
				}
				buf = buf[:0]
				for _, bt := range lb {
					if buf, err = convertList(buf, bt, now, on); err != nil {
						return err
					}
				}
				clear(lb)
				if len(buf) == 0 {
					continue // an empty list reads as absent either way
				}
				if err := s.writeList(h, ck, buf, true); err != nil {
					return err
				}
			case base.TTLMap:
				buf, offs = buf[:0], offs[:0]
				it := s.e.MapIter(h, ck)
				for it.Next() {
					buf = append(buf, it.UserKey()...)
					offs = append(offs, len(buf))
					if buf, err = convertTS(buf, it.Value(), now, on); err != nil {
						break
					}
					offs = append(offs, len(buf))
				}
				it.Close()
				if err == nil {
					err = it.Err()
				}
				if err != nil {
					return err
				}
				start := 0
				for i := 0; i < len(offs); i += 2 {
					uk, v := buf[start:offs[i]], buf[offs[i]:offs[i+1]]
					if err := s.apply(engine.OpMapPut, ck, h, uk, v); err != nil {
						return err
					}
					start = offs[i+1]
				}
			}
		}
	}
}

// convertTS appends value v (a value or map entry value) converted to dst: stamped with now
// (on) or without its timestamp (off; ErrCorruption when v is shorter than one).
func convertTS(dst, v []byte, now int64, on bool) ([]byte, error) {
	if on {
		return append(base.AppendTS(dst, now), v...), nil
	}
	if len(v) < base.TSLen {
		return dst, fmt.Errorf("%w: a TTL value of %d bytes has no timestamp", ErrCorruption, len(v))
	}
	return append(dst, v[base.TSLen:]...), nil
}

// convertList appends the framed elements of list batch bt converted to dst, as convertTS
// converts each element (ErrCorruption on broken framing).
func convertList(dst, bt []byte, now int64, on bool) ([]byte, error) {
	for len(bt) > 0 {
		n, m := binary.Uvarint(bt)
		if m <= 0 || n > uint64(len(bt)-m) || !on && n < base.TSLen {
			return dst, fmt.Errorf("%w: list batch with bad element framing", ErrCorruption)
		}
		e := bt[m : m+int(n)]
		if on {
			dst = binary.AppendUvarint(dst, uint64(len(e)+base.TSLen))
			dst = append(base.AppendTS(dst, now), e...)
		} else {
			dst = binary.AppendUvarint(dst, uint64(len(e)-base.TSLen))
			dst = append(dst, e[base.TSLen:]...)
		}
		bt = bt[m+int(n):]
	}
	return dst, nil
}
