#!/bin/sh
# Runs one fuzzer for a fixed number of inputs (a ctest test, tests/fuzz/CMakeLists.txt) from
# a seed corpus: a committed directory of small inputs (and DIR.dict, a libFuzzer dictionary,
# beside it if there is one), or for the reader's fuzzers one built from a real traced
# process (`segment`: its segment, kept on exit; `pairs`: segments of a program whose records
# pair, for the live view's follower; `file`: trace files recovered from it;
# `kernel`: trace files recorded with kernel events, which needs root and tracefs: without
# them the test fails, it does not pass having fuzzed nothing).
# The seed is random and printed ("Seed: N"): -seed=N reproduces a run.
# Usage: run_fuzz.sh FUZZER BIN_DIR WORK_DIR segment|pairs|file|kernel|SEED_DIR RUNS [MAX_LEN]
# Exit status: the fuzzer's (non-zero when it found a crash; the crashing input is kept in
# WORK_DIR).
set -eu
fuzzer=$1 bin=$2 work=$3 seed=$4 runs=$5 max_len=${6:-}
rm -rf "$work" && mkdir -p "$work/corpus"
case $seed in
  kernel)
    mountpoint -q /sys/kernel/tracing || mount -t tracefs nodev /sys/kernel/tracing
    for k in sched block,io_uring; do
      "$bin/nanotrace" run --kernel "$k" --kernel-buffer 16 -o "$work/corpus/$k.ntr" -- \
        "$bin/nanotrace_test_producer" --threads 2 --events 300 </dev/null >/dev/null ||
        { echo "run_fuzz.sh: cannot record kernel events ($k)" >&2; exit 1; }
    done
    cd "$work"
    exec "$fuzzer" -runs="$runs" -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1 corpus
    ;;
  pairs)
    # Segments whose records pair: a key of one number with pairs crossing threads, and a key
    # of a string and a number.
    for scenario in "handoff 2 100 3" "strings 60"; do
      # shellcheck disable=SC2086  # the scenario's words are its arguments
      pid=$(NANOTRACE_KEEP=1 NANOTRACE_THREADS=4 NANOTRACE_BUFFER=64K \
              "$bin/nanotrace_pairs_producer" $scenario </dev/null | head -1 | cut -d' ' -f2)
      mv "/dev/shm/nanotrace-$pid" "$work/corpus/${scenario%% *}"
    done
    cd "$work"
    exec "$fuzzer" -runs="$runs" -rss_limit_mb=2048 -max_len=1048576 \
      -print_final_stats=1 corpus
    ;;
  segment | file)
    pid=$(NANOTRACE_KEEP=1 NANOTRACE_THREADS=2 NANOTRACE_BUFFER=64K \
          "$bin/nanotrace_test_producer" --threads 2 --events 300 --hold </dev/null |
          head -1 | cut -d' ' -f2)
    seg=/dev/shm/nanotrace-$pid
    if [ "$seed" = segment ]; then
      cp "$seg" "$work/corpus/segment"
    else
      "$bin/nanotrace" recover "$seg" -o "$work/corpus/plain.ntr" 2>/dev/null
      "$bin/nanotrace" recover "$seg" -o "$work/corpus/zstd.ntr" --compress 2>/dev/null
      # Merged files: two nodes of one boot (shared clock), and one aligned through the wall
      # clock (its records' clock values mapped as they are read).
      NANOTRACE_NODE_NAME=far NANOTRACE_NODE_BOOT_ID=another-boot \
        "$bin/nanotrace" recover "$seg" -o "$work/far.ntr" 2>/dev/null
      "$bin/nanotrace" merge "$work/corpus/plain.ntr" "$work/corpus/zstd.ntr" \
        -o "$work/corpus/merged.ntr" >/dev/null
      "$bin/nanotrace" merge "$work/corpus/plain.ntr" "$work/far.ntr" \
        -o "$work/corpus/merged-far.ntr" >/dev/null
      rm -f "$work/far.ntr"
    fi
    rm -f "$seg"
    cd "$work"
    exec "$fuzzer" -runs="$runs" -rss_limit_mb=2048 -max_len=1048576 \
      -print_final_stats=1 corpus
    ;;
esac
[ -d "$seed" ] || { echo "run_fuzz.sh: no seed corpus $seed" >&2; exit 2; }
cp "$seed"/* "$work/corpus/"
set -- -runs="$runs" -rss_limit_mb=2048 -print_final_stats=1
[ -f "${seed%/}.dict" ] && set -- "$@" -dict="${seed%/}.dict"
[ -n "$max_len" ] && set -- "$@" -max_len="$max_len"
cd "$work"
exec "$fuzzer" "$@" corpus
