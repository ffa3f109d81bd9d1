#!/bin/bash
# The trigger window's bound over many descheduled runs beside a build: the trigger-lag
# program (tests/runtime/helpers/trigger_lag.cc: 32 threads on one CPU, the matching one at
# SCHED_IDLE, a window of 1,000 records, bound 1,032) for RUNS runs in chunks of 250, with
# rings of RINGS bytes (default "64K 1M", alternating as trigger_safety_test does: a 1 MiB run
# takes about 6 times as long, most of it reading 32 rings), while JOBS compilers of
# this project's sources run in a loop (a build's load: CPU, memory, short processes coming
# and going). The program at nice 10 and the compilers at nice BUILD_NICE (default 10: the
# same, as a build started beside it would be), so the machine's other work comes first.
#
#   scripts/trigger-window-stress.sh [BUILD_DIR] [RUNS] [JOBS]
#
# RINGS="64K" uses small rings alone. INJECT=1 passes --inject: the descheduling that broke the
# bound, forced in every run through the runtime's test hook. LIB_DIR=dir runs the program against another libnanotrace.so (LD_LIBRARY_PATH wins over
# its RUNPATH): how the runtime before a change is measured with the same program. Prints
# each run over the bound or whose trigger names another run's record (a firing of no match:
# most stay within the bound, and go unseen by it), then the counts; exits 1 if any.
set -u
BUILD=$(realpath "${1:-build}")
RUNS=${2:-10000}
JOBS=${3:-$(nproc)}
SRC=$(cd "$(dirname "$0")/.." && pwd)
LAG=$BUILD/bin/nanotrace_trigger_lag
[ -x "$LAG" ] || { echo "no $LAG (build it first)"; exit 2; }
T=$(mktemp -d /tmp/nanotrace-stress.XXXXXX)
trap 'touch "$T/stop"; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
trap 'exit 143' TERM INT
read -r -a RING_SIZES <<<"${RINGS:-64K 1M}"

# The build beside: each job compiles the project's sources one after another, forever.
build_loop() {
  while [ ! -e "$T/stop" ]; do
    for f in "$SRC"/src/reader/*.cc "$SRC"/src/analysis/*.cc; do
      [ -e "$T/stop" ] && break
      nice -n "${BUILD_NICE:-10}" g++ -std=c++20 -O2 -I"$SRC/include" -I"$SRC/src" -c "$f" -o /dev/null \
        2>/dev/null
    done
  done
}
for _ in $(seq "$JOBS"); do build_loop & done

done_runs=0 over=0 wrong=0 max_excess=-1000000 chunk=0
while [ "$done_runs" -lt "$RUNS" ]; do
  n=$((RUNS - done_runs < 250 ? RUNS - done_runs : 250))
  ring=${RING_SIZES[$((chunk % ${#RING_SIZES[@]}))]}
  LD_LIBRARY_PATH=${LIB_DIR:-} NANOTRACE_BUFFER=$ring NANOTRACE_THREADS=64 \
    nice -n 10 "$LAG" --runs "$n" --threads 32 --window 1000 ${INJECT:+--inject} >"$T/out" \
    2>"$T/err"
  status=$?
  seen=0
  while read -r _ run _ after _ bound _ match; do
    seen=$((seen + 1))
    excess=$((after - 1000))
    [ "$excess" -gt "$max_excess" ] && max_excess=$excess
    if [ "$after" -gt "$bound" ]; then
      over=$((over + 1))
      echo "ring $ring chunk $chunk run $run: $after records after the match, bound $bound"
    fi
    if [ "${match:-0}" != 0 ] && [ "$match" != "$run" ]; then  # 0: not published yet
      wrong=$((wrong + 1))
      echo "ring $ring chunk $chunk run $run: the trigger names run ${match:-?}'s record"
    fi
  done < <(grep '^run ' "$T/out")
  if [ "$status" != 0 ] || [ "$seen" != "$n" ]; then
    echo "ring $ring chunk $chunk: exit $status, $seen of $n runs: $(tail -2 "$T/err")"
  fi
  done_runs=$((done_runs + seen))
  chunk=$((chunk + 1))
  echo "$(date +%T) $done_runs runs, $over over the bound, $wrong naming another record" >&2
  [ "$seen" = 0 ] && break
done
echo "$done_runs runs: $over over the bound (max excess over the window $max_excess)," \
  "$wrong naming another run's record"
[ "$over" = 0 ] && [ "$wrong" = 0 ]
