#!/usr/bin/env bash
# `nanotrace report` against its floors: the time to write the HTML report of the export
# benchmark's trace (gen_trace, 4 threads, kept in /dev/shm), beside the time `nanotrace
# stats` takes to read the same trace once and the time `nanotrace latency` takes to match
# its pairs (the report reads twice and matches once), in interleaved rounds (medians), with
# the report's size. Writes BUILD/bench/report.json.
#
#   scripts/report-bench.sh [BUILD_DIR] [EVENTS] [ROUNDS]     (default: build, 10000000, 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${2:-10000000}
rounds=${3:-5}
cmake --build "$build" --target nanotrace-cli gen_trace -j"${JOBS:-2}" >/dev/null
mkdir -p "$build/bench"
line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard \
       "$build/bin/gen_trace" --events "$events" --threads 4)
segment=${line##* }
out=$(mktemp -d /dev/shm/nt-report-bench.XXXXXX)
trap 'rm -f "$segment"; rm -rf "$out"' EXIT
echo "trace: $line"
/usr/bin/python3 - "$build/bin/nanotrace" "$segment" "$out" "$build/bench/report.json" \
  "$rounds" <<'PY'
import json, os, statistics, subprocess, sys, time
cli, seg, out, result, rounds = sys.argv[1:]
def timed(args):
    t = time.monotonic()
    p = subprocess.run(args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    return time.monotonic() - t, p.stderr.decode()
report_s, stats_s, latency_s, size = [], [], [], 0
for i in range(int(rounds)):
    s, _ = timed([cli, "stats", seg])
    stats_s.append(s)
    l, _ = timed([cli, "latency", seg, "--begin", "io:submit", "--end", "io:complete",
                  "--key", "req"])
    latency_s.append(l)
    page = os.path.join(out, "report.html")
    if os.path.exists(page):
        os.unlink(page)
    r, err = timed([cli, "report", seg, "-o", page])
    report_s.append(r)
    size = os.path.getsize(page)
records = int(err.split(": ")[1].split(" records")[0])
mr, ms, ml = (statistics.median(x) for x in (report_s, stats_s, latency_s))
print(f"{records} records: report median {mr:.2f} s ({records / mr / 1e6:.2f} M records/s), "
      f"stats (one read) {ms:.2f} s, latency (one read, matching) {ml:.2f} s; "
      f"report/stats {mr / ms:.2f}, report/latency {mr / ml:.2f}; page {size / 1e6:.2f} MB")
print("report/stats per round:", " ".join(f"{a / b:.2f}" for a, b in zip(report_s, stats_s)))
print("report/latency per round:",
      " ".join(f"{a / b:.2f}" for a, b in zip(report_s, latency_s)))
json.dump({"records": records, "report_s": report_s, "stats_s": stats_s,
           "latency_s": latency_s, "median_report_s": mr, "median_stats_s": ms,
           "median_latency_s": ml, "page_bytes": size, "records_per_s": records / mr},
          open(result, "w"), indent=2)
PY
echo "wrote $build/bench/report.json"
