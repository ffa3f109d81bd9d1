#!/usr/bin/env bash
# `make bench`: every benchmark, results in build/bench/. Ratios are measured within one run
# with both sides interleaved (this machine's speed changes state every second or so).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/bench

echo "== tracepoint cost vs floor (paired bursts) =="
./build/bin/tracepoint_bench --summary=build/bench/summary.json
echo "== tracepoint cost, Google Benchmark (random interleaving, 10 repetitions) =="
./build/bin/tracepoint_bench --benchmark_enable_random_interleaving=true \
  --benchmark_repetitions=10 --benchmark_min_time=0.05 --benchmark_report_aggregates_only=true \
  --benchmark_out=build/bench/tracepoint_gbench.json --benchmark_out_format=json

echo "== hiccups: start-up, first event of a new thread, per-event tail, block starts =="
./build/bin/hiccups --json build/bench/hiccups.json >/dev/null
echo "== hiccups beside LTTng-UST's: start-up without and with a session, first events, tail =="
./build/bin/lttng_hiccups --json build/bench/lttng-hiccups.json >/dev/null ||
  echo "lttng_hiccups: not measured (see build/bench/lttng-hiccups.json)"
echo "== trigger lag: records after the match beyond the window, 200 runs, 32 threads =="
NANOTRACE_BUFFER=1M NANOTRACE_THREADS=64 ./build/bin/nanotrace_trigger_lag --runs 200 \
  --threads 32 --window 1000 --json build/bench/trigger.json | tail -1

echo "== top: CPU of one frame over 50 traced processes, three rates interleaved =="
./build/bin/top_bench --processes 50 --rounds 9 --json build/bench/top.json

for extra in scripts/record-bench.sh scripts/iograph-bench.sh scripts/export-bench.sh \
    scripts/analysis-bench.sh scripts/diff-bench.sh scripts/duration-bench.sh \
    scripts/ctf-floor.sh scripts/report-bench.sh scripts/kernel-bench.sh scripts/ship-bench.sh; do
  if [ -x "$extra" ]; then
    echo "== $extra =="
    "$extra"
  fi
done
echo "== scripts/run-bench.sh: fio under nanotrace run, plain and under strace =="
./scripts/run-bench.sh 7 2 >build/bench/run.json && cat build/bench/run.json
echo "== scripts/fleet_bench.py: fleet freeze latency vs the broker's floor, idle CPU, collection =="
if [ "$(id -u)" = 0 ] && command -v nats-server >/dev/null; then
  /usr/bin/python3 scripts/fleet_bench.py --out build/bench/fleet.json
else
  echo "fleet_bench: not measured (needs root and nats-server)"
fi
echo "results: $(ls build/bench/*.json | tr '\n' ' ')"
