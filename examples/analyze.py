"""Analysing a nanotrace trace from Python: the storage simulator's I/Os as numpy columns and
a pandas DataFrame, their submit -> complete latency per device, and the trace's losses.

    /usr/bin/python3 examples/analyze.py [SOURCE]

SOURCE is a trace file (`nanotrace record`), a pid, "name:NAME" or a segment. Without one, the
script runs build/bin/storage_sim (NANOTRACE_KEEP=1) and reads the segment it leaves. The
module must be importable: after `cmake --install build` it is, or set
PYTHONPATH=build/python (NANOTRACE_BIN_DIR says where storage_sim is; default build/bin).
"""

import os
import re
import subprocess
import sys

import nanotrace


def run_storage_sim():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    bin_dir = os.environ.get("NANOTRACE_BIN_DIR", os.path.join(root, "build", "bin"))
    out = subprocess.run(
        [os.path.join(bin_dir, "storage_sim"), "--threads", "4", "--ops", "5000"],
        env=dict(os.environ, NANOTRACE_KEEP="1"), capture_output=True, check=True, text=True)
    return re.search(r"segment (\S+)", out.stdout).group(1)


def main():
    made = None
    source = sys.argv[1] if len(sys.argv) > 1 else None
    if source is None:
        source = made = run_storage_sim()
    try:
        trace = nanotrace.open(source)
        print(trace)

        # Every event as columns: {event name: {column: ndarray}}.
        for name, columns in trace.events().items():
            print(f"{name:20} {len(columns['time_ns']):8} records")

        # One event as numpy columns: numbers in their fields' widths, strings as Categoricals
        # (codes into the distinct strings), values as dump --json shows them.
        submit = trace.events("io:submit")
        print("bytes submitted:", int(submit["len"].sum()))

        # The same as a DataFrame, and a pandas summary per device.
        frame = trace.to_pandas("io:submit")
        print(frame.head(3).to_string())
        print(frame.groupby("dev")["len"].agg(["count", "sum"]).to_string())

        # Begin/end pairs by request id, through the same matcher as `nanotrace latency`.
        pairs = trace.pairs("io:submit", "io:complete", "req", by="dev", pandas=True)
        matched = pairs[pairs["kind"] == "pair"]
        print("latency per device (ns):")
        print(matched.groupby("by")["latency_ns"].describe(percentiles=[0.5, 0.99]).to_string())

        report = trace.latency("io:submit", "io:complete", "req")
        print("p99 over all:", report["overall"]["p99_ns"], "ns")

        stats = trace.stats()
        print(f"{stats['records']} records, {stats['lost']} lost")
    finally:
        if made:
            os.unlink(made)


if __name__ == "__main__":
    main()
