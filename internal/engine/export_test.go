package engine

// Hooks for the engine's own tests (package engine): states no API shows, kept out of the
// engine's source. The root package's tests use only the engine's real surface (Stats,
// Evict, CheckRowCache, BulkReplayed), which the root's public API is built on, and the test
// knobs of Options, per engine (the root's Options.adjust).

// Busy reports whether background work is queued or in flight (LSM compactions included).
func (t *Engine) Busy() bool { return t.inFlight() || len(t.lsmJobs) != 0 }

// Finished reports whether background work has finished that the next install would take.
func (t *Engine) Finished() bool { return t.ready.Load() > 0 }
