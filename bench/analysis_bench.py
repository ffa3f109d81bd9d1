"""Analysis benchmark driver (scripts/analysis-bench.sh): on one trace, in interleaved rounds,
times the reader record by record, as reused batches of columns and as columns of the whole
trace (bench/analysis_reader), `nanotrace latency`, the Python module loading every event
into numpy and into pandas, and, beside them, python3-bt2 (babeltrace2's bindings: what users
have today) iterating the CTF export of the same trace and reading every event's time, name
and fields into Python values; reports each one's median events/s and writes them as JSON.

    analysis_bench.py --bin BUILD/bin --python-path BUILD/python --source SRC --json FILE
                      [--rounds N] [--pair BEGIN,END,KEY] [--bt2-events N]

bt2 reads several hundred times slower than the rest, so it stops after --bt2-events events
(default 250,000; 0: all of them): its rate is the figure, not its time for the whole trace.
Without python3-bt2 installed its measurement is left out, with a note.

Each measurement runs in its own process, so that one's memory does not weigh on the next.
The reader and Python figures time the read alone (after the trace is open and the module
imported); `latency` is the whole command, as a user runs it. Each figure is given for wall
time and for CPU time (user + system): on a shared machine the wall time also counts the
waits for a CPU; and for the first round (after the trace was made) and the median of the
rounds after it. The numpy load also reports the bytes its tables hold and the growth of
the process's resident memory, per event; numpy_prefaulted first writes as many fresh bytes
as that load took (the allocation time alone: `alloc_seconds`), frees them, then loads into
memory the VM has backed already (where fresh memory is the limit, the difference shows it).
"""

import argparse
import json
import os
import resource
import statistics
import shutil
import subprocess
import sys
import tempfile
import time

PY_LOAD = r"""
import json, resource, sys, time
import numpy as np
import nanotrace
mode, source, fresh_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
trace = nanotrace.open(source)
if mode not in ("numpy", "numpy_prefaulted"):
    import pandas
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()
def held(tables):
    # Bytes the tables hold: a column of one repeated value (stride 0) holds one; a
    # dictionary-encoded column its codes and its distinct strings once (objects included).
    total, seen = 0, set()
    for t in tables.values():
        for c in t.values():
            for a in ((c.codes, c.categories) if hasattr(c, "categories") else (c,)):
                if id(a) in seen:
                    continue
                seen.add(id(a))
                total += a.itemsize if a.strides == (0,) else a.nbytes
                if a.dtype == object and a is not c:
                    total += sum(sys.getsizeof(v) for v in a.tolist())
    return total
out = {}
if mode == "numpy_prefaulted":
    # The allocation alone: as many fresh bytes as a load takes, written once (the kernel and
    # the hypervisor back each new page); then freed, so the load that follows gets memory
    # this VM has backed already.
    t0 = time.perf_counter()
    block = np.empty(fresh_bytes, dtype=np.uint8)
    block.fill(1)
    out["alloc_seconds"] = time.perf_counter() - t0
    del block
r0 = rss()
t0, c0 = time.perf_counter(), cpu()
if mode in ("numpy", "numpy_prefaulted"):
    tables = trace.events()
    rows = sum(len(t["time_ns"]) for t in tables.values())
elif mode == "pandas":
    tables = trace.events(pandas=True)
    rows = sum(len(t) for t in tables.values())
else:
    rows = len(trace.to_pandas())
out.update({"records": rows, "seconds": time.perf_counter() - t0, "cpu_seconds": cpu() - c0,
            "rss_bytes": rss() - r0})
if mode in ("numpy", "numpy_prefaulted"):
    out["table_bytes"] = held(tables)
print(json.dumps(out))
"""


# bt2's iterator merges the CTF streams by time, as our reader does; a field becomes a Python
# value as numpy's columns hold it (int, float, str, bool).
BT2_LOAD = r"""
import json, resource, sys, time
import bt2
source, limit = sys.argv[1], int(sys.argv[2])
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
def converter(field):
    for kind, to in ((bt2._BoolFieldConst, bool), (bt2._IntegerFieldConst, int),
                     (bt2._RealFieldConst, float), (bt2._StringFieldConst, str)):
        if isinstance(field, kind):
            return to
    return lambda f: f
convert = {}
event_message = bt2._EventMessageConst
t0, c0 = time.perf_counter(), cpu()
rows = 0
for msg in bt2.TraceCollectionMessageIterator(source):
    if type(msg) is not event_message:
        continue
    ev = msg.event
    row = [msg.default_clock_snapshot.ns_from_origin, ev.name]
    for field in ev.payload_field.values():
        to = convert.get(type(field))
        if to is None:
            to = convert[type(field)] = converter(field)
        row.append(to(field))
    rows += 1
    if rows == limit:
        break
print(json.dumps({"records": rows, "seconds": time.perf_counter() - t0,
                  "cpu_seconds": cpu() - c0}))
"""


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(argv, env=None):
    t0, c0 = time.perf_counter(), children_cpu()
    r = subprocess.run(argv, capture_output=True, env=env, timeout=1800)
    dt, cpu = time.perf_counter() - t0, children_cpu() - c0
    if r.returncode != 0:
        raise SystemExit(f"analysis_bench: {argv[0]} failed: {r.stderr.decode(errors='replace')}")
    return r.stdout, dt, cpu


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--python-path", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pair", default="io:submit,io:complete,req")
    ap.add_argument("--bt2-events", type=int, default=250000)
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=args.python_path)
    begin, end, key = args.pair.split(",")

    extra = {}  # name -> per-round figures other than time (bytes, allocation time)

    def timed(out, name=None):
        j = json.loads(out)
        if name is not None:
            extra.setdefault(name, []).append(
                {k: j[k] for k in ("rss_bytes", "table_bytes", "alloc_seconds") if k in j})
        return j["records"], j["seconds"], j["cpu_seconds"]

    def reader(mode):
        out, _, _ = run([os.path.join(args.bin, "analysis_reader"), "--source", args.source,
                         "--mode", mode])
        return timed(out)

    def latency():
        out, dt, cpu = run([os.path.join(args.bin, "nanotrace"), "latency", args.source,
                            "--begin", begin, "--end", end, "--key", key, "--json"])
        return json.loads(out)["records"], dt, cpu

    fresh = {"bytes": 0}  # what the last numpy load took (RSS), for numpy_prefaulted

    def python(mode):
        out, _, _ = run([sys.executable, "-c", PY_LOAD, mode, args.source, str(fresh["bytes"])],
                        env)
        if mode == "numpy":
            fresh["bytes"] = max(json.loads(out)["rss_bytes"], 1)
        return timed(out, "python_" + mode)

    def bt2_load():
        out, _, _ = run([sys.executable, "-c", BT2_LOAD, ctf_dir, str(args.bt2_events)])
        return timed(out)

    measures = {
        "reader_records": lambda: reader("records"),
        "reader_column_batches": lambda: reader("batches"),
        "reader_columns": lambda: reader("columns"),
        "latency": latency,
        "python_numpy": lambda: python("numpy"),
        "python_numpy_prefaulted": lambda: python("numpy_prefaulted"),
        "python_pandas": lambda: python("pandas"),
        "python_pandas_one_frame": lambda: python("frame"),
    }
    has_bt2 = subprocess.run([sys.executable, "-c", "import bt2"],
                             capture_output=True).returncode == 0
    ctf_dir = None
    if has_bt2:
        # The CTF export of the same trace, beside it (removed at the end).
        ctf_dir = tempfile.mkdtemp(prefix="ctf-",
                                   dir=os.path.dirname(os.path.abspath(args.source)))
        run([os.path.join(args.bin, "nanotrace"), "export", args.source, "-f", "ctf", "-o",
             ctf_dir + "/trace"])
        ctf_dir += "/trace"
        measures["bt2_ctf"] = bt2_load
    else:
        print("analysis_bench: python3-bt2 not installed: no bt2 figure", file=sys.stderr)
    try:
        measure_rounds(args, measures, extra)
    finally:
        if ctf_dir is not None:
            shutil.rmtree(os.path.dirname(ctf_dir), ignore_errors=True)


def measure_rounds(args, measures, extra):
    runs = {name: [] for name in measures}
    for round_ in range(args.rounds):
        for name, measure in measures.items():
            records, seconds, cpu = measure()
            runs[name].append((records, seconds, cpu))
            more = extra.get(name, [{}])[-1] if name in extra else {}
            more = "".join(f", {k} {v / records:.1f}/event" if k.endswith("bytes")
                           else f", {k} {v:.3f}" for k, v in more.items())
            print(f"round {round_ + 1} {name:24} {records} records {seconds:.3f} s "
                  f"({records / seconds / 1e6:.2f} M/s), CPU {cpu:.3f} s "
                  f"({records / cpu / 1e6:.2f} M/s){more}", flush=True)
    result = {"source": args.source, "rounds": args.rounds, "pair": args.pair,
              "bt2_events": args.bt2_events,
              "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    for name, rs in runs.items():
        records = rs[0][0]
        if any(r != records for r, _, _ in rs):
            raise SystemExit(f"analysis_bench: {name} read different record counts: {rs}")
        wall = statistics.median(s for _, s, _ in rs)
        cpu = statistics.median(c for _, _, c in rs)
        # The first round after the trace was made, and the median of the rounds after it.
        later = rs[1:] or rs
        later_wall = statistics.median(s for _, s, _ in later)
        later_cpu = statistics.median(c for _, _, c in later)
        result[name] = {"records": records, "median_seconds": wall,
                        "first_events_per_second": records / rs[0][1],
                        "first_events_per_cpu_second": records / rs[0][2],
                        "later_events_per_second": records / later_wall,
                        "later_events_per_cpu_second": records / later_cpu,
                        "events_per_second": records / wall, "median_cpu_seconds": cpu,
                        "events_per_cpu_second": records / cpu,
                        "seconds": [s for _, s, _ in rs], "cpu_seconds": [c for _, _, c in rs]}
        for r in extra.get(name, []):
            for k, v in r.items():
                result[name].setdefault(k, []).append(v)
        print(f"median {name:24} {records / wall / 1e6:7.2f} M events/s wall, "
              f"{records / cpu / 1e6:7.2f} M events/s CPU; first round "
              f"{records / rs[0][1] / 1e6:.2f} M wall, {records / rs[0][2] / 1e6:.2f} M CPU; "
              f"later rounds {records / later_wall / 1e6:.2f} M wall, "
              f"{records / later_cpu / 1e6:.2f} M CPU")
    with open(args.json, "w") as f:
        json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
