#!/usr/bin/env bash
# Diff benchmark: generates two traces of EVENTS io:submit/io:complete records on 4 threads
# (the analysis benchmark's trace, twice: two runs of one program), copies them into trace
# files in /dev/shm, then times in interleaved rounds (medians) `nanotrace latency` on each
# of them against `nanotrace diff` of the two (which compares the same pair, inferred, plus
# counts and rates per event). Writes BUILD/bench/diff.json.
#
#   scripts/diff-bench.sh [BUILD_DIR] [EVENTS] [ROUNDS]   (default: build, 10000000, 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${2:-10000000}
rounds=${3:-5}
cmake --build "$build" --target nanotrace-cli gen_trace -j"${JOBS:-2}" >/dev/null
mkdir -p "$build/bench"
out=$(mktemp -d /dev/shm/nt-diff-bench.XXXXXX)
segments=()
trap 'rm -f "${segments[@]}"; rm -rf "$out"' EXIT
for side in a b; do
  # 256 MiB rings hold 10 M records on 4 threads (about 54 bytes each).
  line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard \
         "$build/bin/gen_trace" --events "$events" --threads 4)
  segment=${line##* }
  segments+=("$segment")
  echo "trace $side: $line"
  "$build/bin/nanotrace" recover "$segment" -o "$out/$side.ntr" >/dev/null
  rm -f "$segment"
done
/usr/bin/python3 "$root/bench/diff_bench.py" --nanotrace "$build/bin/nanotrace" \
  --a "$out/a.ntr" --b "$out/b.ntr" --rounds "$rounds" --json "$build/bench/diff.json"
echo "wrote $build/bench/diff.json"
