#!/usr/bin/env bash
# The one home of the real S3-compatible server the tests and benchmarks run against:
# versitygw (pinned below, installed with go install into a cache directory the first time),
# posix back-end on a temporary directory, listening on 127.0.0.1 only, started and stopped by
# its PID.
#
# Sourced (scripts/s3-real.sh), it defines, for a script running under `set -euo pipefail`:
#   vgw_install        installs the pinned version into $vgw_bin if it is not there yet
#   vgw_init           vgw_install, a temporary directory $vgw_tmp (data in $vgw_tmp/data,
#                      log in $vgw_tmp/server.log) and the credentials in AWS_ACCESS_KEY_ID and
#                      AWS_SECRET_ACCESS_KEY; the caller's EXIT trap runs vgw_cleanup
#   vgw_start          starts the server on $vgw_port if set (a restart on the same directory),
#                      else on a free port that it stores in $vgw_port; returns once the server
#                      accepts connections, its PID in $vgw_pid and its URL in $vgw_endpoint
#   vgw_stop           stops the server it started (by $vgw_pid), if any, and waits for it
#   vgw_cleanup        vgw_stop, then removes $vgw_tmp
#
# Run, it starts a server, runs a command with the server in its environment, stops the server
# and exits with the command's status:
#   scripts/versitygw.sh run CMD [ARGS…]
# The command sees STRATA_S3_BENCH_ENDPOINT (the server's URL), STRATA_S3_BENCH_SERVER
# ("versitygw v1.8.0"), and the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; it
# may create buckets. bench/cmd/results -only s3 runs the S3 benchmark rows this way.

VGW_VERSION=v1.8.0
vgw_bin="${XDG_CACHE_HOME:-$HOME/.cache}/strata/versitygw-$VGW_VERSION"
vgw_pid=""
vgw_port=""
vgw_endpoint=""
vgw_tmp=""

vgw_install() {
  if [ ! -x "$vgw_bin/versitygw" ]; then
    echo "installing versitygw $VGW_VERSION into $vgw_bin" >&2
    GOBIN="$vgw_bin" GOFLAGS="${GOFLAGS:-} -buildvcs=false" \
      go install "github.com/versity/versitygw/cmd/versitygw@$VGW_VERSION" >&2
  fi
}

vgw_init() {
  vgw_install
  vgw_tmp=$(mktemp -d)
  mkdir -p "$vgw_tmp/data"
  export AWS_ACCESS_KEY_ID=strata-test AWS_SECRET_ACCESS_KEY=strata-test-secret
}

vgw_stop() { # the server we started, by its PID
  if [ -n "$vgw_pid" ]; then
    kill "$vgw_pid" 2>/dev/null || true
    wait "$vgw_pid" 2>/dev/null || true
    vgw_pid=""
  fi
}

vgw_cleanup() {
  vgw_stop
  if [ -n "$vgw_tmp" ]; then rm -rf "$vgw_tmp"; fi
}

vgw_start() {
  local tries=0 p
  while :; do
    p=${vgw_port:-$((20000 + RANDOM % 20000))}
    ROOT_ACCESS_KEY="$AWS_ACCESS_KEY_ID" ROOT_SECRET_KEY="$AWS_SECRET_ACCESS_KEY" \
      "$vgw_bin/versitygw" --port "127.0.0.1:$p" --quiet posix "$vgw_tmp/data" >>"$vgw_tmp/server.log" 2>&1 &
    vgw_pid=$!
    for _ in $(seq 100); do
      if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
        vgw_port=$p
        vgw_endpoint="http://127.0.0.1:$p"
        return 0
      fi
      kill -0 "$vgw_pid" 2>/dev/null || break
      sleep 0.1
    done
    vgw_stop
    tries=$((tries + 1))
    if [ $tries -ge 5 ]; then echo "versitygw did not start:" >&2; cat "$vgw_tmp/server.log" >&2; exit 1; fi
  done
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  if [ "${1:-}" != run ] || [ $# -lt 2 ]; then
    echo "usage: $0 run CMD [ARGS…]" >&2
    exit 2
  fi
  shift
  trap vgw_cleanup EXIT
  vgw_init
  vgw_start
  echo "versitygw $VGW_VERSION (PID $vgw_pid) on 127.0.0.1:$vgw_port, data in $vgw_tmp/data" >&2
  status=0
  STRATA_S3_BENCH_ENDPOINT="$vgw_endpoint" STRATA_S3_BENCH_SERVER="versitygw $VGW_VERSION" "$@" || status=$?
  vgw_stop
  echo "versitygw stopped" >&2
  exit $status
fi
