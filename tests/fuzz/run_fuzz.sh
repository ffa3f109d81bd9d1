#!/bin/sh
# Runs one reader fuzzer for a fixed number of inputs (a ctest test): builds a seed corpus
# from a real traced process (its segment, kept on exit, and trace files recovered from it),
# then fuzzes. The seed is random and printed ("Seed: N"): -seed=N reproduces a run.
# Usage: run_fuzz.sh FUZZER BIN_DIR WORK_DIR segment|file RUNS
# Exit status: the fuzzer's (non-zero when it found a crash; the crashing input is kept in
# WORK_DIR).
set -eu
fuzzer=$1 bin=$2 work=$3 kind=$4 runs=$5
rm -rf "$work" && mkdir -p "$work/corpus"
pid=$(NANOTRACE_KEEP=1 NANOTRACE_THREADS=2 NANOTRACE_BUFFER=64K \
      "$bin/nanotrace_test_producer" --threads 2 --events 300 --hold </dev/null | head -1 | cut -d' ' -f2)
seg=/dev/shm/nanotrace-$pid
if [ "$kind" = segment ]; then
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
