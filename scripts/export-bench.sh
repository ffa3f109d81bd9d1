#!/usr/bin/env bash
# Export benchmark: generates a 10 M-event trace (4 threads x 256 MiB rings, kept in
# /dev/shm), then times the reader and `nanotrace export` to every format (7 interleaved
# rounds, medians), with the peak RSS of each export process. Writes BUILD/bench/export.json;
# then the same for CTF from a trace file of the same records (`nanotrace recover`):
# BUILD/bench/export-file.json. Output goes to a tmpfs directory, so that the figures are the
# exporter's and not the disk's write-back.
#
#   scripts/export-bench.sh [BUILD_DIR] [EVENTS]     (default: build, 10000000)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${2:-10000000}
cmake --build "$build" --target nanotrace-cli gen_trace export_bench -j"${JOBS:-2}" >/dev/null
mkdir -p "$build/bench"
out=$(mktemp -d /dev/shm/nt-export-bench.XXXXXX)
line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard \
       "$build/bin/gen_trace" --events "$events" --threads 4)
segment=${line##* }
trap 'rm -f "$segment"; rm -rf "$out"' EXIT
echo "trace: $line"
"$build/bin/export_bench" --cli "$build/bin/nanotrace" --source "$segment" --repeat 7 \
  --out "$out" --json "$build/bench/export.json"
echo "wrote $build/bench/export.json"
# The same records from a trace file (what `nanotrace record` leaves): reader and CTF.
"$build/bin/nanotrace" recover "$segment" -o "$out/trace.ntr" >/dev/null
"$build/bin/export_bench" --cli "$build/bin/nanotrace" --source "$out/trace.ntr" --repeat 7 \
  --out "$out/from-file" --json "$build/bench/export-file.json" --formats ctf
echo "wrote $build/bench/export-file.json"
