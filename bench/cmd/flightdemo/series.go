package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

// series records the job's progress over time for -series: a sample of the events replayed
// about every 100 ms of the replay, each checkpoint when it completes, and each
// materialization when the replay first sees it counted. The file is text, one record a line:
//
//	# flightdemo series: seconds events kind
//	0.100 24576 progress
//	2.315 50000 checkpoint      (events: the checkpoint's input position)
//	2.400 471040 materialization
//
// seconds run from the start of the first replay; bench/cmd/results draws the chart of it.
type series struct {
	f     *os.File
	w     *bufio.Writer
	t0    time.Time
	last  time.Time
	mats  int64
	start bool
}

func newSeries(path string) (*series, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	s := &series{f: f, w: bufio.NewWriter(f)}
	fmt.Fprintln(s.w, "# flightdemo series: seconds events kind")
	return s, nil
}

func (s *series) record(events int, kind string) {
	if !s.start {
		s.t0, s.start = time.Now(), true
	}
	fmt.Fprintf(s.w, "%.3f %d %s\n", time.Since(s.t0).Seconds(), events, kind)
}

// progress samples events (at most every 100 ms) and records a materialization when the
// Stores' count, mats(), grew (read only when a sample is due).
func (s *series) progress(events int, mats func() int64) {
	now := time.Now()
	if s.start && now.Sub(s.last) < 100*time.Millisecond {
		return
	}
	s.last = now
	s.record(events, "progress")
	for m := mats(); s.mats < m; s.mats++ {
		s.record(events, "materialization")
	}
}

func (s *series) close() error {
	if err := s.w.Flush(); err != nil {
		s.f.Close()
		return err
	}
	return s.f.Close()
}
