#!/usr/bin/env bash
# `nanotrace merge` benchmark, results in build/bench/merge.json: the time to merge NODES
# snapshots of RING_MB MiB of rings each (one traced process, two threads of RING_MB/2 MiB
# rings, filled and overwritten), and to read the merged file back (`stats`: every record
# decoded and counted), for nodes of one boot (the shared clock: payloads copied, records read
# as they are) and of other boots (aligned through CLOCK_REALTIME: every record's stamp mapped
# when read). The two kinds run in interleaved rounds (A B A B ...), medians of ROUNDS; the
# machine's speed changes state every second or so, so only figures of one run compare.
# Files go to DIR (default a directory under /tmp: a disk file system, in the page cache).
# Environment: BIN (build/bin), NODES (8), RING_MB (64), ROUNDS (5), DIR, OUT
# (build/bench/merge.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin} NODES=${NODES:-8} RING_MB=${RING_MB:-64} ROUNDS=${ROUNDS:-5}
OUT=${OUT:-build/bench/merge.json}
DIR=${DIR:-$(mktemp -d /tmp/nanotrace-merge-bench-XXXXXX)}
mkdir -p "$(dirname "$OUT")" "$DIR"
export BIN NODES RING_MB ROUNDS OUT DIR
/usr/bin/python3 - <<'PY'
import json, os, re, statistics, subprocess, time

BIN, DIR, OUT = os.environ["BIN"], os.environ["DIR"], os.environ["OUT"]
NODES, RING_MB, ROUNDS = (int(os.environ[k]) for k in ("NODES", "RING_MB", "ROUNDS"))
cli = os.path.join(BIN, "nanotrace")

# One producer, two threads, each ring RING_MB/2 MiB, written past full (40-byte records).
events = (RING_MB // 2) * (1 << 20) // 40 * 5 // 4
env = dict(os.environ, NANOTRACE_BUFFER=f"{RING_MB // 2}M")
producer = subprocess.Popen(
    [os.path.join(BIN, "nanotrace_test_producer"), "--threads", "2", "--events", str(events),
     "--hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
pid = int(producer.stdout.readline().split()[1])
assert producer.stdout.readline().strip() == b"ready"

def snapshot(name, boot=None):
    path = os.path.join(DIR, name + ".ntr")
    e = dict(os.environ, NANOTRACE_NODE_NAME=name)
    if boot:
        e["NANOTRACE_NODE_BOOT_ID"] = boot
    subprocess.run([cli, "snapshot", str(pid), "-o", path], check=True, env=e,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return path

shared = [snapshot(f"node{i}") for i in range(NODES)]
other = [shared[0]] + [snapshot(f"far{i}", boot=f"boot-{i}") for i in range(1, NODES)]
producer.stdin.close()
producer.wait()
input_bytes = sum(os.path.getsize(p) for p in shared)

def merge(inputs, out):
    t0 = time.perf_counter()
    r = subprocess.run([cli, "merge", "--json", *inputs, "-o", out], check=True,
                       capture_output=True)
    wall = time.perf_counter() - t0
    return wall, json.loads(r.stdout)

def read(path):
    t0 = time.perf_counter()
    r = subprocess.run([cli, "stats", "--json", path], check=True, capture_output=True)
    return time.perf_counter() - t0, json.loads(r.stdout)["records"]

runs = {"shared-clock": {"merge_s": [], "read_s": []}, "realtime": {"merge_s": [], "read_s": []}}
info = {}
for _ in range(ROUNDS):
    for kind, inputs in (("shared-clock", shared), ("realtime", other)):
        out = os.path.join(DIR, f"merged-{kind}.ntr")
        wall, m = merge(inputs, out)
        runs[kind]["merge_s"].append(wall)
        secs, records = read(out)
        runs[kind]["read_s"].append(secs)
        info[kind] = {"file_bytes": m["file_bytes"], "data_bytes": m["data_bytes"],
                      "records": records,
                      "alignments": sorted({n["alignment"] for n in m["nodes"]})}
        os.unlink(out)

result = {"nodes": NODES, "ring_mib_per_node": RING_MB, "rounds": ROUNDS,
          "input_bytes": input_bytes, "dir": DIR}
for kind, r in runs.items():
    med_merge, med_read = statistics.median(r["merge_s"]), statistics.median(r["read_s"])
    result[kind] = dict(info[kind], merge_s_median=med_merge, read_s_median=med_read,
                        merge_s=r["merge_s"], read_s=r["read_s"],
                        merge_gb_per_s=info[kind]["data_bytes"] / med_merge / 1e9,
                        read_mrecords_per_s=info[kind]["records"] / med_read / 1e6)
for p in set(shared + other):
    os.unlink(p)
os.rmdir(DIR)
with open(OUT, "w") as f:
    json.dump(result, f, indent=1)
for kind in runs:
    r = result[kind]
    print(f"{kind}: merge {NODES} x {RING_MB} MiB ({r['data_bytes'] / 2**20:.0f} MiB of ring "
          f"data) median {r['merge_s_median']:.3f} s ({r['merge_gb_per_s']:.2f} GB/s); read back "
          f"{r['records']} records median {r['read_s_median']:.3f} s "
          f"({r['read_mrecords_per_s']:.1f} M records/s)")
PY
