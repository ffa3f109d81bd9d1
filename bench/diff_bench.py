"""Diff benchmark driver (scripts/diff-bench.sh): in interleaved rounds, times `nanotrace
latency` on trace A, on trace B, and `nanotrace diff A B --json` (each a whole command, as a
user runs it), and reports the medians and the median per-round ratio of diff to the two
latency runs together (the issue's bound: at most 2). Wall time and CPU time (user + system
of the child) are both given: on a shared machine the wall time also counts waits for a CPU.

    diff_bench.py --nanotrace BIN --a A.ntr --b B.ntr --json FILE [--rounds N]
                  [--pair BEGIN,END,KEY]"""

import argparse
import json
import os
import statistics
import subprocess
import time


def timed(argv):
    t0 = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, _, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = 0
    err = p.stderr.read().decode(errors="replace")
    p.stderr.close()
    if usage is None:
        raise SystemExit(f"{argv}: no usage")
    return wall, usage.ru_utime + usage.ru_stime, err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nanotrace", required=True)
    ap.add_argument("--a", required=True)
    ap.add_argument("--b", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--pair", default="io:submit,io:complete,req")
    args = ap.parse_args()
    begin, end, key = args.pair.split(",")
    latency = lambda t: [args.nanotrace, "latency", t, "--begin", begin, "--end", end, "--key", key]
    diff = [args.nanotrace, "diff", args.a, args.b, "--json"]
    rows = []
    for r in range(args.rounds):
        wa, ca, _ = timed(latency(args.a))
        wd, cd, _ = timed(diff)
        wb, cb, _ = timed(latency(args.b))
        rows.append({"latency_a": [wa, ca], "diff": [wd, cd], "latency_b": [wb, cb]})
        print(f"round {r + 1}: latency A {wa:.2f}s, diff {wd:.2f}s, latency B {wb:.2f}s "
              f"(cpu {ca:.2f}, {cd:.2f}, {cb:.2f})", flush=True)
    med = lambda xs: statistics.median(xs)
    out = {"rounds": args.rounds, "a": args.a, "b": args.b, "pair": args.pair}
    for i, kind in enumerate(["wall", "cpu"]):
        both = [x["latency_a"][i] + x["latency_b"][i] for x in rows]
        d = [x["diff"][i] for x in rows]
        out[kind] = {
            "latency_both_s": med(both),
            "diff_s": med(d),
            "ratio_median": med([y / x for x, y in zip(both, d)]),
        }
    print(json.dumps(out, indent=1))
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
