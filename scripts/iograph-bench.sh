#!/usr/bin/env bash
# iograph benchmarks (called by `make bench`): writes build/bench/iograph.json with
#   "bench": per shape and backend, median/p99 us per graph, ratio to sync and io_uring_enter
#            calls per graph, 4 KiB reads, 128 nodes, 30 runs, on the loop target (root) or an
#            O_DIRECT file target (otherwise);
#   "nop":   the flat shape on the nop target with the raw NOP cost measured in the same run
#            (scheduling cost per node vs raw NOP);
#   "perf":  `iograph perf --target nop`: IOPS with tracing off/on, added ns per I/O, floor.
# Takes well under a minute on 2 cores. Usage: scripts/iograph-bench.sh [BUILD_DIR]
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
bin="$build/bin/iograph"
out_dir="$build/bench"
out="$out_dir/iograph.json"
[[ -x "$bin" ]] || { echo "iograph-bench: $bin not found; build first" >&2; exit 1; }
mkdir -p "$out_dir"

shapes='flat,chain(8),rope,braid(4),tree,rtree,forkjoin,graph(2,16)'
backends='sync,uring-ready,uring-level,uring-link'
image=""
cleanup() { [[ -n "$image" ]] && rm -f "$image"; return 0; }
trap cleanup EXIT INT TERM

if [[ $(id -u) -eq 0 && -e /dev/loop-control ]]; then
  target=loop
else
  # Not root: a 64 MiB file next to the build, read with O_DIRECT where the file system
  # allows it (iograph reports which in the "target" field).
  image="$out_dir/iograph-bench.img"
  head -c $((64 << 20)) /dev/urandom >"$image"
  target="file:$image"
fi

echo "iograph-bench: shapes on $target" >&2
bench_json="$("$bin" bench --target "$target" --shapes "$shapes" --backends "$backends" \
  --size 128 --block-size 4096 --repeat 30 --qd 128 --json)"
echo "iograph-bench: scheduling cost on nop" >&2
nop_json="$("$bin" bench --target nop --shapes flat --backends uring-ready,uring-level,uring-link \
  --size 128 --repeat 200 --qd 128 --json)"
echo "iograph-bench: perf (tracing off/on, floor)" >&2
perf_json="$("$bin" perf --target nop --qd 4 --time 5 --threads 1 --json)"

printf '{\n"bench": %s,\n"nop": %s,\n"perf": %s\n}\n' "$bench_json" "$nop_json" "$perf_json" >"$out"
echo "iograph-bench: wrote $out" >&2
