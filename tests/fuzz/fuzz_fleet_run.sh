#!/bin/sh
# Runs the fleet message fuzzer on one message type for a fixed number of inputs (a ctest
# test), from a copy of the type's seed corpus (the fuzzer adds the inputs it finds to it). The
# seed is random and printed ("Seed: N"): -seed=N reproduces a run. Messages are small: inputs
# up to 64 KiB.
# Usage: fuzz_fleet_run.sh FUZZER TYPE SEED_DIR WORK_DIR RUNS
# Exit status: the fuzzer's (non-zero when it found a crash; the input is kept in WORK_DIR).
set -eu
fuzzer=$1 type=$2 seeds=$3 work=$4 runs=$5
rm -rf "$work" && mkdir -p "$work/corpus"
cp "$seeds"/* "$work/corpus/"
cd "$work"
FUZZ_FLEET_MESSAGE=$type exec "$fuzzer" -runs="$runs" -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 corpus
