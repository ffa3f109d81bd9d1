#!/usr/bin/env bash
# Analysis benchmark: generates the export benchmark's trace (EVENTS io:submit/io:complete
# records on 4 threads) and copies it into a trace file in /dev/shm (`nanotrace recover`:
# what users open; a kept segment could be removed by any `nanotrace clean` meanwhile), then
# times in interleaved rounds (medians) the reader (record by record, and as columns),
# `nanotrace latency`, the Python module loading every event into numpy and into pandas, and
# python3-bt2 iterating the CTF export of the same trace (the bench driver exports it); then
# Python's first load and Perfetto against CTF (below). Writes BUILD/bench/analysis.json,
# python-load.json and perfetto-ctf.txt.
#
#   scripts/analysis-bench.sh [BUILD_DIR] [EVENTS] [ROUNDS]   (default: build, 10000000, 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${2:-10000000}
rounds=${3:-5}
cmake --build "$build" --target nanotrace-cli gen_trace analysis_reader nanotrace_python \
  -j"${JOBS:-2}" >/dev/null
mkdir -p "$build/bench"
# 256 MiB rings hold 10 M records on 4 threads (about 54 bytes each).
line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard \
       "$build/bin/gen_trace" --events "$events" --threads 4)
segment=${line##* }
out=$(mktemp -d /dev/shm/nt-analysis-bench.XXXXXX)
trap 'rm -f "$segment"; rm -rf "$out"' EXIT
echo "trace: $line"
"$build/bin/nanotrace" recover "$segment" -o "$out/trace.ntr" >/dev/null
rm -f "$segment"
/usr/bin/python3 "$root/bench/analysis_bench.py" --bin "$build/bin" \
  --python-path "$build/python" --source "$out/trace.ntr" --rounds "$rounds" \
  --json "$build/bench/analysis.json"
# Where an analyst waits, from the same file: the first `events()` in a fresh process (and warm,
# and C++ read_columns) with the fresh memory per event, and Perfetto's export time against
# CTF's, alternating.
/usr/bin/python3 "$root/bench/python_load_compare.py" --source "$out/trace.ntr" \
  --build "$build" --rounds "$rounds" --json "$build/bench/python-load.json"
"$root/scripts/perfetto-ctf.sh" "$build" "$out/trace.ntr" "$rounds" |
  tee "$build/bench/perfetto-ctf.txt"
echo "wrote $build/bench/analysis.json, python-load.json, perfetto-ctf.txt"
