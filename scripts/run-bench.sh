#!/bin/sh
# `nanotrace run` against plain fio and strace: fio psync 4 KiB random reads from a file in
# /dev/shm (about a microsecond per read), the three variants interleaved in each round so that
# the machine's changes of speed hit them alike; medians of IOPS and the added cost per read.
#   scripts/run-bench.sh [ROUNDS] [SECONDS]   (build/bin/nanotrace must be built)
set -eu
ROUNDS=${1:-5}
SECONDS_PER_RUN=${2:-2}
BIN=$(dirname "$0")/../build/bin/nanotrace
DIR=$(mktemp -d /dev/shm/run-bench.XXXXXX)
trap 'rm -rf "$DIR"' EXIT
FIO="fio --name=bench --filename=$DIR/file --size=64M --bs=4k --rw=randread --ioengine=psync \
  --time_based --runtime=$SECONDS_PER_RUN --output-format=json"
$FIO --runtime=1 --output="$DIR/warm.json" >/dev/null
for r in $(seq "$ROUNDS"); do
  $FIO --output="$DIR/plain.$r.json"
  "$BIN" run -o "$DIR/t.ntr" -- $FIO --output="$DIR/nanotrace.$r.json" 2>/dev/null
  strace -f -qq -e trace=pread64 -o /dev/null $FIO --output="$DIR/strace.$r.json"
done
/usr/bin/python3 - "$DIR" "$ROUNDS" <<'PY'
import json, statistics, sys
d, rounds = sys.argv[1], int(sys.argv[2])
def iops(kind):
    return [json.load(open(f"{d}/{kind}.{r}.json"))["jobs"][0]["read"]["iops"]
            for r in range(1, rounds + 1)]
plain = statistics.median(iops("plain"))
out = {"rounds": rounds, "plain_iops": plain}
for kind in ("nanotrace", "strace"):
    m = statistics.median(iops(kind))
    out[kind + "_iops"] = m
    out[kind + "_iops_change_pct"] = 100.0 * (m - plain) / plain
    out[kind + "_added_ns_per_read"] = 1e9 / m - 1e9 / plain
print(json.dumps(out, indent=1))
PY
