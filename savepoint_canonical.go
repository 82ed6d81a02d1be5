package strata

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"time"

	"github.com/strata-db/strata/checkpoint"
	"github.com/strata-db/strata/internal/base"
	"github.com/strata-db/strata/internal/engine"
)

// Canonical savepoints (Flink's CANONICAL savepoint format): the Store's state written as
// logical entries in checkpoint's canonical format (checkpoint/doc.go, "Canonical savepoint
// layout"), which depends on none of the engine's file formats.
//
// Writing. The logical entries are read at one cut: Savepoint runs on the Store's goroutine
// and nothing writes between its first and last read, so the state it reads is the state at
// its call, as a checkpoint's cut is. Every state of the registry (those registered now and
// those recovered and not registered again) is scanned with the key scan (keys.go,
// internal/engine "Key scans": one merged walk of every tier per state, each composite key
// with live state once, under each key group's effective id), the scans merged by key group
// so the stream is in key-group order (within a key group: by state name, then scan order);
// each key's state is read with the engine's own reads (Get, ListGet, MapIter), so tombstones,
// cleared maps and shadowed versions are resolved by the one read path and never written.
// Values of TTL states are written with their last-access timestamp split off (TTL,
// ElementTTLs): an expired value that no cleanup removed yet is written with its timestamp,
// as Flink's savepoints keep what the backend holds; the restored Store judges it by its TTL
// at the first read, as the savepoint's Store would have. Timers are captured as of the call.
//
// Restoring. A canonical savepoint's manifest carries a registry of its states (ids 1..n by
// name, no aliases) and its operator state, so Restore matches and redistributes them as any
// checkpoint's; the entries of the Store's key groups (the blocks of those key groups only)
// are written into the restored Store under each state's effective id there, through the
// engine's bulk changelog replay (engine.BulkLoad: sorted, resolved and installed as L0
// files) while the upper tiers are empty, else through engine.Apply, and persisted before
// Restore returns (internal/engine/canonical.go, step 7 of the engine's restore sequence).

// SavepointCanonical is a savepoint in checkpoint's canonical format (Flink's CANONICAL):
// every live entry as (state name, kind, key, namespace, user key, value or list elements,
// TTL timestamp), timers, operator and broadcast state, the registry and the input position,
// key-group partitioned, independent of the engine's file formats — so that a later version
// of Strata, or another engine, can read it. Restored by Restore into any key-group range, in
// either RestoreMode, by writing its entries (slower than a native savepoint's file import).
const SavepointCanonical SavepointKind = 2

// canonicalSavepoint is Savepoint for SavepointCanonical.
func (s *Store) canonicalSavepoint(ctx context.Context, storage checkpoint.Storage, id uint64, inputPosition []byte) (CheckpointHandle, error) {
	if s.closed {
		return CheckpointHandle{}, ErrClosed
	}
	if id == 0 {
		return CheckpointHandle{}, fmt.Errorf("%w: savepoint id 0 (ids start at 1)", ErrInvalidOptions)
	}
	if len(inputPosition) > checkpoint.MaxBlob {
		return CheckpointHandle{}, fmt.Errorf("%w: input position of %d bytes, more than %d", ErrInvalidOptions, len(inputPosition), checkpoint.MaxBlob)
	}
	owner := SavepointOwner(s.owner())
	var buf bytes.Buffer
	s.enter(opCall)
	err := s.hotErrCheck()
	var meta *checkpoint.CanonicalMeta
	if err == nil {
		meta, err = s.writeCanonical(ctx, &buf, slices.Clone(inputPosition))
	}
	s.exit()
	if err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	return commitCanonical(ctx, storage, owner, id, meta, buf.Bytes())
}

// commitCanonical puts the canonical savepoint object b (whose meta is meta) under owner and
// commits manifest id listing it, with a registry of meta's states (ids 1..n in meta's order,
// no aliases) and meta's input position and operator state.
func commitCanonical(ctx context.Context, storage checkpoint.Storage, owner string, id uint64, meta *checkpoint.CanonicalMeta, b []byte) (CheckpointHandle, error) {
	kg := meta.KeyGroups
	name := checkpoint.PrivateName(owner, id, kg, "canon")
	if err := storage.Put(ctx, name, b); err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	reg := &engine.Registry{MaxParallelism: meta.MaxParallelism, KeyGroups: kg, States: map[string]engine.PersistedState{}}
	for i, st := range meta.States {
		reg.States[st.Name] = engine.PersistedState{ID: uint16(i + 1), Kind: stateKind(st.Kind), Codecs: st.Codecs, TTL: st.TTL}
	}
	reg.NextID = uint32(len(meta.States) + 1)
	m := &checkpoint.Manifest{ID: id, CreatedUnixMilli: time.Now().UnixMilli(), MaxParallelism: uint32(meta.MaxParallelism), KeyGroups: kg,
		Registry: reg.Encode(), InputPosition: meta.InputPosition, OperatorState: meta.OperatorState,
		Objects: []checkpoint.Object{{Name: name, Kind: checkpoint.KindCanonical, Size: int64(len(b)),
			CRC: crc32.Checksum(b, base.CRC32C), KeyGroups: kg}}}
	if err := checkpoint.Commit(ctx, storage, owner, m); err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	return CheckpointHandle{Owner: owner, ID: id, MaxParallelism: meta.MaxParallelism,
		KeyGroups: kg, InputPosition: m.InputPosition}, nil
}

// WriteCanonicalSavepoint writes a canonical savepoint that no Store took — state bootstrapped
// for a new job, or an old savepoint's entries transformed (strata-state write) — as
// checkpoint id of owner in storage: fill adds the entries and timers to a
// checkpoint.CanonicalWriter started with meta (in key-group order, its rules), then the
// object is put and the manifest committed with a registry of meta's states, as
// Store.Savepoint does for SavepointCanonical. Restore reads it into any key-group range of
// meta.MaxParallelism; a state registered there must have meta's kind, codec ids (the
// root's codecID: package path and type name, "" for none) and TTL flag. The object is built
// in memory (about the size of its entries). Errors: ErrInvalidOptions for id 0;
// checkpoint.ErrInvalidEntry (meta's or an entry's rules, from the writer); fill's;
// checkpoint.ErrExists when id is already committed under owner; checkpoint.ErrInvalidName for a bad
// owner; the storage's. Safe for concurrent use with other calls on other ids.
func WriteCanonicalSavepoint(ctx context.Context, storage checkpoint.Storage, owner string, id uint64, meta checkpoint.CanonicalMeta,
	fill func(*checkpoint.CanonicalWriter) error) (CheckpointHandle, error) {
	if id == 0 {
		return CheckpointHandle{}, fmt.Errorf("%w: savepoint id 0 (ids start at 1)", ErrInvalidOptions)
	}
	if err := checkpoint.ValidateOwner(owner); err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: owner %q: %w", id, owner, err)
	}
	var buf bytes.Buffer
	cw, err := checkpoint.NewCanonicalWriter(&buf, meta)
	if err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	if err := fill(cw); err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	if _, err := cw.Close(); err != nil {
		return CheckpointHandle{}, fmt.Errorf("strata: savepoint %d: %w", id, err)
	}
	return commitCanonical(ctx, storage, owner, id, &meta, buf.Bytes())
}

// canonicalCursor is one state's key scan in writeCanonical's merge by key group.
type canonicalCursor struct {
	idx  int // the state's index in the meta
	kind stateKind
	ttl  bool
	sc   stateScan
	keys [][]byte
	i    int
	done bool
}

// head returns the cursor's next composite key, reading the next batch when needed (nil at
// the end).
func (c *canonicalCursor) head() ([]byte, error) {
	for !c.done && c.i >= len(c.keys) {
		keys, _, err := c.sc.next(scanBatch)
		if err != nil {
			return nil, err
		}
		c.keys, c.i, c.done = keys, 0, len(keys) == 0
	}
	if c.done {
		return nil, nil
	}
	return c.keys[c.i], nil
}

// writeCanonical writes the Store's state now as a canonical savepoint to w and returns its
// meta (inside the guard). Errors: the scans' and reads' (ErrCorruption, I/O), w's.
func (s *Store) writeCanonical(ctx context.Context, w io.Writer, inputPosition []byte) (*checkpoint.CanonicalMeta, error) {
	kg := *s.opts.KeyGroups
	reg := s.registry()
	meta := &checkpoint.CanonicalMeta{MaxParallelism: int(s.maxP),
		KeyGroups:     kg,
		InputPosition: inputPosition, OperatorState: s.opSnapshot().Encode()}
	names := make([]string, 0, len(reg.States))
	for name := range reg.States {
		names = append(names, name)
	}
	slices.Sort(names)
	var curs []*canonicalCursor
	svc := map[string]int{}
	for i, name := range names {
		p := reg.States[name]
		meta.States = append(meta.States, checkpoint.CanonicalState{Name: name, Kind: checkpoint.StateKind(p.Kind), TTL: p.TTL, Codecs: p.Codecs})
		if p.Kind == kindTimerService {
			svc[name] = i
			continue
		}
		b := &stateBase{s: s, id: p.ID, name: name, kg0: s.kgStart, ids: s.aliasIDs(name, p.ID)}
		curs = append(curs, &canonicalCursor{idx: i, kind: p.Kind, ttl: p.TTL, sc: s.newScan(b, nil, true)})
	}
	defer func() {
		for _, c := range curs {
			c.sc.close()
		}
	}()
	cw, err := checkpoint.NewCanonicalWriter(w, *meta)
	if err != nil {
		return nil, err
	}
	var (
		e  checkpoint.CanonicalEntry
		lb [][]byte
	)
	for n := 0; ; {
		// The smallest key group at the head of any scan; then every state's keys of it.
		cur := -1
		for _, c := range curs {
			k, err := c.head()
			if err != nil {
				return nil, err
			}
			if k != nil && (cur < 0 || int(binary.BigEndian.Uint16(k)) < cur) {
				cur = int(binary.BigEndian.Uint16(k))
			}
		}
		if cur < 0 {
			break
		}
		for _, c := range curs {
			for {
				ck, err := c.head()
				if err != nil {
					return nil, err
				}
				if ck == nil || int(binary.BigEndian.Uint16(ck)) != cur {
					break
				}
				c.i++
				if n++; n&1023 == 0 {
					if err := ctx.Err(); err != nil {
						return nil, err
					}
				}
				if lb, err = s.canonicalKey(cw, &e, c, ck, lb); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := s.canonicalTimers(ctx, cw, svc); err != nil {
		return nil, err
	}
	if _, err := cw.Close(); err != nil {
		return nil, err
	}
	return meta, nil
}

// splitCompositeKey returns the key group, key and namespace of composite key ck.
func splitCompositeKey(ck []byte) (kg uint16, key, ns []byte, err error) {
	if len(ck) >= 5 {
		n, m := binary.Uvarint(ck[4:])
		if m > 0 && n <= uint64(len(ck)-4-m) {
			return binary.BigEndian.Uint16(ck), ck[4+m : 4+m+int(n)], ck[4+m+int(n):], nil
		}
	}
	return 0, nil, nil, fmt.Errorf("%w: malformed composite key %x", ErrCorruption, ck)
}

// canonicalKey writes the state of composite key ck of cursor c's state: one entry (a value
// or a list), or one per live map entry; nothing when the key has no state any more.
func (s *Store) canonicalKey(cw *checkpoint.CanonicalWriter, e *checkpoint.CanonicalEntry, c *canonicalCursor, ck []byte, lb [][]byte) ([][]byte, error) {
	kg, key, ns, err := splitCompositeKey(ck)
	if err != nil {
		return lb, err
	}
	h, _, _ := base.HashCompositeKey(ck)
	*e = checkpoint.CanonicalEntry{KeyGroup: kg, State: c.idx, Key: key, Namespace: ns, Elements: e.Elements[:0], ElementTTLs: e.ElementTTLs[:0]}
	split := func(v []byte) (int64, []byte, error) {
		if !c.ttl {
			return 0, v, nil
		}
		ts, ok := base.TS(v)
		if !ok {
			return 0, nil, fmt.Errorf("%w: a TTL value of %d bytes has no timestamp", ErrCorruption, len(v))
		}
		return ts, v[base.TSLen:], nil
	}
	switch c.kind {
	case kindList:
		var st status
		lb, st, _ = s.e.ListGet(h, ck, lb[:0], nil)
		if st == failed {
			return lb, s.e.TakeErr()
		}
		if st != found {
			return lb, nil
		}
		for _, bt := range lb {
			for len(bt) > 0 {
				n, m := binary.Uvarint(bt)
				if m <= 0 || n > uint64(len(bt)-m) {
					return lb, fmt.Errorf("%w: list batch with bad element framing", ErrCorruption)
				}
				ts, el, err := split(bt[m : m+int(n)])
				if err != nil {
					return lb, err
				}
				e.Elements = append(e.Elements, el)
				if c.ttl {
					e.ElementTTLs = append(e.ElementTTLs, ts)
				}
				bt = bt[m+int(n):]
			}
		}
		clear(lb)
		if len(e.Elements) == 0 {
			return lb, nil
		}
		return lb, cw.Add(e)
	case kindMap:
		it := s.e.MapIter(h, ck)
		defer it.Close()
		for it.Next() {
			ts, v, err := split(it.Value())
			if err != nil {
				return lb, err
			}
			e.UserKey, e.Value, e.TTL = it.UserKey(), v, ts
			if err := cw.Add(e); err != nil {
				return lb, err
			}
		}
		return lb, it.Err()
	default:
		raw, st := s.e.Get(h, ck)
		if st == failed {
			return lb, s.e.TakeErr()
		}
		if st != found {
			return lb, nil
		}
		ts, v, err := split(raw)
		if err != nil {
			return lb, err
		}
		e.Value, e.TTL = v, ts
		return lb, cw.Add(e)
	}
}

// canonicalTimers writes the Store's timers, key group by key group (svc: the meta index of
// each timer service).
func (s *Store) canonicalTimers(ctx context.Context, cw *checkpoint.CanonicalWriter, svc map[string]int) error {
	return s.e.CanonicalTimers(ctx, func(service string, d engine.TimerDomain, t engine.Timer) error {
		i, ok := svc[service]
		if !ok {
			return fmt.Errorf("%w: timers of service %q, which the registry does not name", ErrCorruption, service)
		}
		return cw.AddTimer(&checkpoint.CanonicalTimer{KeyGroup: uint16(t.KeyGroup), Service: i, Domain: uint8(d),
			KeyHash: t.KeyHash, Timestamp: t.Timestamp, Key: t.Key, Namespace: t.Namespace})
	})
}
