package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"

	"github.com/strata-db/strata/bench/internal/report"
)

// kafkaArgs are the arguments of the flight job on Kafka for the report: its defaults (all 3M
// flights, 8 partitions on kfake, 3 runner processes, one SIGKILLed at 40% of the flights).
var kafkaArgs = []string{}

// runKafka runs the flight job on Kafka and returns its output (about a minute and a half).
func runKafka() []byte {
	args := append([]string{"run", "./cmd/flightkafka"}, kafkaArgs...)
	logf("running: go %s", strings.Join(args, " "))
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		fatalf("flight job on Kafka: %v\n%s", err, out)
	}
	return out
}

// kafkaBenchRuns are the `go test` runs of package kafka's benchmarks for the section (in
// ../kafka, its own module): end-to-end latency and a partition's move, one iteration per
// repeat (about 4 minutes together).
var kafkaBenchRuns = [][]string{
	{"-bench", "^BenchmarkEndToEndLatency$", "-count", "3"},
	{"-bench", "^BenchmarkRebalance$", "-count", "3"},
}

// runKafkaBench runs kafkaBenchRuns and returns their output, one after the other.
func runKafkaBench() []byte {
	var all []byte
	for _, run := range kafkaBenchRuns {
		args := append(append([]string{"test", "-run", "^$", "-benchtime", "1x"}, run...), ".")
		logf("running: (cd ../kafka && go %s)", strings.Join(args, " "))
		cmd := exec.Command("go", args...)
		cmd.Dir = "../kafka"
		out, err := cmd.CombinedOutput()
		if err != nil {
			fatalf("package kafka's benchmarks: %v\n%s", err, out)
		}
		all = append(all, out...)
	}
	return all
}

// writeKafkaBench writes the tables of package kafka's benchmarks from their output (medians
// of the repeats), or nothing when bench is empty.
func writeKafkaBench(md *bytes.Buffer, bench []byte, benchPath string) error {
	if len(bench) == 0 {
		return nil
	}
	d, err := report.Parse(bytes.NewReader(bench))
	if err != nil {
		return err
	}
	cmds := make([]string, len(kafkaBenchRuns))
	for i, run := range kafkaBenchRuns {
		cmds[i] = "`cd kafka && go test -run '^$' -benchtime 1x " + strings.Join(run, " ") + " .`"
	}
	fmt.Fprintf(md, "Package kafka's benchmarks (%s; medians of the repeats; output in %s), on kfake in the "+
		"benchmark's process, so the broker shares the machine with the runners: a real cluster adds its network.\n\n",
		strings.Join(cmds, ", "), benchPath)
	cell := func(name, unit string) string {
		if v, ok := d.Median(name, unit); ok {
			return fmt.Sprintf("%.0f", v)
		}
		return "–"
	}
	el := func(name, key string) string {
		for _, p := range strings.Split(name, "/") {
			if v, ok := strings.CutPrefix(p, key+"="); ok {
				return v
			}
		}
		return "?"
	}
	var lat, reb []string
	for _, name := range d.Order {
		switch {
		case strings.HasPrefix(name, "EndToEndLatency/"):
			lat = append(lat, name)
		case strings.HasPrefix(name, "Rebalance/"):
			reb = append(reb, name)
		}
	}
	if len(lat) > 0 {
		md.WriteString("End-to-end latency (BenchmarkEndToEndLatency: a record's produce call to its output read by a " +
			"read_committed consumer; one runner, 4 partitions, 2000 records/s for 5 s; commit: the last interval's " +
			"checkpoint and commit, of which the 4 Stores' checkpoints):\n\n" +
			"| delivery | interval | p50 ms | p99 ms | max ms | commit ms | Store checkpoints ms | events/s |\n" +
			"| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, n := range lat {
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", el(n, "delivery"), el(n, "interval"),
				cell(n, "p50-ms"), cell(n, "p99-ms"), cell(n, "max-ms"), cell(n, "commit-ms"), cell(n, "store-checkpoints-ms"), cell(n, "events/s"))
		}
		md.WriteString("\n")
	}
	if len(reb) > 0 {
		md.WriteString("Rebalance (BenchmarkRebalance: a partition's move, from the old owner's shutdown request to its first " +
			"record processed on the new owner, which restores the Store in Claim mode, lazily (lazy-claim, the runner's default: " +
			"records flow once the manifest is read, tables are fetched behind them) or fetching every table first " +
			"(full-claim, Config.FullRestore); link: the checkpoints hard-linked into " +
			"and out of a local directory, copy: streamed both ways):\n\n" +
			"| restore | storage | state MiB | move ms | handover ms | group ms | restore ms | fetch ms | checkpoint storage MiB |\n" +
			"| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, n := range reb {
			fmt.Fprintf(md, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", el(n, "restore"), el(n, "storage"), cell(n, "state-MiB"),
				cell(n, "rebalance-ms"), cell(n, "handover-ms"), cell(n, "group-ms"), cell(n, "restore-ms"), cell(n, "fetch-ms"), cell(n, "checkpoint-MiB"))
		}
		md.WriteString("\n")
	}
	return nil
}

// writeKafka writes the section of the flight job on Kafka: its figures (per runner events/s,
// the rebalance after the kill, the job's flights/s, the check) and its output, then the
// tables of package kafka's benchmarks (writeKafkaBench).
func writeKafka(md *bytes.Buffer, out []byte, outPath string, bench []byte, benchPath string) error {
	md.WriteString("## Flight job on Kafka\n\n")
	fmt.Fprintf(md, "`go run ./cmd/flightkafka %s` (issue 25: the flight job's per-route states — delay statistics, "+
		"last 10 delays, an event-time day window — on 3 runner processes of package kafka sharing an 8-partition "+
		"topic on kfake, franz-go's in-process Kafka, exactly once; one runner SIGKILLed mid-run; its output in %s). "+
		"Events/s per runner are over the whole job, kill and rebalance included, on the same machine as the rows "+
		"above, with the broker in the parent process; the single-process demo (Flight job section) does more per "+
		"event (five states, session windows, TTL), so the figures are not a like-for-like comparison.\n\n",
		strings.Join(kafkaArgs, " "), outPath)
	for _, l := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		for _, p := range []string{"killed ", "rebalance: ", "runner-", "job: ", "check: "} {
			if strings.HasPrefix(l, p) {
				md.WriteString("- " + l + "\n")
			}
		}
	}
	md.WriteString("\n<details><summary>the command's output</summary>\n\n```\n")
	md.Write(bytes.TrimRight(out, "\n"))
	md.WriteString("\n```\n\n</details>\n\n")
	return writeKafkaBench(md, bench, benchPath)
}
