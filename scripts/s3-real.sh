#!/usr/bin/env bash
# checkpoint/s3 against a real S3-compatible server: versitygw (scripts/versitygw.sh pins,
# installs, starts and stops it: posix back-end on a temporary directory, listening on
# 127.0.0.1 only, started and stopped by its PID). Runs, from checkpoint/s3's tests:
#   1. TestRealConformance, TestRealCreateRace (two writers racing a conditional create),
#      TestRealStoreRoundTrip (a Store checkpointed into the server and restored);
#   2. TestRealKill: phase "before" checkpoints a Store, then starts a slow 64 MiB upload; once
#      it is under way (a marker file) the server is killed with SIGKILL, and the upload must
#      fail; the server is restarted on the same directory and phase "after" checks the cut
#      upload is invisible, uploads it again and restores the checkpoint.
#   3. with --demo: the flight demo's kill-and-restore run with -checkpoints s3://… on the same
#      server (a child process SIGKILLed after 1.7 M events, restored from its last checkpoint
#      in the bucket, checked against plain Go maps; checkpoints every 300 000 events), then its
#      rescale run (1 Store -> 2 -> 1 through checkpoints in the bucket, checked again).
# Budget: under 1 minute once versitygw is installed, and about 1 more for --demo (its two runs).
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"

demo=false
case "${1:-}" in
  --demo) demo=true ;;
  "") ;;
  *) echo "usage: $0 [--demo]"; exit 2 ;;
esac

. scripts/versitygw.sh # vgw_init, vgw_start, vgw_stop: the server's one home
trap vgw_cleanup EXIT
vgw_init
tmp=$vgw_tmp

(cd checkpoint/s3 && go test -c -o "$tmp/s3.test" .)
vgw_start
echo "versitygw $VGW_VERSION (PID $vgw_pid) on 127.0.0.1:$vgw_port, data in $tmp/data"
export STRATA_S3_TEST_ENDPOINT="$vgw_endpoint" STRATA_S3_TEST_BUCKET=strata STRATA_S3_TEST_RUN="run$$"
cd checkpoint/s3
"$tmp/s3.test" -test.count=1 -test.timeout 5m -test.v -test.run '^TestReal(Conformance|CreateRace|StoreRoundTrip)$' |
  grep -E '^(\s*--- |\s+\w+(_test)?\.go:[0-9]+|ok|FAIL|PASS)'

echo "--- the server killed mid-upload"
marker="$tmp/uploading"
STRATA_S3_TEST_PHASE=before STRATA_S3_TEST_MARKER="$marker" \
  "$tmp/s3.test" -test.count=1 -test.timeout 3m -test.v -test.run '^TestRealKill$' >"$tmp/before.log" 2>&1 &
tpid=$!
for _ in $(seq 600); do
  [ -e "$marker" ] && break
  kill -0 "$tpid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -e "$marker" ]; then
  echo "the upload never got under way:"; cat "$tmp/before.log"; kill "$tpid" 2>/dev/null || true; exit 1
fi
kill -9 "$vgw_pid"
wait "$vgw_pid" 2>/dev/null || true
echo "killed versitygw (PID $vgw_pid) with SIGKILL during the upload"
vgw_pid=""
if ! wait "$tpid"; then echo "phase before failed:"; cat "$tmp/before.log"; exit 1; fi
grep -E '^(--- |\s+real_test.go)' "$tmp/before.log"
vgw_start # on the same port and directory
echo "versitygw restarted (PID $vgw_pid) on the same directory"
STRATA_S3_TEST_PHASE=after "$tmp/s3.test" -test.count=1 -test.timeout 3m -test.v -test.run '^TestRealKill$' |
  grep -E '^(\s*--- |\s+\w+(_test)?\.go:[0-9]+|ok|FAIL|PASS)'
cd ../..
if $demo; then
  (cd bench && go build -o "$tmp/flightdemo" ./cmd/flightdemo)
  echo "--- the flight demo killed and restored through s3://$STRATA_S3_TEST_BUCKET/demo-$STRATA_S3_TEST_RUN"
  (cd bench && "$tmp/flightdemo" -kill-after 1700000 -checkpoint-every 300000 \
    -checkpoints "s3://$STRATA_S3_TEST_BUCKET/demo-$STRATA_S3_TEST_RUN?endpoint=$STRATA_S3_TEST_ENDPOINT") |
    grep -E '^(kill|checkpoints|restore time|check)'
  echo "--- the flight demo rescaled 1 -> 2 -> 1 Stores through s3://$STRATA_S3_TEST_BUCKET/rescale-$STRATA_S3_TEST_RUN"
  (cd bench && "$tmp/flightdemo" -rescale 2 -checkpoint-every 300000 \
    -checkpoints "s3://$STRATA_S3_TEST_BUCKET/rescale-$STRATA_S3_TEST_RUN?endpoint=$STRATA_S3_TEST_ENDPOINT") |
    grep -E '^(checkpoints|restore time|check)'
fi
vgw_stop
echo "versitygw stopped"
