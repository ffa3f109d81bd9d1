#!/usr/bin/env bash
# Export benchmark: generates a 10 M-event trace (4 threads x 256 MiB rings, kept in
# /dev/shm), then times the reader and `nanotrace export` to every format, with the peak
# RSS of each export process. Writes BUILD/bench/export.json.
#
#   scripts/export-bench.sh [BUILD_DIR] [EVENTS]     (default: build, 10000000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${2:-10000000}
cmake --build "$build" --target nanotrace-cli gen_trace export_bench -j"${JOBS:-2}" >/dev/null
mkdir -p "$build/bench"
line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard \
       "$build/bin/gen_trace" --events "$events" --threads 4)
segment=${line##* }
trap 'rm -f "$segment"; rm -rf "$build/bench/export-out"' EXIT
echo "trace: $line"
"$build/bin/export_bench" --cli "$build/bin/nanotrace" --source "$segment" \
  --out "$build/bench/export-out" --json "$build/bench/export.json"
echo "wrote $build/bench/export.json"
