package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"unicode"
	"unicode/utf8"

	"github.com/strata-db/strata"
	"github.com/strata-db/strata/checkpoint"
)

// dump prints the logical entries and timers of key groups kgs of checkpoint id of owner (one
// state's if state is not empty) as JSON lines (package doc).
func dump(ctx context.Context, st checkpoint.Storage, owner string, id uint64, kgs checkpoint.KeyGroupRange, state string, w io.Writer) error {
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
		hs, err := s.Savepoint(ctx, sp, strata.SavepointCanonical, id, nil)
		if err != nil {
			return err
		}
		return dump(ctx, sp, hs.Owner, hs.ID, kgs, state, w)
	}
	enc := json.NewEncoder(w)
	for _, o := range canon {
		r, err := checkpoint.ReadCanonical(ctx, st, o.Name, o.Size)
		if err != nil {
			return err
		}
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
					els[i] = text(el)
				}
				line["elements"] = els
				if s.TTL {
					line["elementTTLs"] = e.ElementTTLs
				}
			case checkpoint.StateMap:
				line["userKey"] = text(e.UserKey)
				fallthrough
			default:
				line["value"] = text(e.Value)
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
			line := map[string]any{"kg": t.KeyGroup, "timer": s.Name, "domain": [2]string{"event", "processing"}[t.Domain],
				"timestamp": t.Timestamp, "key": text(t.Key)}
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

// text returns b as a string when it is valid UTF-8 without control characters, else as
// {"base64": …} (encoding/json encodes a []byte as base64).
func text(b []byte) any {
	if utf8.Valid(b) {
		ok := true
		for _, r := range string(b) {
			if unicode.IsControl(r) {
				ok = false
				break
			}
		}
		if ok {
			return string(b)
		}
	}
	return map[string][]byte{"base64": b}
}
