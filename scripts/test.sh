#!/usr/bin/env bash
# The project's test command (README "Run the tests"). Fails loudly on the
# first broken step. Needs qemu-user-static for the arm64 runs (.ci/run
# installs it). Budget: well under 30 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

# step prints the time the previous step took (CI's budget is watched per step), then its title.
t0=$(date +%s)
step() {
  local now; now=$(date +%s)
  printf '\n(%d s; %d s in all)\n=== %s\n' $((now - ${ts:-$t0})) $((now - t0)) "$*"
  ts=$now
}

step "gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$bad" ]; then echo "gofmt wants changes in:"; echo "$bad"; exit 1; fi

step "go vet (host, arm64, arm64 purego)"
go vet ./...
GOARCH=arm64 go vet ./...
GOARCH=arm64 go vet -tags purego ./...
go vet -tags invariants ./...
(cd bench && go vet -tags pebblegozstd ./...)

step "go test -race (host); the tiers with the invariants tag (internal/invariants: FreshTable verify after a seal, slice validation at install, the LSM version after every manifest edit)"
tiers='/(fresh|slice|lsm)$'
go test -race -count=1 -timeout 40m $(go list ./... | grep -Ev "$tiers")
go test -race -tags invariants -count=1 -timeout 25m $(go list ./... | grep -E "$tiers")

step "without -race: a crash at every write of a Store's sessions, of a checkpoint and of the changelog, and every Close fault point (the race run samples the write points and the fault points), the 0-allocation pins (the race detector allocates, so they skip under it), checkpoint storage within 3× the live state after the grace, and the model test's pressure configuration at full size"
go test -count=1 -run '^(TestCrash|TestCheckpointCrash|TestChangelogCrash|TestAttackNoSpaceClose|TestAttackEIOClose|TestAllocs.*|TestCheckpointStorageBound)$' -v . | grep -E '^(--- |\s+\w+_test.go|ok|FAIL|PASS)'
go test -count=1 -run '^(TestSpareAcrossOverlappingPersist|TestNewLogAppendsWithoutAllocating)$' -v ./changelog | grep -E '^(--- |\s+\w+_test.go|ok|FAIL|PASS)'
# The model test's pressure configuration (megabyte values) at full size: under -race it runs a
# quarter of that, the race runtime's cost being the bytes it copies (store_model_test.go raceSlow).
go test -count=1 -run '^TestModel$/^pressure$' -v . | grep -E '^(--- |\s+--- |ok|FAIL|PASS)|steps in'

step "bounded memory (tests/, the process-level tests): 640 MiB of state through a 64 MiB budget, and every shape of state (a 1 GiB list, a 5 M-entry map, 2 M namespaces) within budget + 96 MiB of VmHWM (no -race: its shadow memory inflates RSS)"
go test -run '^(TestBoundedMemory|TestMemoryShapes)$' -count=1 -v ./tests/ | grep -E '^(=== RUN|--- |\s+\w+_test.go|ok|FAIL|PASS)'

step "bench module tests (demo job on real data)"
(cd bench && go test -tags pebblegozstd -count=1 ./...)

step "demo job end to end: all 3 M flights, cross-checked against plain Go maps (exits non-zero on a mismatch)"
(cd bench && go run ./cmd/flightdemo)

step "demo job survives a SIGKILL: a child process killed after 1.7 M events, restored from its last checkpoint (1.65 M or 1.7 M: materialization + changelog replay), replayed from its offset, checked again"
(cd bench && go run ./cmd/flightdemo -kill-after 1700000)

step "demo job rescaled through checkpoints: 1 Store -> 2 Stores splitting the key groups (at 1.5 M events) -> 1 Store (at 2.25 M), checked again"
(cd bench && go run ./cmd/flightdemo -rescale 2)

step "the offline state reader on a demo checkpoint: the demo (300 000 flights) checkpoints into a directory, then strata-state verifies every checksum of its last checkpoint, prints its info and dumps key groups 0-3 as JSON lines"
demock=$(mktemp -d)
(cd bench && go run ./cmd/flightdemo -rows 300000 -checkpoints "$demock" | grep -E '^(checkpoints|check)')
go run ./cmd/strata-state verify -dir "$demock" -owner flights-kg-00000-00127
go run ./cmd/strata-state info -dir "$demock" -owner flights-kg-00000-00127 >/dev/null
lines=$(go run ./cmd/strata-state dump -dir "$demock" -owner flights-kg-00000-00127 -kg 0-3 | wc -l)
echo "dump: $lines lines (the meta line, entries and timers of key groups 0-3)"
if [ "$lines" -lt 100 ]; then echo "strata-state dump printed $lines lines of a demo checkpoint"; exit 1; fi
rm -rf "$demock"

step "checkpoint/s3 module (its own go.mod): vet, and its tests with -race against gofakes3 in-process (the Storage conformance suite, retries, multipart failures, strata-state's S3-enabled build on s3:// URLs)"
(cd checkpoint/s3 && go vet ./... && GOARCH=arm64 go vet ./... && go test -race -count=1 -timeout 10m ./...)

step "checkpoint/s3 against a real S3-compatible server (versitygw, posix back-end, 127.0.0.1): conformance, two writers racing a conditional create, a Store checkpointed and restored, the server killed mid-upload and restarted; then the flight demo's kill run and its rescale run with their checkpoints in the server's bucket (-checkpoints s3://…), each checked against plain Go maps"
scripts/s3-real.sh --demo

step "kafka module (its own go.mod): vet, and the runner's tests with -race on kfake (a single runner, three with one killed mid-stream, scale 2 -> 4 -> 1, a bad partition count, another job's checkpoint, a zombie runner stalled past a rebalance, at-least-once output after a kill; output compared with a plain Go model); about 35 s of tests after the build"
(cd kafka && go vet ./... && GOARCH=arm64 go vet ./... && go test -race -count=1 -timeout 5m ./...)

step "the flight job on Kafka, short: 300 000 flights into 8 partitions on kfake, 3 runner processes, one SIGKILLed mid-run (its partitions move), the others stopped by SIGTERM; committed output and committed state checked against plain Go maps (about 15 s after the build)"
(cd bench && go run ./cmd/flightkafka -rows 300000)

step "arm64 under qemu"
command -v qemu-aarch64-static >/dev/null || { echo "qemu-aarch64-static missing: apt-get install -y qemu-user-static"; exit 1; }
# Packages with arm64-specific code and the tiers that call it, at every configuration; the
# root package's model test (every state kind through every tier, checkpoints, restores) once.
arm_pkgs="./asm_arm64/ ./slice/ ./fresh/ ./memory/"
run_qemu() { # $1 cpu, $2 expected impl, $3 expected SVE vector bits, rest: extra go test flags
  local cpu=$1 impl=$2 vl=$3; shift 3
  echo "--- qemu -cpu $cpu (expect impl=$impl vl=$vl) $*"
  STRATA_EMULATED=1 STRATA_EXPECT_IMPL=$impl STRATA_EXPECT_VL=$vl GOARCH=arm64 \
    go test -short -count=1 -timeout 25m "$@" -exec "qemu-aarch64-static -cpu $cpu" $arm_pkgs
}
# The root package's other tests are architecture-independent logic, run on the host with
# -race; under emulation the whole root package outgrew ten minutes, so only its model test
# runs here, once, at one SVE length.
run_qemu max,sve128=on sve 128
arm_pkgs="."
run_qemu max,sve128=on sve 128 -run '^TestModel$'
arm_pkgs="./asm_arm64/ ./slice/ ./fresh/ ./memory/"
run_qemu max,sve512=on sve 512
run_qemu neoverse-n1 neon 0
# The kernels, and the slice reads that call them, at the remaining configurations.
for cfg in "max,sve256=on sve 256" "max,sve2048=on,sve-default-vector-length=256 sve 2048" "max generic 0 -tags purego"; do
  arm_pkgs="./asm_arm64/"
  run_qemu $cfg
  arm_pkgs="./slice/"
  run_qemu $cfg -run 'LowerBound|Model|GetVersions|ListGet|MapGetAndIter|HotPaths'
done

step "WORD assembly in sync with its mnemonic sources (sve2word, Go 1.27.3 + GOEXPERIMENT=simd)"
scripts/check-asm.sh

step "Go 1.27 build"
if GOTOOLCHAIN=go1.27.3 go version >/dev/null 2>&1; then
  GOTOOLCHAIN=go1.27.3 go vet ./...
  GOTOOLCHAIN=go1.27.3 GOARCH=arm64 go vet ./...
else
  echo "go1.27.3 toolchain not available from the module proxy"; exit 1
fi

step "all steps passed"
