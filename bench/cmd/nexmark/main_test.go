package main

import (
	"os"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" { // the child process of -kill-after: this test binary again
		if err := runChild(os.Args[1:], os.Stdout); err != nil {
			os.Stderr.WriteString("nexmark (child): " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestCommandAllQueries runs the command on every query for a short run: each prints check: OK.
func TestCommandAllQueries(t *testing.T) {
	var sb strings.Builder
	if err := run([]string{"-query", "all", "-events", "50000", "-dir", t.TempDir()}, &sb); err != nil {
		t.Fatalf("%v\n%s", err, sb.String())
	}
	out := sb.String()
	if n, want := strings.Count(out, "check: OK"), len(strings.Split("q0 q1 q2 q3 q4 q5 q7 q8 q11 q12 q15 q16 q17 q18 q19 q20", " ")); n != want {
		t.Fatalf("%d queries checked OK, want %d:\n%s", n, want, out)
	}
}

// TestCommandKillAfter SIGKILLs the child running q11 after 120 000 events, restores its last
// committed checkpoint (whichever upload had finished: 75 000 or 100 000) and must still
// match the model.
func TestCommandKillAfter(t *testing.T) {
	var sb strings.Builder
	err := run([]string{"-query", "q11", "-events", "200000", "-kill-after", "120000", "-checkpoint-every", "25000", "-dir", t.TempDir()}, &sb)
	out := sb.String()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"SIGKILLed after reporting", "restore: checkpoint", "resumed at event", "check: OK"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in:\n%s", want, out)
		}
	}
}
