#!/usr/bin/env bash
# Ship benchmark: generates gen_trace's trace (EVENTS io:submit/io:complete records on 4
# threads), copies it into a trace file (`nanotrace recover`), then (bench/ship_bench.py, on
# clickhouse-server instances of its own) times `nanotrace ship` into one server against
# clickhouse-client inserting the same rows from Native files, and the cookbook's
# p99-per-node-per-minute query over TRACES copies of the trace on two shards against
# `nanotrace latency` on each of them. Writes BUILD/bench/ship.json.
#
#   scripts/ship-bench.sh [BUILD_DIR] [EVENTS] [ROUNDS] [TRACES]
#   (default: build, 2000000, 5, 10: 20 M events over the two shards)
#   SHIP_BENCH_ONLY=ship_rate or query_time: one of the two parts
#   SHIP_ARGS: more options of the timed ships (e.g. "--connections 1 --compress zstd")
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${2:-2000000}
rounds=${3:-5}
traces=${4:-10}
if ! command -v clickhouse-server >/dev/null || ! command -v clickhouse-client >/dev/null; then
  echo "ship-bench: clickhouse-server and clickhouse-client are needed (make setup)" >&2
  exit 1
fi
cmake --build "$build" --target nanotrace-cli gen_trace -j"${JOBS:-2}" >/dev/null
mkdir -p "$build/bench"
line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=64M NANOTRACE_MODE=discard \
       "$build/bin/gen_trace" --events "$events" --threads 4)
segment=${line##* }
out=$(mktemp -d /tmp/nt-ship-trace.XXXXXX)
trap 'rm -f "$segment"; rm -rf "$out"' EXIT
"$build/bin/nanotrace" recover "$segment" -o "$out/trace.ntr" >/dev/null 2>&1
rm -f "$segment"
/usr/bin/python3 "$root/bench/ship_bench.py" --bin "$build/bin" --source-dir "$root" \
  --trace "$out/trace.ntr" --rounds "$rounds" --traces "$traces" --json "$build/bench/ship.json" \
  ${SHIP_BENCH_ONLY:+--only "$SHIP_BENCH_ONLY"} --ship-args "${SHIP_ARGS:-}"
