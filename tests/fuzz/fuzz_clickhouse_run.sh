#!/bin/sh
# Runs the ClickHouse answer fuzzer for a fixed number of inputs (a ctest test), seeded with
# answers of the shapes ClickHouse gives (errors of 18.16, 21 and 23, numbers, TabSeparated
# rows with escapes). The seed is random and printed ("Seed: N"): -seed=N reproduces a run.
# Usage: fuzz_clickhouse_run.sh FUZZER WORK_DIR RUNS
set -eu
fuzzer=$1 work=$2 runs=$3
rm -rf "$work" && mkdir -p "$work/corpus"
c=$work/corpus
# First byte: the HTTP status (low 3 bits) and the TabSeparated width (bits 3-4); then the
# header's value, a NUL, the body.
printf '\004\000Code: 60, e.displayText() = DB::Exception: Table x doesn'"'"'t exist., e.what() = DB::Exception\n' >"$c/e1816"
printf '\005\000Code: 241, e.displayText() = DB::Exception: Memory limit (total) exceeded (version 21.3.20.1 (official build))\n' >"$c/e21"
printf '\005252\000Code: 252. DB::Exception: Too many parts (300). (TOO_MANY_PARTS) (version 23.8.1.1)\nstack\n' >"$c/e23"
printf '\006\000<html><body>502 Bad Gateway</body></html>' >"$c/proxy"
printf '\000\00018446744073709551615\n' >"$c/count"
printf '\030\000events\tdate\tDate\nevents\tkeys\tArray(String)\nx\\ty\t\\x41\\0\t\\\\\n' >"$c/tsv"
cd "$work"
exec "$fuzzer" -runs="$runs" -max_len=2048 -print_final_stats=1 corpus
