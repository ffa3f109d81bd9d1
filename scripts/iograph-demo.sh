#!/usr/bin/env bash
# `make demo`: the main job. iograph runs its benchmark (every shape, every backend) on the
# loop target (a loop device with direct I/O over /dev/shm; a file target when not root),
# traced by nanotrace in flight-recorder mode. Then nanotrace reads the run's segment:
# stats, the per-graph latency by backend (graph_start -> graph_end), and the last events.
set -euo pipefail
cd "$(dirname "$0")/.."
IOG=./build/bin/iograph
NT=./build/bin/nanotrace
image=""
seg=""
cleanup() {
  [ -n "$image" ] && rm -f "$image"
  [ -n "$seg" ] && rm -f "$seg"
  return 0
}
trap cleanup EXIT INT TERM

if [ "$(id -u)" -eq 0 ] && [ -e /dev/loop-control ]; then
  target=loop
else
  echo "(not root or no /dev/loop-control: using an O_DIRECT file target instead of loop)"
  image=$(mktemp -p "${TMPDIR:-/var/tmp}" iograph-demo.XXXXXX)
  head -c $((64 << 20)) /dev/zero >"$image"
  target="file:$image"
fi

echo "== iograph bench --target $target (128 reads of 4 KiB per graph, 30 runs, traced) =="
NANOTRACE_MODE=overwrite NANOTRACE_BUFFER=8M NANOTRACE_KEEP=1 \
  $IOG bench --target "$target" --size 128 --repeat 30 --trace &
pid=$!
wait "$pid"
seg=/dev/shm/nanotrace-$pid

echo
echo "== nanotrace stats (the flight recorder of that run) =="
$NT stats "$seg"
echo
echo "== nanotrace latency: graph_start -> graph_end, by backend (what the rings still hold) =="
$NT latency "$seg" --begin iograph:graph_start --end iograph:graph_end --key graph --by backend
echo
echo "== nanotrace dump: the last graph's first events =="
$NT dump "$seg" --json | tail -n 300 | head -n 12
