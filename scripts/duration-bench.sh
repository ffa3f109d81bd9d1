#!/usr/bin/env bash
# Duration triggers' figures (bench/duration_bench.cc), then the alternative users have today:
# `record` the same flow of 2 M pairs/s, then `latency` over the file to find the slow pair.
#   scripts/duration-bench.sh [--quick]      results in build/bench/duration*.json
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=build/bin
OUT=build/bench
mkdir -p "$OUT"
QUICK=${1:-}
SECONDS_FLOW=4
[ "$QUICK" = --quick ] && SECONDS_FLOW=1

"$BIN/duration_bench" $QUICK --json "$OUT/duration.json" >/dev/null
echo "in-process pairing: $OUT/duration.json"

# The alternative: record the flow (one slow pair in the middle), then find it afterwards.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cpu_of() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
NANOTRACE_NAME=duration-flow "$BIN/duration_bench" --workload "$SECONDS_FLOW" >"$T/workload.json" &
W=$!
until "$BIN/nanotrace" list 2>/dev/null | grep -q ' duration-flow '; do sleep 0.01; done
start=$(date +%s.%N)
/usr/bin/time -f '%U %S' -o "$T/record.time" \
  "$BIN/nanotrace" record name:duration-flow -o "$T/flow.ntr" >/dev/null 2>&1
wait "$W"
recorded=$(date +%s.%N)
/usr/bin/time -f '%e %U %S' -o "$T/latency.time" \
  "$BIN/nanotrace" latency "$T/flow.ntr" --begin bench:begin --end bench:end --key req --top 1 \
  >"$T/latency.out"
found=$(date +%s.%N)
/usr/bin/python3 - "$T" "$start" "$recorded" "$found" "$OUT/duration-record.json" <<'PY'
import json, sys
d, start, recorded, found, out = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5]
rec_user, rec_sys = map(float, open(f"{d}/record.time").read().split()[-2:])
lat_wall, lat_user, lat_sys = map(float, open(f"{d}/latency.time").read().split()[-3:])
work = json.load(open(f"{d}/workload.json"))
wall = recorded - start
result = {
    "pairs": work["pairs"],
    "recording_s": wall,
    "recorder_cpu_pct_of_one_core": (rec_user + rec_sys) / wall * 100,
    "latency_wall_s": lat_wall,
    "latency_cpu_s": lat_user + lat_sys,
    "slow_pair_found_after_s": found - start,
    "latency_top": open(f"{d}/latency.out").read().strip().splitlines()[-3:],
}
json.dump(result, open(out, "w"), indent=1)
print(json.dumps(result, indent=1))
PY
