package strata

import (
	"context"
	"slices"
	"time"

	"github.com/strata-db/strata/checkpoint"
)

// CheckpointInfo describes a stored checkpoint or native savepoint without restoring it: what
// the offline reader (cmd/strata-state) lists, in the spirit of Flink's State Processor API.
type CheckpointInfo struct {
	// Handle is what Restore needs (as LoadCheckpoint returns it).
	Handle CheckpointHandle
	// Parent is the checkpoint it is incremental on, 0 for none (a native savepoint has none).
	// Epoch is its writer epoch; LastSeq the Store's last sequence number at the cut.
	Parent, Epoch, LastSeq uint64
	// Created is when the checkpoint was cut (millisecond precision).
	Created time.Time
	// States are the keyed states and timer services of its state registry, sorted by name.
	States []StateInfo
	// OperatorStateBytes is the size of its operator and broadcast state blob.
	OperatorStateBytes int
	// Objects are the objects its manifest names, in the manifest's order: kind, size, key-group
	// range and CRC32C of each.
	Objects []checkpoint.Object
}

// StateInfo is one registered state of a checkpoint.
type StateInfo struct {
	// Name is the state's name; Kind "value", "list", "map", "reducing", "aggregating" or
	// "timer service".
	Name, Kind string
	// ID is its state id in the checkpoint's Store (the first bytes of its keys' composite keys).
	ID uint16
	// Codecs are the type names of the codecs the state was registered with (package path and
	// type name, "" for none), in the registry's order.
	Codecs [2]string
	// TTL says whether its values carry TTL timestamps.
	TTL bool
}

// InspectCheckpoint reads the manifest of checkpoint id of owner in storage (a checkpoint or a
// native savepoint) and decodes its state registry, without reading any object: pair it with
// checkpoint.Verify to check every object. Errors: checkpoint.ErrNotFound, ErrCorruption (a
// damaged manifest or registry), the storage's.
func InspectCheckpoint(ctx context.Context, storage checkpoint.Storage, owner string, id uint64) (CheckpointInfo, error) {
	m, err := checkpoint.ReadManifest(ctx, storage, owner, id)
	if err != nil {
		return CheckpointInfo{}, err
	}
	info := CheckpointInfo{
		Handle: CheckpointHandle{Owner: owner, ID: m.ID, MaxParallelism: int(m.MaxParallelism),
			KeyGroups:     m.KeyGroups,
			InputPosition: m.InputPosition},
		Parent: m.Parent, Epoch: m.Epoch, LastSeq: m.LastSeq, Created: time.UnixMilli(m.CreatedUnixMilli),
		OperatorStateBytes: len(m.OperatorState), Objects: m.Objects,
	}
	if len(m.Registry) > 0 {
		r, _, err := decodeRegistry(m.Registry)
		if err != nil {
			return CheckpointInfo{}, err
		}
		for name, p := range r.States {
			info.States = append(info.States, StateInfo{Name: name, Kind: p.Kind.String(), ID: p.ID, Codecs: p.Codecs, TTL: p.TTL})
		}
		slices.SortFunc(info.States, func(a, b StateInfo) int {
			if a.Name < b.Name {
				return -1
			}
			if a.Name > b.Name {
				return 1
			}
			return 0
		})
	}
	return info, nil
}
