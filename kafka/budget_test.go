package kafka

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	strata "github.com/strata-db/strata"
)

// Beyond the budget: each record also keeps padValue bytes of state under its key and its
// record number (a namespace), so a partition's state grows past the Store's memory budget.
const (
	padBudget = 6 << 20 // MemoryBudget: MinMemoryBudget of 4 MiB segments, and a little
	padValue  = 8 << 10
)

// padOf is record i's pad: i, then a byte pattern of i.
func padOf(i int64) []byte {
	v := bytes.Repeat([]byte{byte(i * 7)}, padValue)
	binary.BigEndian.PutUint64(v, uint64(i))
	return v
}

// TestBeyondStateBudget: the kill of TestKillMidStream with each partition's state twice
// its Store's memory budget (6000 records of 8 KiB over 4 partitions: 12 MiB of pads
// per partition, budget 6 MiB), so most of it lives in LSM files: the checkpoints carry them
// and the new owners restore them. Each record reads back the pad of the record 160 earlier
// (the same key, so the same partition) and checks its bytes: a pad lost to the eviction, a
// checkpoint or a restore fails the runner. The committed output equals the model's.
func TestBeyondStateBudget(t *testing.T) {
	e := newEnv(t, testParts)
	var lsmBytes atomic.Int64 // the largest LSM size a Store reported
	e.edit = func(c *Config) {
		c.StoreOptions.MemoryBudget = padBudget
		setup, process, onTimer := c.Setup, c.Process, c.OnTimer
		type states struct {
			*testStates
			pad *strata.ValueState[[]byte]
		}
		c.Setup = func(s *strata.Store) (any, error) {
			st, err := setup(s)
			if err != nil {
				return nil, err
			}
			pad, err := strata.NewValueState(s, strata.ValueDescriptor[[]byte]{Name: "pad", Codec: strata.Bytes})
			return &states{st.(*testStates), pad}, err
		}
		c.Process = func(x *Context, key, value []byte, ts int64) error {
			st := x.State.(*states)
			i, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil {
				return err
			}
			if err := st.pad.Put(x.Key.In(binary.BigEndian.AppendUint64(nil, uint64(i))), padOf(i)); err != nil {
				return err
			}
			if j := i - 4*testKeys; j >= 0 {
				v, ok, err := st.pad.Get(x.Key.In(binary.BigEndian.AppendUint64(nil, uint64(j))))
				if err != nil {
					return err
				}
				if !ok || !bytes.Equal(v, padOf(j)) {
					return fmt.Errorf("record %d: the pad of record %d is lost or wrong (found %v, %d bytes)", i, j, ok, len(v))
				}
			}
			if i%256 == 0 {
				if b := x.Store.Stats().LSM.Bytes; b > lsmBytes.Load() {
					lsmBytes.Store(b)
				}
			}
			x.State = st.testStates
			return process(x, key, value, ts)
		}
		c.OnTimer = func(x *Context, t strata.Timer[[]byte], ev bool) error {
			if st, ok := x.State.(*states); ok { // the Context of a partition's timers is reused
				x.State = st.testStates
			}
			return onTimer(x, t, ev)
		}
	}
	got, want, _ := e.killOne(6000)
	diff(t, got, want)
	if lsmBytes.Load() < padBudget {
		t.Errorf("a Store's LSM files held %d bytes at most, want more than the budget (%d): the state did not go beyond it", lsmBytes.Load(), padBudget)
	}
	t.Logf("the largest LSM seen: %d MiB (budget %d MiB)", lsmBytes.Load()>>20, padBudget>>20)
}
