#!/bin/bash
# Counts the cache misses of one point read (issue 14, "point reads at the physical limit"):
# runs bench/cmd/misses under valgrind's callgrind with a simulated cache (32 KiB 8-way L1D,
# 32 MiB 16-way last level: the EPYC VM's L3), dumping the counters when its read loop
# starts: the second dump is the reads alone (the program exits right after them). (Collecting
# inside the loop alone, --toggle-collect, is not reliable with Go: callgrind tracks calls by
# the stack pointer and lost half of the reads in some runs.) Prints,
# per read, the instructions, the L1 data misses and the last-level data misses (reads and
# writes that go to DRAM). Valgrind runs the Go program single-threaded and about 50× slower;
# GODEBUG=asyncpreemptoff=1 keeps callgrind away from the preemption signals it cannot follow.
#
# Usage: [MISSES_KEEP=file] scripts/misses.sh [misses flags...], e.g.
#   scripts/misses.sh -impl strata -state value -value 100 -key 16B+ns8B -keys 1000000
#   scripts/misses.sh -impl gomap  -state map   -value 100 -key 16B+ns8B -keys 100000
set -euo pipefail
cd "$(dirname "$0")/../bench"
bin=$(mktemp -d)/misses
go build -o "$bin" ./cmd/misses
out=$(mktemp)
GODEBUG=asyncpreemptoff=1 valgrind --tool=callgrind --cache-sim=yes \
	--D1=32768,8,64 --I1=32768,8,64 --LL=33554432,16,64 \
	--dump-before='main.reads' --callgrind-out-file="$out" "$bin" "$@" >"$out.stdout" 2>"$out.stderr" || {
	cat "$out.stderr" >&2
	exit 1
}
grep -v '^==' "$out.stderr" | grep -v '^--' >&2 || true
reads=$(awk '/^reads /{print $2}' "$out.stdout")
# Every dump after the first is the reads (callgrind may see main.reads entered more than once
# and dump again; the last dump, at exit, has no number). Each dump's summary line holds the
# events Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, trailing zeros left out.
cat "$out" $(ls "$out".* | grep -E '\.[0-9]+$' | grep -v -E '\.1$') | awk -v n="$reads" -v args="$*" '
	/^summary:/ { for (i = 2; i <= NF; i++) v[i-2] += $i }
	END {
		printf "%s: %d reads; per read: %.0f instructions, %.2f L1D misses, %.2f last-level (DRAM) misses\n",
			args, n, v[0]/n, (v[4]+v[5])/n, (v[7]+v[8])/n
	}'
# MISSES_KEEP=file keeps callgrind's largest dump of the reads there (callgrind_annotate --inclusive=no file
# gives the misses per function, for most of the reads).
if [ -n "${MISSES_KEEP:-}" ]; then cp "$(ls -S "$out" $(ls "$out".* | grep -E '\.[0-9]+$' | grep -v -E '\.1$') | head -1)" "$MISSES_KEEP"; fi
rm -f "$out" "$out".* "$bin"
