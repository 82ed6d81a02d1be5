package suite

import "testing"

// TestParseJobLine: BenchmarkJob reads the figures of the demo's job line, and refuses output
// without one or with a figure missing (a demo that stopped printing it must fail the row,
// not report zeros).
func TestParseJobLine(t *testing.T) {
	out := []byte("check: OK\njob: events=3000000 events/s=100000 model-events/s=1000000 task-us/event=4.9 bg-us/event=5.2 model-us/event=0.76 bg/task=1.06 changelog/task=0.2 ckpt/changed=3.1 evictions=335\n")
	m, err := parseJobLine(out)
	if err != nil {
		t.Fatal(err)
	}
	if m["events/s"] != 100000 || m["model-us/event"] != 0.76 || m["evictions"] != 335 || m["ckpt/changed"] != 3.1 {
		t.Fatalf("parsed %v", m)
	}
	for _, bad := range []string{"check: OK\n", "job: events/s=1 model-events/s=2\n", "job: events/s=x\n"} {
		if _, err := parseJobLine([]byte(bad)); err == nil {
			t.Errorf("%q parsed without an error", bad)
		}
	}
}
