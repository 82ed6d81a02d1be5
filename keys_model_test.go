package strata

import (
	"fmt"
	"maps"
	"slices"
)

// The model steps of the backend-level key operations (keys.go): stepKeys compares Keys,
// KeysAndNamespaces and NumEntries of every state with the model; stepApplyKeys runs
// ApplyToAllKeys over one state and namespace, clearing or rewriting visited keys in the
// Store and the model alike.

// all returns the model's states in the model's order (stateSlots' index).
func (st *modelStates) all() []State { return []State{st.val, st.lst, st.mp, st.red, st.agg} }

// stateSlots returns the slots that have state in state i of modelStates.all, with their
// number of entries as NumEntries counts them (a map's entries; 1 otherwise).
func (m *model) stateSlots(i int) map[int32]int64 {
	out := map[int32]int64{}
	switch i {
	case 0:
		for s := range m.val {
			out[s] = 1
		}
	case 1:
		for s := range m.lst {
			out[s] = 1
		}
	case 2:
		for s, mp := range m.mp {
			out[s] = int64(len(mp))
		}
	case 3:
		for s := range m.red {
			out[s] = 1
		}
	case 4:
		for s := range m.agg {
			out[s] = 1
		}
	}
	return out
}

// slotOf returns the slot of a scanned Key (its bytes and namespace), or false for a key the
// universe does not have.
func (r *modelRun) slotOf(k Key) (int32, bool) {
	u := r.w.u
	ki := slices.Index(u.keys, string(k.Bytes()))
	ni := slices.Index(u.nss, string(k.Namespace()))
	if ki < 0 || ni < 0 {
		return 0, false
	}
	return int32(ki*len(u.nss) + ni), true
}

// scanSlots collects the slots of a Keys or KeysAndNamespaces sequence, failing on a key
// outside the universe, a key yielded twice, a namespace other than ns (unless any) and a key
// group other than the one Store.Key assigns.
func (r *modelRun) scanSlots(what string, seq func(func(Key) bool), errf func() error, ns string, any bool) (map[int32]bool, error) {
	got := map[int32]bool{}
	var bad error
	seq(func(k Key) bool {
		sl, ok := r.slotOf(k)
		switch {
		case !ok:
			bad = fmt.Errorf("%w: %s: key %q in namespace %q is not the model's", errMismatch, what, k.Bytes(), k.Namespace())
		case got[sl]:
			bad = fmt.Errorf("%w: %s: slot %d (%q/%q) yielded twice", errMismatch, what, sl, k.Bytes(), k.Namespace())
		case !any && string(k.Namespace()) != ns:
			bad = fmt.Errorf("%w: %s: key %q in namespace %q", errMismatch, what, k.Bytes(), k.Namespace())
		case k.KeyGroup() != r.st.s.Key(k.Bytes()).KeyGroup():
			bad = fmt.Errorf("%w: %s: key %q of key group %d, Store.Key says %d", errMismatch, what, k.Bytes(),
				k.KeyGroup(), r.st.s.Key(k.Bytes()).KeyGroup())
		}
		got[sl] = true
		return bad == nil
	})
	if bad != nil {
		return nil, bad
	}
	if err := errf(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return got, nil
}

// keys compares the key operations of every state with the model: Keys in the namespace of
// slot, KeysAndNamespaces and NumEntries. They only read: values handed out before stay valid.
func (r *modelRun) keys(slot int32) error {
	_, ns := r.w.u.kn(slot)
	for i, st := range r.st.all() {
		want := r.m.stateSlots(i)
		inNS := map[int32]bool{}
		all := map[int32]bool{}
		var entries int64
		for sl, n := range want {
			all[sl] = true
			entries += n
			if _, sns := r.w.u.kn(sl); sns == ns {
				inNS[sl] = true
			}
		}
		seq, errf := r.st.s.Keys(st, []byte(ns))
		got, err := r.scanSlots(fmt.Sprintf("Keys(%s, %q)", st.Name(), ns), seq, errf, ns, false)
		if err != nil {
			return err
		}
		if !maps.Equal(got, inNS) {
			return fmt.Errorf("%w: Keys(%s, %q): slots %v, model %v", errMismatch, st.Name(), ns, slices.Sorted(maps.Keys(got)),
				slices.Sorted(maps.Keys(inNS)))
		}
		seq, errf = r.st.s.KeysAndNamespaces(st)
		if got, err = r.scanSlots(fmt.Sprintf("KeysAndNamespaces(%s)", st.Name()), seq, errf, "", true); err != nil {
			return err
		}
		if !maps.Equal(got, all) {
			return fmt.Errorf("%w: KeysAndNamespaces(%s): slots %v, model %v", errMismatch, st.Name(),
				slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(all)))
		}
		n, err := r.st.s.NumEntries(st)
		if err != nil {
			return fmt.Errorf("NumEntries(%s): %w", st.Name(), err)
		}
		if n != entries {
			return fmt.Errorf("%w: NumEntries(%s) = %d, model %d", errMismatch, st.Name(), n, entries)
		}
	}
	return r.checkHeld()
}

// applyKeys runs ApplyToAllKeys over one state in the namespace of slot; for each visited key
// it clears the state, rewrites it (a put or add through the ordinary write steps, on the Store
// and the model) or leaves it. Every key with state in the namespace is visited exactly once
// (the writes touch only the visited key, so none ahead of the scan changes).
func (r *modelRun) applyKeys(slot int32) error {
	_, ns := r.w.u.kn(slot)
	i := r.rng.IntN(5)
	st := r.st.all()[i]
	before := map[int32]bool{}
	for sl := range r.m.stateSlots(i) {
		if _, sns := r.w.u.kn(sl); sns == ns {
			before[sl] = true
		}
	}
	clearFn := []func(*modelRun, int32) error{(*modelRun).valClear, (*modelRun).listClear, (*modelRun).mapClear,
		(*modelRun).redClear, (*modelRun).aggClear}[i]
	write := []func(*modelRun, int32) error{(*modelRun).valPut, (*modelRun).listAdd, (*modelRun).mapPut,
		(*modelRun).redAdd, (*modelRun).aggAdd}[i]
	seen := map[int32]bool{}
	err := r.st.s.ApplyToAllKeys([]byte(ns), st, func(k Key) error {
		sl, ok := r.slotOf(k)
		switch {
		case !ok:
			return fmt.Errorf("%w: key %q in namespace %q is not the model's", errMismatch, k.Bytes(), k.Namespace())
		case seen[sl]:
			return fmt.Errorf("%w: slot %d visited twice", errMismatch, sl)
		case !before[sl]:
			return fmt.Errorf("%w: slot %d visited, the model has no %s state there", errMismatch, sl, st.Name())
		}
		seen[sl] = true
		switch r.rng.IntN(3) {
		case 0:
			return clearFn(r, sl)
		case 1:
			return write(r, sl)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("ApplyToAllKeys(%q, %s): %w", ns, st.Name(), err)
	}
	if len(seen) != len(before) {
		return fmt.Errorf("%w: ApplyToAllKeys(%q, %s) visited %v, model %v", errMismatch, ns, st.Name(),
			slices.Sorted(maps.Keys(seen)), slices.Sorted(maps.Keys(before)))
	}
	return nil
}
