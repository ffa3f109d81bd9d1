#!/usr/bin/env bash
# `make demo`: the main job. Runs the traced storage example, inspects it live from another
# process with the nanotrace CLI, and shows its stats and first events. (Once iograph's
# demo script exists, it runs that instead.)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x scripts/iograph-demo.sh ]; then exec scripts/iograph-demo.sh; fi
NT=./build/bin/nanotrace
out=$(mktemp)
trap 'rm -f "$out"; [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null; true' EXIT
./build/bin/storage_sim --threads 2 --seconds 4 >"$out" &
pid=$!
sleep 1
echo "== nanotrace list =="
$NT list
echo "== nanotrace events $pid =="
$NT events "$pid"
echo "== nanotrace disable $pid debug; enable $pid debug =="
$NT disable "$pid" debug
$NT enable "$pid" debug
echo "== nanotrace stats $pid =="
$NT stats "$pid"
echo "== nanotrace dump $pid (first 15 events) =="
$NT dump "$pid" -n 15
wait "$pid"
pid=
