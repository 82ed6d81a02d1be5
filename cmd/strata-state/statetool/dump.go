package statetool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// metaLine is the first line of a dump and of write's input (package doc).
type metaLine struct {
	MaxParallelism int             `json:"maxParallelism"`
	KeyGroups      *[2]int         `json:"keyGroups,omitempty"`
	States         []stateLine     `json:"states"`
	InputPosition  json.RawMessage `json:"inputPosition,omitempty"`
	OperatorState  json.RawMessage `json:"operatorState,omitempty"`
}

// stateLine is one state of a metaLine.
type stateLine struct {
	Name   string    `json:"name"`
	Kind   string    `json:"kind"`
	TTL    bool      `json:"ttl,omitempty"`
	Codecs [2]string `json:"codecs"`
}

// raw returns v encoded as JSON.
func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// ErrNoState is Dump's error when its state names no state or timer service of the
// checkpoint (exit status 1): a misspelt -state would otherwise print no entry and pass.
var ErrNoState = errors.New("no such state or timer service")

// Dump prints the meta, logical entries and timers of key groups kgs of checkpoint id of
// owner in st (one state's or timer service's if state is not empty) as JSON lines to w
// (package doc). A canonical savepoint is read block by block; any other checkpoint or
// savepoint is restored into a temporary directory and written as a canonical savepoint there
// first. Errors: ErrNoState, checkpoint.ErrNotFound, ErrCorruption naming the object
// (strata's), the storage's, w's.
func Dump(ctx context.Context, st checkpoint.Storage, owner string, id uint64, kgs checkpoint.KeyGroupRange, state string, w io.Writer) error {
	m, err := checkpoint.ReadManifest(ctx, st, owner, id)
	if err != nil {
		return err
	}
	var canon []checkpoint.Object
	for _, o := range m.Objects {
		if o.Kind == checkpoint.KindCanonical {
			canon = append(canon, o)
		}
	}
	if len(canon) == 0 {
		// Not canonical: the engine restores it and writes it as a canonical savepoint.
		tmp, err := os.MkdirTemp("", "strata-state-dump-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		h, err := strata.LoadCheckpoint(ctx, st, owner, id)
		if err != nil {
			return err
		}
		kg := h.KeyGroups
		s, err := strata.Restore(filepath.Join(tmp, "store"), strata.Options{MaxParallelism: h.MaxParallelism, KeyGroups: &kg,
			Checkpoint: strata.CheckpointOptions{Owner: "strata-state-dump"}}, st, h)
		if err != nil {
			return err
		}
		defer s.Discard()
		sp, err := checkpoint.NewDirStorage(filepath.Join(tmp, "savepoint"))
		if err != nil {
			return err
		}
		hs, err := s.Savepoint(ctx, sp, strata.SavepointCanonical, id, h.InputPosition)
		if err != nil {
			return err
		}
		return Dump(ctx, sp, hs.Owner, hs.ID, kgs, state, w)
	}
	readers := make([]*checkpoint.CanonicalReader, len(canon))
	ml := metaLine{MaxParallelism: int(m.MaxParallelism), InputPosition: raw(text(m.InputPosition)), OperatorState: raw(text(m.OperatorState))}
	lo, hi := max(kgs.Start, m.KeyGroups.Start), min(kgs.End, m.KeyGroups.End)
	if lo > hi {
		lo, hi = m.KeyGroups.Start, m.KeyGroups.End
	}
	ml.KeyGroups = &[2]int{int(lo), int(hi)}
	seen := map[string]bool{}
	for i, o := range canon {
		if readers[i], err = checkpoint.ReadCanonical(ctx, st, o.Name, o.Size); err != nil {
			return err
		}
		for _, s := range readers[i].Meta().States {
			if !seen[s.Name] {
				seen[s.Name] = true
				ml.States = append(ml.States, stateLine{Name: s.Name, Kind: s.Kind.String(), TTL: s.TTL, Codecs: s.Codecs})
			}
		}
	}
	if state != "" && !seen[state] {
		names := make([]string, len(ml.States))
		for i, s := range ml.States {
			names[i] = s.Name
		}
		return fmt.Errorf("%w: %q (checkpoint %d of %q has %q)", ErrNoState, state, id, owner, names)
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(map[string]any{"meta": ml}); err != nil {
		return err
	}
	for _, r := range readers {
		states := r.Meta().States
		err = r.Scan(kgs, func(e *checkpoint.CanonicalEntry) error {
			s := states[e.State]
			if state != "" && s.Name != state {
				return nil
			}
			line := map[string]any{"kg": e.KeyGroup, "state": s.Name, "kind": s.Kind.String(), "key": text(e.Key)}
			if len(e.Namespace) > 0 {
				line["namespace"] = text(e.Namespace)
			}
			switch s.Kind {
			case checkpoint.StateList:
				els := make([]any, len(e.Elements))
				for i, el := range e.Elements {
					els[i] = decodeValue(s.Codecs[0], el)
				}
				line["elements"] = els
				if s.TTL {
					line["elementTTLs"] = e.ElementTTLs
				}
			case checkpoint.StateMap:
				line["userKey"] = decodeValue(s.Codecs[0], e.UserKey)
				line["value"] = decodeValue(s.Codecs[1], e.Value)
				if s.TTL {
					line["ttl"] = e.TTL
				}
			default:
				line["value"] = decodeValue(s.Codecs[0], e.Value)
				if s.TTL {
					line["ttl"] = e.TTL
				}
			}
			return enc.Encode(line)
		}, func(t *checkpoint.CanonicalTimer) error {
			s := states[t.Service]
			if state != "" && s.Name != state {
				return nil
			}
			line := map[string]any{"kg": t.KeyGroup, "timer": s.Name, "domain": domains[t.Domain],
				"timestamp": t.Timestamp, "keyHash": t.KeyHash, "key": text(t.Key)}
			if len(t.Namespace) > 0 {
				line["namespace"] = text(t.Namespace)
			}
			return enc.Encode(line)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// domains are the names of the time domains (package timer's Domain values).
var domains = [2]string{"event", "processing"}
