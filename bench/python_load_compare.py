"""Loading a trace into numpy, builds side by side: for each build directory given (its
python/ module and bin/analysis_reader), in interleaved rounds (A B A B ...), each load in a
fresh process: the first `nanotrace.open(SOURCE).events()` (what a user's script does first),
a second one in the same process after the first is dropped ("warm": the module imported,
the file's pages cached, the process's allocator used once), and the C++ `read_columns()`
(analysis_reader --mode columns). Reports per build the median events/s (wall and CPU) and
the fresh memory a first load takes per event (growth of the resident set), and the median
of the per-round ratios of each build to the first.

    python_load_compare.py --source FILE --build OLD_BUILD --build NEW_BUILD
                           [--rounds N] [--json OUT]

Run it niced on a shared machine: the machine's speed changes between rounds, the ratios
within a round are the figure.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

PY_LOAD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import nanotrace
source = sys.argv[2]
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
out = {}
for name in ("first", "warm"):
    trace = nanotrace.open(source)
    r0, t0, c0 = rss(), time.perf_counter(), cpu()
    tables = trace.events()
    t1, c1, r1 = time.perf_counter(), cpu(), rss()
    rows = sum(len(t["time_ns"]) for t in tables.values())
    out[name] = {"rows": rows, "seconds": t1 - t0, "cpu_seconds": c1 - c0,
                 "fresh_bytes": r1 - r0}
    del tables, trace
print(json.dumps(out))
"""


def python_load(build, source):
    r = subprocess.run([sys.executable, "-c", PY_LOAD, os.path.join(build, "python"), source],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def cpp_load(build, source):
    r = subprocess.run([os.path.join(build, "bin", "analysis_reader"), "--source", source,
                        "--mode", "columns"], capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", action="append", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    kinds = ("first", "warm", "read_columns")
    runs = {b: {k: [] for k in kinds} for b in args.build}
    for r in range(args.rounds):
        for b in args.build:
            p = python_load(b, args.source)
            runs[b]["first"].append(p["first"])
            runs[b]["warm"].append(p["warm"])
            c = cpp_load(b, args.source)
            runs[b]["read_columns"].append({"rows": c["records"], "seconds": c["seconds"],
                                            "cpu_seconds": c["cpu_seconds"]})
        line = "  ".join(f"{b}: "
                         + " ".join(f"{k} {runs[b][k][-1]['rows'] / runs[b][k][-1]['seconds'] / 1e6:.1f}M"
                                    for k in kinds) for b in args.build)
        print(f"round {r + 1}: {line}", flush=True)
    report = {}
    base = args.build[0]
    for b in args.build:
        report[b] = {}
        for k in kinds:
            xs = runs[b][k]
            entry = {
                "events_per_s": statistics.median(x["rows"] / x["seconds"] for x in xs),
                "events_per_cpu_s": statistics.median(x["rows"] / x["cpu_seconds"] for x in xs),
                "range": [min(x["rows"] / x["seconds"] for x in xs),
                          max(x["rows"] / x["seconds"] for x in xs)],
                "ratio_to_first_build": statistics.median(
                    runs[base][k][i]["seconds"] / xs[i]["seconds"] for i in range(len(xs))),
                "cpu_ratio_to_first_build": statistics.median(
                    runs[base][k][i]["cpu_seconds"] / xs[i]["cpu_seconds"]
                    for i in range(len(xs))),
            }
            if "fresh_bytes" in xs[0]:
                entry["fresh_bytes_per_event"] = statistics.median(
                    x["fresh_bytes"] / x["rows"] for x in xs)
            report[b][k] = entry
    for b in args.build:
        print(b)
        for k in kinds:
            e = report[b][k]
            fresh = (f", {e['fresh_bytes_per_event']:.1f} B/event fresh"
                     if "fresh_bytes_per_event" in e else "")
            print(f"  {k:13} {e['events_per_s'] / 1e6:6.1f} M/s wall "
                  f"({e['range'][0] / 1e6:.1f}-{e['range'][1] / 1e6:.1f}), "
                  f"{e['events_per_cpu_s'] / 1e6:6.1f} M/s CPU; "
                  f"x{e['ratio_to_first_build']:.2f} wall, x{e['cpu_ratio_to_first_build']:.2f} "
                  f"CPU against the first build{fresh}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"source": args.source, "rounds": args.rounds, "builds": report}, f,
                      indent=1)


if __name__ == "__main__":
    main()
