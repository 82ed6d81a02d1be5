package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Garbage collection by reachability (doc.go, "Garbage collection"): an object is deleted only
// when no kept manifest names it, no checkpoint of this process has it in flight, and it is
// older than a grace period. Nothing is counted: what is reachable is recomputed from the
// manifests in the storage on every run, so a restart that loses every in-memory structure
// loses nothing a manifest needs (FLINK-7268).

// DefaultGrace is GCOptions.Grace when left zero: unreachable objects younger than this are
// kept, as uploads of checkpoints not yet committed (in this or another process) may be.
const DefaultGrace = 10 * time.Minute

// NoGrace, as GCOptions.Grace, deletes unreachable objects whatever their age: only safe when
// every writer of the owner is this process and registers its uploads in an InFlight set.
const NoGrace time.Duration = -1

// InFlight is the set of objects that checkpoints of this process are writing or referencing
// and whose manifests are not committed yet; GC never deletes them. The protocol (doc.go,
// "Garbage collection", rule 3): Add a name before uploading the object or before deciding to
// reference an existing one, and Release it once the checkpoint's manifest is committed (it is
// then reachable) or the checkpoint is aborted or failed (it is then garbage, unless another
// retained manifest names it).
//
// A Release while a GC run is in progress takes effect only when no run is in progress any
// more: a run that listed the manifests before the commit must still see the objects as in
// flight (the race that deleted shared files under concurrent checkpoints in FLINK-29913).
//
// Names are counted, so two in-flight checkpoints can hold one object; the counts live only in
// memory and protect only this process's running checkpoints — after a restart nothing is in
// flight, and the grace period protects other processes' uploads. The zero value is an empty
// set. Safe for concurrent use.
type InFlight struct {
	mu       sync.Mutex
	refs     map[string]int
	gcs      int      // GC runs in progress
	deferred []string // releases waiting for gcs to reach 0
}

// Add adds one reference to each name.
func (f *InFlight) Add(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refs == nil {
		f.refs = make(map[string]int)
	}
	for _, n := range names {
		f.refs[n]++
	}
}

// Release drops one reference to each name (added by Add; it panics on a name with no
// reference, a broken caller invariant), after the GC runs in progress have ended.
func (f *InFlight) Release(names ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gcs > 0 {
		f.deferred = append(f.deferred, names...)
		return
	}
	f.release(names)
}

func (f *InFlight) release(names []string) {
	for _, n := range names {
		switch c := f.refs[n]; c {
		case 0:
			panic("strata: invariant: checkpoint.InFlight.Release of " + n + ", which is not in flight")
		case 1:
			delete(f.refs, n)
		default:
			f.refs[n] = c - 1
		}
	}
}

// Contains reports whether name is in flight.
func (f *InFlight) Contains(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refs[name] > 0
}

// Len returns how many distinct names are in flight (including releases deferred by a GC run).
func (f *InFlight) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.refs)
}

func (f *InFlight) beginGC() {
	if f == nil {
		return
	}
	f.mu.Lock()
	f.gcs++
	f.mu.Unlock()
}

func (f *InFlight) endGC() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gcs--; f.gcs == 0 {
		f.release(f.deferred)
		f.deferred = nil
	}
}

func (f *InFlight) contains(name string) bool { return f != nil && f.Contains(name) }

// Claim gives GC another owner's lineage to collect, for a Store restored in CLAIM mode (Flink's
// RestoreMode.CLAIM): the restored lineage becomes ours, and its objects are deleted once no
// kept manifest — ours, or its own Pinned ones — reaches them, nor any sibling claimant's
// (several Stores may claim one lineage: a scale out; each leaves a claim marker, WriteClaim,
// doc.go "Claims shared by several Stores"). Without a Claim, GC never deletes anything
// outside its own owner's prefix (NO_CLAIM, the default, as FLINK-26985 demands of a restore
// source).
type Claim struct {
	// Owner is the other lineage's owner (ValidateOwner), not GCOptions.Owner.
	Owner string
	// Pinned are ids of its manifests to keep (typically the restored checkpoint, until a
	// checkpoint of our own completes); its other manifests are collected.
	Pinned []uint64
}

// GCOptions says whose objects a GC run collects and which checkpoints it keeps. As Flink's
// CompletedCheckpointStore with state.checkpoints.num-retained, minus the counters.
type GCOptions struct {
	// Owner is the lineage to collect (ValidateOwner): only objects under "<Owner>/" are
	// deleted (and those of Claimed lineages). Required.
	Owner string
	// Retain is how many completed checkpoints to keep, the newest ones (Flink's
	// state.checkpoints.num-retained). Default (0): 1.
	Retain int
	// LastCompleted is the id of the newest checkpoint known to be completed — notified by
	// CheckpointListener.notifyCheckpointComplete, or the one restored from. Manifests with a
	// larger id are pending (the job may still complete them) and always kept; the Retain
	// newest manifests with ids up to it are kept. 0 (nothing known, as after a restart before
	// any notification): every committed manifest is kept.
	LastCompleted uint64
	// Aborted are ids of checkpoints the job aborted (notifyCheckpointAborted) whose manifests
	// may have been committed anyway; they are neither pending nor counted as completed.
	Aborted []uint64
	// Pinned are ids of the owner's checkpoints to keep regardless (a user's pin, a savepoint
	// under way, a restore source).
	Pinned []uint64
	// InFlight holds the objects of checkpoints being written by this process (see InFlight);
	// nil for none.
	InFlight *InFlight
	// Grace is how old an unreachable object (manifests included) must be to be deleted, by
	// ObjectInfo.Created; an object of unknown age is kept unless Grace is NoGrace. Default
	// (0): DefaultGrace. It must exceed the longest checkpoint upload of any process writing
	// under Owner that does not share this InFlight, and the List lag of an eventually
	// consistent object store.
	Grace time.Duration
	// Now returns the current time; default time.Now.
	Now func() time.Time
	// Claimed are other lineages to collect as our own (CLAIM mode); default none.
	Claimed []Claim
}

// Validate reports a bad field by name.
func (o *GCOptions) Validate() error {
	if err := ValidateOwner(o.Owner); err != nil {
		return fmt.Errorf("checkpoint: GCOptions.Owner: %w", err)
	}
	if o.Retain < 0 {
		return fmt.Errorf("checkpoint: GCOptions.Retain is negative (%d)", o.Retain)
	}
	if o.Grace < 0 && o.Grace != NoGrace {
		return fmt.Errorf("checkpoint: GCOptions.Grace is negative (%v) and not NoGrace", o.Grace)
	}
	for _, c := range o.Claimed {
		if err := ValidateOwner(c.Owner); err != nil {
			return fmt.Errorf("checkpoint: GCOptions.Claimed: %w", err)
		}
		if c.Owner == o.Owner {
			return fmt.Errorf("checkpoint: GCOptions.Claimed names the Owner %q", c.Owner)
		}
	}
	return nil
}

// GCResult reports what a GC run did.
type GCResult struct {
	// Kept are the names of the manifests kept (retained, pending, pinned, or too young to
	// delete), in name order.
	Kept []string
	// Deleted are the names of the objects deleted, manifests first, in the order deleted.
	Deleted []string
	// Young counts unreachable objects kept because they are younger than the grace period
	// (or of unknown age); InFlightKept those kept because they are in flight.
	Young, InFlightKept int
	// Temporaries counts temporaries removed (Cleaner).
	Temporaries int
}

// ListCheckpoints returns the ids of owner's committed manifests, ascending. On an object store
// whose List lags, a just-committed manifest may be missing.
func ListCheckpoints(ctx context.Context, s Storage, owner string) ([]uint64, error) {
	if err := ValidateOwner(owner); err != nil {
		return nil, err
	}
	objs, err := s.List(ctx, OwnerPrefix(owner)+"chk-")
	if err != nil {
		return nil, err
	}
	var ids []uint64
	for _, o := range objs {
		if ow, id, ok := ParseManifestName(o.Name); ok && ow == owner {
			ids = append(ids, id)
		}
	}
	return ids, nil // List is sorted by name, and ids are zero-padded: ascending
}

// GC collects the owner's lineage (and claimed ones): it lists every object, decides which
// manifests to keep (GCOptions), reads them, and deletes each listed object that no kept
// manifest names, that is not in flight and that is older than the grace period — manifests
// first, so a manifest in the storage never names a deleted object — then removes old
// temporaries (Cleaner). A kept manifest that cannot be read fails the run before anything is
// deleted: reachability cannot be known. A run cut short (error, crash, ctx) leaves only
// garbage the next run deletes. Runs may overlap each other and concurrent checkpoints.
func GC(ctx context.Context, s Storage, opts GCOptions) (GCResult, error) {
	var res GCResult
	if err := opts.Validate(); err != nil {
		return res, err
	}
	retain, grace, now := opts.Retain, opts.Grace, time.Now
	if retain == 0 {
		retain = 1
	}
	switch grace {
	case 0:
		grace = DefaultGrace
	case NoGrace:
		grace = 0
	}
	if opts.Now != nil {
		now = opts.Now
	}
	opts.InFlight.beginGC()
	defer opts.InFlight.endGC()

	// Every object of the lineages, listed once; anything written after this is not touched.
	type lineage struct {
		owner   string
		pinned  []uint64
		objects []ObjectInfo
		ids     []uint64 // committed manifests listed, ascending
	}
	lines := []*lineage{{owner: opts.Owner, pinned: opts.Pinned}}
	for _, c := range opts.Claimed {
		lines = append(lines, &lineage{owner: c.Owner, pinned: c.Pinned})
	}
	info := make(map[string]ObjectInfo)
	for _, l := range lines {
		objs, err := s.List(ctx, OwnerPrefix(l.owner))
		if err != nil {
			return res, err
		}
		l.objects = objs
		for _, o := range objs {
			info[o.Name] = o
			if ow, id, ok := ParseManifestName(o.Name); ok && ow == l.owner {
				l.ids = append(l.ids, id)
			}
		}
	}
	now0 := now()
	deletable := func(name string) bool {
		o, listed := info[name]
		return listed && !opts.InFlight.contains(name) && oldEnough(o.Created, now0, grace)
	}

	// Which manifests to keep: by retention, then every one not deletable now.
	keep := make(map[string]bool)
	own := lines[0]
	aborted := func(id uint64) bool { return slices.Contains(opts.Aborted, id) }
	var completed []uint64
	for _, id := range own.ids {
		switch {
		case aborted(id):
		case opts.LastCompleted == 0 || id > opts.LastCompleted:
			keep[ManifestName(own.owner, id)] = true // pending
		default:
			completed = append(completed, id)
		}
	}
	if opts.LastCompleted != 0 && !aborted(opts.LastCompleted) && !slices.Contains(completed, opts.LastCompleted) {
		// Not listed (a lagging List?): read it anyway; it may not exist (a lineage with no
		// checkpoint of its own yet), which readKept tolerates for unlisted names.
		completed = append(completed, opts.LastCompleted)
	}
	for _, id := range completed[max(0, len(completed)-retain):] {
		keep[ManifestName(own.owner, id)] = true
	}
	// Sibling claimants of a claimed lineage (doc.go, "Claims shared by several Stores"): one
	// that has committed no checkpoint yet may still need the whole checkpoint it restored;
	// one that has needs at most what its manifests reach of the lineage (a Store's later
	// checkpoints reach a subset of the restored tables its earlier ones reach).
	var siblings []string // manifests of sibling claimants to read for reachability only
	for _, l := range lines[1:] {
		for _, o := range l.objects {
			owner, claimant, id, ok := ParseClaimMarkerName(o.Name)
			if !ok || owner != l.owner || claimant == opts.Owner {
				continue
			}
			ids, err := ListCheckpoints(ctx, s, claimant)
			if err != nil {
				return res, fmt.Errorf("checkpoint: gc %s: claimant %s of %s: %w", opts.Owner, claimant, l.owner, err)
			}
			if len(ids) == 0 {
				l.pinned = append(l.pinned, id)
			}
			for _, cid := range ids {
				siblings = append(siblings, ManifestName(claimant, cid))
			}
		}
	}
	for _, l := range lines {
		for _, id := range l.pinned {
			keep[ManifestName(l.owner, id)] = true
		}
		for _, id := range l.ids {
			if name := ManifestName(l.owner, id); !keep[name] && !deletable(name) {
				keep[name] = true
			}
		}
	}

	// What the kept manifests reach.
	reach := make(map[string]bool)
	for name := range keep {
		_, listed := info[name]
		owner, id, _ := ParseManifestName(name)
		m, err := ReadManifest(ctx, s, owner, id)
		if err != nil {
			if !listed && errors.Is(err, ErrNotFound) {
				delete(keep, name) // a pin or LastCompleted that names no manifest
				continue
			}
			return res, fmt.Errorf("checkpoint: gc %s: %w", opts.Owner, err)
		}
		reach[name] = true
		for _, o := range m.Objects {
			reach[o.Name] = true
		}
	}
	for _, name := range siblings {
		owner, id, _ := ParseManifestName(name)
		m, err := ReadManifest(ctx, s, owner, id)
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				continue // collected since the List: a later manifest of it reaches no more
			}
			return res, fmt.Errorf("checkpoint: gc %s: %w", opts.Owner, err)
		}
		for _, o := range m.Objects {
			reach[o.Name] = true
		}
	}
	for name := range keep {
		res.Kept = append(res.Kept, name)
	}
	slices.Sort(res.Kept)

	// Delete: manifests first, then the objects only they reached.
	var manifests, others []string
	for _, l := range lines {
		for _, o := range l.objects {
			if reach[o.Name] {
				continue
			}
			if _, _, ok := ParseFenceName(o.Name); ok {
				continue // a fence is never garbage: it fences zombies for ever (doc.go, "Writer fencing")
			}
			if _, _, _, ok := ParseClaimMarkerName(o.Name); ok {
				continue // claim markers stay: a few bytes per claimant, read by every GC
			}
			if _, _, ok := ParseManifestName(o.Name); ok {
				manifests = append(manifests, o.Name)
			} else {
				others = append(others, o.Name)
			}
		}
	}
	for _, name := range append(manifests, others...) {
		switch {
		case opts.InFlight.contains(name): // checked again, at the moment of deletion
			res.InFlightKept++
			continue
		case !oldEnough(info[name].Created, now0, grace):
			res.Young++
			continue
		}
		if err := s.Delete(ctx, name); err != nil {
			return res, err
		}
		res.Deleted = append(res.Deleted, name)
	}
	if c, ok := s.(Cleaner); ok {
		for _, l := range lines {
			n, err := c.Cleanup(ctx, OwnerPrefix(l.owner), now0, grace)
			res.Temporaries += n
			if err != nil {
				return res, err
			}
		}
	}
	return res, nil
}

// WriteClaim records that claimant claims checkpoint id of lineage owner (a restore in CLAIM
// mode), before the claimant uses any of its objects: a claim marker,
// ClaimMarkerName(owner, claimant, id), empty, created if absent (a marker already there, of
// an earlier restore of the same claimant, is fine). Errors: the storage's.
func WriteClaim(ctx context.Context, s Storage, owner, claimant string, id uint64) error {
	err := s.Create(ctx, ClaimMarkerName(owner, claimant, id), nil)
	if err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("checkpoint: claim of %s by %s: %w", ManifestName(owner, id), claimant, err)
	}
	return nil
}
