package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-db/strata"
)

// -kill-after: the job runs in a child process (this executable again, with childEnv set),
// which checkpoints as the plain run does and reports on its standard output, one line each:
//
//	progress <events>                                  every 1024 rows
//	checkpoint <id> <events> <sync-ns> <async-ns> <uploaded> <reused> <mats> <log-bytes> <new>
//	                                                   each completed checkpoint (ckRecord)
//	done                                               the replay ended (it was not killed)
//
// The parent SIGKILLs the child at the first progress report at or past the kill point — a
// real kill: no deferred Close, no flush, the Store's directory as the kernel left it — and
// restores the newest committed checkpoint (strata.LatestCheckpoint) into a new directory.

// childEnv marks the child process of -kill-after.
const childEnv = "FLIGHTDEMO_KILL_CHILD"

// runChild is the child process: the job from the first event, in c.dir, checkpointing into
// c.checkpoints every c.every events, reporting to w.
func runChild(args []string, w io.Writer) error {
	c, err := parseFlags(args)
	if err != nil {
		return err
	}
	tr, _, err := load(c)
	if err != nil {
		return err
	}
	storage, err := openStorage(c.checkpoints)
	if err != nil {
		return err
	}
	table, _, err := loadAirportsTable(c)
	if err != nil {
		return err
	}
	store, err := strata.Open(c.dir, storeOptions(c, storage, nil, strata.NoClaim))
	if err != nil {
		return err
	}
	defer store.Close()
	j, err := newJob(tr, c.scale, etConfig{Bound: c.outOfOrder, Clock: c.clock, Airports: table}, store)
	if err != nil {
		return err
	}
	j.ck = &checkpointer{every: c.every, nextID: 1, storage: storage, onDone: func(r ckRecord) {
		fmt.Fprintf(w, "checkpoint %d %d %d %d %d %d %d %d %d\n", r.ID, r.Events, r.SyncPause, r.AsyncDuration, r.Uploaded, r.Reused,
			r.Mats, r.LogBytes, r.New)
	}}
	if err := j.replay(0, len(tr.Rows), func(events int) { fmt.Fprintf(w, "progress %d\n", events) }); err != nil {
		return err
	}
	if _, err := j.ck.finish(j); err != nil {
		return err
	}
	fmt.Fprintln(w, "done")
	return store.Close()
}

// killChild runs the job in a child process with args (the parent's own, plus the child's
// directory, checkpoint directory and resolved interval) and SIGKILLs it once it reported
// killAfter events. It returns the events the child had reported when it was killed and the
// checkpoints it reported complete.
func killChild(args []string, killAfter int, out io.Writer) (killedAt int, taken []ckRecord, err error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, nil, err
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(out, "kill: child process %d replays from event 0, to be SIGKILLed after %d events\n", pid, killAfter)
	killed, done := false, false
	var perr error
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		switch {
		case f[0] == "progress" && len(f) == 2:
			n, err := strconv.Atoi(f[1])
			if err != nil {
				perr = fmt.Errorf("child: bad line %q", sc.Text())
				continue
			}
			if !killed && n >= killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					return 0, nil, fmt.Errorf("kill child %d: %w", pid, err)
				}
				killed, killedAt = true, n
			}
		case f[0] == "checkpoint" && len(f) == 10:
			var v [9]int64
			for i := range v {
				if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
					perr = fmt.Errorf("child: bad line %q", sc.Text())
				}
			}
			taken = append(taken, ckRecord{ID: uint64(v[0]), Events: int(v[1]), Stores: 1, SyncPause: time.Duration(v[2]),
				AsyncDuration: time.Duration(v[3]), Uploaded: v[4], Reused: v[5], Mats: v[6], LogBytes: v[7], New: v[8], Child: true})
		case f[0] == "done":
			done = true
		default:
			perr = fmt.Errorf("child: bad line %q", sc.Text())
		}
	}
	werr := cmd.Wait()
	if perr != nil {
		return 0, nil, perr
	}
	if !killed {
		if done && werr == nil {
			return 0, nil, fmt.Errorf("-kill-after %d: the child replayed every event before reaching it", killAfter)
		}
		return 0, nil, fmt.Errorf("child process %d failed: %v", pid, werr)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		return 0, nil, fmt.Errorf("child process %d ended with %v, not by SIGKILL", pid, cmd.ProcessState)
	}
	var ee *exec.ExitError
	if !errors.As(werr, &ee) {
		return 0, nil, fmt.Errorf("child process %d: %v", pid, werr)
	}
	last := "none"
	if len(taken) > 0 {
		last = fmt.Sprintf("%d at event %d", taken[len(taken)-1].ID, taken[len(taken)-1].Events)
	}
	fmt.Fprintf(out, "kill: child process %d %v after reporting %d events (%.2fs); it reported %d checkpoints complete, the last %s\n",
		pid, cmd.ProcessState, killedAt, time.Since(t0).Seconds(), len(taken), last)
	return killedAt, taken, nil
}
