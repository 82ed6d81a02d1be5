package statetool

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
	"github.com/zeebo/xxh3"
)

// ErrBadLine is the cause of every LineError.
var ErrBadLine = errors.New("strata-state: bad input line")

// LineError is a line of write's input that is not a valid meta, entry or timer line: its
// number (from 1) and what is wrong with it. errors.Is(err, ErrBadLine) holds, and so does
// errors.Is for the cause (checkpoint.ErrInvalidEntry where the canonical writer refused it).
type LineError struct {
	Line int
	Err  error
}

// Error returns "line N: cause".
func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// Unwrap returns ErrBadLine and the cause.
func (e *LineError) Unwrap() []error { return []error{ErrBadLine, e.Err} }

// inputLine is one line of write's input: a meta line, an entry or a timer (package doc).
type inputLine struct {
	Meta        *metaLine         `json:"meta"`
	KG          *int              `json:"kg"`
	State       string            `json:"state"`
	Kind        string            `json:"kind"`
	Key         json.RawMessage   `json:"key"`
	Namespace   json.RawMessage   `json:"namespace"`
	UserKey     json.RawMessage   `json:"userKey"`
	Value       json.RawMessage   `json:"value"`
	Elements    []json.RawMessage `json:"elements"`
	TTL         *int64            `json:"ttl"`
	ElementTTLs []int64           `json:"elementTTLs"`
	Timer       string            `json:"timer"`
	Domain      string            `json:"domain"`
	Timestamp   *int64            `json:"timestamp"`
	KeyHash     *int32            `json:"keyHash"`
}

// pendingEntry and pendingTimer are parsed lines waiting for the sort by key group.
type pendingEntry struct {
	line int
	e    checkpoint.CanonicalEntry
}

type pendingTimer struct {
	line int
	t    checkpoint.CanonicalTimer
}

// Write reads JSON lines of the shape Dump prints from r (package doc, "Write") and writes
// them as canonical savepoint id of owner in st (strata.WriteCanonicalSavepoint). The entries
// and timers are held in memory and sorted by key group (then state, key, namespace and user
// key), so the input may come in any order; two lines for the same entry or timer are an
// error. Errors: *LineError for a bad line (JSON, a field a state's kind does not have or
// lacks, an unknown state, a key group outside the meta's or not the key hash's, a value its
// codec cannot take, a duplicate); those of strata.WriteCanonicalSavepoint (checkpoint.ErrExists
// for an id already committed); r's.
func Write(ctx context.Context, r io.Reader, st checkpoint.Storage, owner string, id uint64) (strata.CheckpointHandle, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var (
		meta     *checkpoint.CanonicalMeta
		byName   map[string]int
		entries  []pendingEntry
		timers   []pendingTimer
		metaLine int
	)
	for n := 1; ; n++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return strata.CheckpointHandle{}, err
		}
		if len(bytes.TrimSpace(b)) > 0 {
			var l inputLine
			d := json.NewDecoder(bytes.NewReader(b))
			d.DisallowUnknownFields()
			d.UseNumber()
			if derr := d.Decode(&l); derr != nil {
				return strata.CheckpointHandle{}, &LineError{n, derr}
			}
			if d.More() {
				return strata.CheckpointHandle{}, &LineError{n, errors.New("more than one JSON value on the line")}
			}
			switch {
			case l.Meta != nil:
				if meta != nil {
					return strata.CheckpointHandle{}, &LineError{n, fmt.Errorf("a second meta line (the first is line %d)", metaLine)}
				}
				m, perr := parseMeta(l.Meta)
				if perr != nil {
					return strata.CheckpointHandle{}, &LineError{n, perr}
				}
				meta, metaLine, byName = m, n, map[string]int{}
				for i, s := range m.States {
					byName[s.Name] = i
				}
			case meta == nil:
				return strata.CheckpointHandle{}, &LineError{n, errors.New("the first line must be the meta line ({\"meta\": …}, as dump prints it)")}
			case l.Timer != "":
				t, perr := parseTimer(&l, meta, byName)
				if perr != nil {
					return strata.CheckpointHandle{}, &LineError{n, perr}
				}
				timers = append(timers, pendingTimer{n, t})
			default:
				e, perr := parseEntry(&l, meta, byName)
				if perr != nil {
					return strata.CheckpointHandle{}, &LineError{n, perr}
				}
				entries = append(entries, pendingEntry{n, e})
			}
		}
		if err == io.EOF {
			break
		}
	}
	if meta == nil {
		return strata.CheckpointHandle{}, &LineError{1, errors.New("no meta line: the input is empty")}
	}
	slices.SortStableFunc(entries, func(a, b pendingEntry) int { return compareEntries(&a.e, &b.e) })
	for i := 1; i < len(entries); i++ {
		if compareEntries(&entries[i-1].e, &entries[i].e) == 0 {
			a, b := entries[i-1].line, entries[i].line
			return strata.CheckpointHandle{}, &LineError{max(a, b), fmt.Errorf("the same entry as line %d", min(a, b))}
		}
	}
	slices.SortStableFunc(timers, func(a, b pendingTimer) int { return compareTimers(&a.t, &b.t) })
	for i := 1; i < len(timers); i++ {
		if compareTimers(&timers[i-1].t, &timers[i].t) == 0 {
			a, b := timers[i-1].line, timers[i].line
			return strata.CheckpointHandle{}, &LineError{max(a, b), fmt.Errorf("the same timer as line %d", min(a, b))}
		}
	}
	return strata.WriteCanonicalSavepoint(ctx, st, owner, id, *meta, func(cw *checkpoint.CanonicalWriter) error {
		for i := range entries {
			if err := cw.Add(&entries[i].e); err != nil {
				return &LineError{entries[i].line, err}
			}
			if i&1023 == 1023 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		for i := range timers {
			if err := cw.AddTimer(&timers[i].t); err != nil {
				return &LineError{timers[i].line, err}
			}
		}
		return nil
	})
}

// compareEntries orders entries by key group, state, key, namespace and user key.
func compareEntries(a, b *checkpoint.CanonicalEntry) int {
	return cmp.Or(cmp.Compare(a.KeyGroup, b.KeyGroup), cmp.Compare(a.State, b.State), bytes.Compare(a.Key, b.Key),
		bytes.Compare(a.Namespace, b.Namespace), bytes.Compare(a.UserKey, b.UserKey))
}

// compareTimers orders timers by key group, service, domain, timestamp, key and namespace.
func compareTimers(a, b *checkpoint.CanonicalTimer) int {
	return cmp.Or(cmp.Compare(a.KeyGroup, b.KeyGroup), cmp.Compare(a.Service, b.Service), cmp.Compare(a.Domain, b.Domain),
		cmp.Compare(a.Timestamp, b.Timestamp), bytes.Compare(a.Key, b.Key), bytes.Compare(a.Namespace, b.Namespace))
}

// parseMeta returns the canonical meta of a meta line, checked by the canonical writer's rules.
func parseMeta(l *metaLine) (*checkpoint.CanonicalMeta, error) {
	m := &checkpoint.CanonicalMeta{MaxParallelism: l.MaxParallelism}
	if l.MaxParallelism < 1 || l.MaxParallelism > 32768 {
		return nil, fmt.Errorf("%w: maxParallelism %d outside 1..32768", checkpoint.ErrInvalidEntry, l.MaxParallelism)
	}
	m.KeyGroups = checkpoint.KeyGroupRange{Start: 0, End: l.MaxParallelism - 1}
	if kg := l.KeyGroups; kg != nil {
		if kg[0] < 0 || kg[0] > kg[1] || kg[1] >= l.MaxParallelism {
			return nil, fmt.Errorf("%w: keyGroups %v outside 0..%d", checkpoint.ErrInvalidEntry, *kg, l.MaxParallelism-1)
		}
		m.KeyGroups = checkpoint.KeyGroupRange{Start: kg[0], End: kg[1]}
	}
	for _, s := range l.States {
		k, ok := kindOf(s.Kind)
		if !ok {
			return nil, fmt.Errorf("%w: state %q of the unknown kind %q", checkpoint.ErrInvalidEntry, s.Name, s.Kind)
		}
		cs := checkpoint.CanonicalState{Name: s.Name, Kind: k, TTL: s.TTL, Codecs: s.Codecs}
		for i, c := range cs.Codecs {
			if id, ok := shortCodecs[c]; ok {
				cs.Codecs[i] = id
			}
		}
		m.States = append(m.States, cs)
	}
	var err error
	if m.InputPosition, err = parseBytes(l.InputPosition); err != nil {
		return nil, fmt.Errorf("inputPosition: %w", err)
	}
	if m.OperatorState, err = parseBytes(l.OperatorState); err != nil {
		return nil, fmt.Errorf("operatorState: %w", err)
	}
	if _, err := checkpoint.NewCanonicalWriter(io.Discard, *m); err != nil {
		return nil, err
	}
	return m, nil
}

// kindOf returns the state kind named s (StateKind.String).
func kindOf(s string) (checkpoint.StateKind, bool) {
	for k := checkpoint.StateValue; k <= checkpoint.StateTimerService; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return 0, false
}

// keyGroupOf returns the key group and key hash of a line: the key hash given or the one
// strata.Store.Key computes (low 32 bits of xxh3), its key group by AssignToKeyGroup, which a
// given key group must equal when the key hash is given too or strict (a timer: its restore
// checks one against the other); an entry's key group given without a key hash is taken as it
// is (the host may assign keys with its own hash, Store.KeyWithHash).
func keyGroupOf(l *inputLine, key []byte, meta *checkpoint.CanonicalMeta, strict bool) (uint16, int32, error) {
	hash := int32(uint32(xxh3.Hash(key)))
	if l.KeyHash != nil {
		hash = *l.KeyHash
	}
	kg := strata.AssignToKeyGroup(hash, meta.MaxParallelism)
	if l.KG != nil {
		if (l.KeyHash != nil || strict) && *l.KG != kg {
			return 0, 0, fmt.Errorf("kg %d, but keyHash %d is in key group %d", *l.KG, hash, kg)
		}
		kg = *l.KG
	}
	if kg < int(meta.KeyGroups.Start) || kg > int(meta.KeyGroups.End) {
		return 0, 0, fmt.Errorf("%w: key group %d outside the meta's %v", checkpoint.ErrInvalidEntry, kg, meta.KeyGroups)
	}
	return uint16(kg), hash, nil
}

// parseEntry returns the entry of line l.
func parseEntry(l *inputLine, meta *checkpoint.CanonicalMeta, byName map[string]int) (checkpoint.CanonicalEntry, error) {
	var e checkpoint.CanonicalEntry
	i, ok := byName[l.State]
	if !ok {
		return e, fmt.Errorf("state %q: the meta line does not name it", l.State)
	}
	st := meta.States[i]
	if st.Kind == checkpoint.StateTimerService {
		return e, fmt.Errorf("state %q is a timer service: give timers as {\"timer\": …}", l.State)
	}
	if l.Kind != "" && l.Kind != st.Kind.String() {
		return e, fmt.Errorf("state %q: kind %q, the meta says %q", l.State, l.Kind, st.Kind)
	}
	if l.Domain != "" || l.Timestamp != nil {
		return e, errors.New("domain or timestamp on an entry (a timer line names its \"timer\")")
	}
	if l.Key == nil {
		return e, errors.New("no key")
	}
	var err error
	if e.Key, err = parseBytes(l.Key); err != nil {
		return e, fmt.Errorf("key: %w", err)
	}
	if e.Namespace, err = parseBytes(l.Namespace); err != nil {
		return e, fmt.Errorf("namespace: %w", err)
	}
	e.State = i
	if e.KeyGroup, _, err = keyGroupOf(l, e.Key, meta, false); err != nil {
		return e, err
	}
	isList, isMap := st.Kind == checkpoint.StateList, st.Kind == checkpoint.StateMap
	switch {
	case isList && (l.Value != nil || l.UserKey != nil || l.TTL != nil):
		return e, fmt.Errorf("state %q is a list: elements and elementTTLs only", st.Name)
	case !isList && (l.Elements != nil || l.ElementTTLs != nil):
		return e, fmt.Errorf("state %q is a %v: no elements", st.Name, st.Kind)
	case !isMap && l.UserKey != nil:
		return e, fmt.Errorf("state %q is a %v: no userKey", st.Name, st.Kind)
	case !st.TTL && (l.TTL != nil || l.ElementTTLs != nil):
		return e, fmt.Errorf("state %q has no TTL: no ttl or elementTTLs", st.Name)
	}
	if isList {
		if len(l.Elements) == 0 {
			return e, fmt.Errorf("state %q: a list needs elements (an empty list is no state)", st.Name)
		}
		if st.TTL && len(l.ElementTTLs) != len(l.Elements) {
			return e, fmt.Errorf("state %q has TTL: %d elements with %d elementTTLs", st.Name, len(l.Elements), len(l.ElementTTLs))
		}
		for j, m := range l.Elements {
			el, err := encodeValue(st.Codecs[0], m)
			if err != nil {
				return e, fmt.Errorf("element %d: %w", j, err)
			}
			e.Elements = append(e.Elements, el)
		}
		e.ElementTTLs = l.ElementTTLs
		return e, nil
	}
	vc := st.Codecs[0]
	if isMap {
		if l.UserKey == nil {
			return e, fmt.Errorf("state %q is a map: an entry needs a userKey", st.Name)
		}
		if e.UserKey, err = encodeValue(st.Codecs[0], l.UserKey); err != nil {
			return e, fmt.Errorf("userKey: %w", err)
		}
		vc = st.Codecs[1]
	}
	if st.TTL {
		if l.TTL == nil {
			return e, fmt.Errorf("state %q has TTL: an entry needs its ttl (last access, ms)", st.Name)
		}
		e.TTL = *l.TTL
	}
	if e.Value, err = encodeValue(vc, l.Value); err != nil {
		return e, fmt.Errorf("value: %w", err)
	}
	return e, nil
}

// parseTimer returns the timer of line l.
func parseTimer(l *inputLine, meta *checkpoint.CanonicalMeta, byName map[string]int) (checkpoint.CanonicalTimer, error) {
	var t checkpoint.CanonicalTimer
	i, ok := byName[l.Timer]
	if !ok || meta.States[i].Kind != checkpoint.StateTimerService {
		return t, fmt.Errorf("timer service %q: the meta line does not name it as one", l.Timer)
	}
	if l.State != "" || l.Value != nil || l.Elements != nil || l.UserKey != nil || l.TTL != nil || l.ElementTTLs != nil {
		return t, errors.New("a timer line has kg, timer, domain, timestamp, keyHash, key and namespace only")
	}
	switch l.Domain {
	case domains[0]:
	case domains[1]:
		t.Domain = 1
	default:
		return t, fmt.Errorf("domain %q: want %q or %q", l.Domain, domains[0], domains[1])
	}
	if l.Timestamp == nil {
		return t, errors.New("a timer needs its timestamp (ms)")
	}
	if l.Key == nil {
		return t, errors.New("no key")
	}
	var err error
	if t.Key, err = parseBytes(l.Key); err != nil {
		return t, fmt.Errorf("key: %w", err)
	}
	if t.Namespace, err = parseBytes(l.Namespace); err != nil {
		return t, fmt.Errorf("namespace: %w", err)
	}
	t.Service, t.Timestamp = i, *l.Timestamp
	t.KeyGroup, t.KeyHash, err = keyGroupOf(l, t.Key, meta, true)
	return t, err
}
