package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
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

// writeKafka writes the section of the flight job on Kafka: its figures (per runner events/s,
// the rebalance after the kill, the job's flights/s, the check) and its output.
func writeKafka(md *bytes.Buffer, out []byte, outPath string) {
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
}
