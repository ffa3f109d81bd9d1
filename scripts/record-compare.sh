#!/usr/bin/env bash
# Two builds' event cost and recorder rate side by side, in alternation (A B A B ..., ROUNDS
# rounds; the machine's speed changes every second or so, so only ratios of interleaved runs
# mean anything), medians printed:
#  - event cost: tracepoint_bench's summary (paired bursts of the floor and an event, its
#    ratio_event2_to_floor and event2_ns, as `make bench` writes them);
#  - recorder rate: one producer thread writing 24-byte events at full speed in block mode
#    for SECONDS, drained by `nanotrace record` into a file in /dev/shm; events/s, and the
#    file read back (`stats --json`) must hold every record with none lost.
# The reader's rate (`stats`, and `latency` over the column reader) is export-compare.sh's.
#
#   scripts/record-compare.sh OLD_BUILD NEW_BUILD [ROUNDS] [SECONDS]   (default: 5 rounds, 2 s)
# Each build needs tracepoint_bench, nanotrace_paced_producer and nanotrace-cli.
set -euo pipefail
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
rounds=${3:-5}
seconds=${4:-2}
export OLD=$old NEW=$new ROUNDS=$rounds SECONDS_PER_RUN=$seconds
exec /usr/bin/python3 - <<'PY'
import json, os, re, shutil, statistics, subprocess, tempfile, time

SIDES = {"old": os.environ["OLD"], "new": os.environ["NEW"]}
ROUNDS, SECS = int(os.environ["ROUNDS"]), os.environ["SECONDS_PER_RUN"]
tmp = tempfile.mkdtemp(prefix="nt-record-compare.", dir="/dev/shm")

def event_cost(build):
    out = f"{tmp}/summary.json"
    subprocess.run([f"{build}/bin/tracepoint_bench", f"--summary={out}",
                    "--benchmark_filter=NONE"], check=True, capture_output=True)
    with open(out) as f:
        s = json.load(f)
    return s["ratio_event2_to_floor"], s["event2_ns"]

def wait_consumer(pid):
    for _ in range(2000):
        seg = f"/dev/shm/nanotrace-{pid}"
        if os.path.exists(seg) and os.path.getsize(seg) >= 4096:
            with open(seg, "rb") as f:
                f.seek(176)  # SegmentHeader::consumer_pid
                if int.from_bytes(f.read(4), "little") != 0:
                    return
        time.sleep(0.005)
    raise SystemExit("recorder did not attach")

def record_rate(build):
    env = dict(os.environ, NANOTRACE_MODE="block", NANOTRACE_BUFFER="4M")
    p = subprocess.Popen([f"{build}/bin/nanotrace_paced_producer", "--threads", "1", "--rate", "0",
                          "--seconds", SECS, "--fields", "2", "--go"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    pid = int(p.stdout.readline().split()[1])
    trace = f"{tmp}/rec.ntr"
    rec = subprocess.Popen([f"{build}/bin/nanotrace", "record", str(pid), "-o", trace],
                           stderr=subprocess.PIPE, text=True)
    wait_consumer(pid)
    p.stdin.write("\n"); p.stdin.flush(); p.stdin.close()
    done = p.stdout.readline().split()
    p.wait()
    err = rec.communicate()[1]
    records, elapsed = int(done[1]), float(done[2])
    lost = re.search(r"total lost (\d+)", err)
    st = json.loads(subprocess.run([f"{build}/bin/nanotrace", "stats", "--json", trace],
                                   capture_output=True, text=True, check=True).stdout)
    os.unlink(trace)
    seg = f"/dev/shm/nanotrace-{pid}"
    if os.path.exists(seg):
        os.unlink(seg)
    if not lost or int(lost.group(1)) != 0 or st["lost"] != 0 or st["records"] != records:
        raise SystemExit(f"{build}: not lossless: {err.strip()} / file {st['records']} of {records}")
    return records / elapsed

runs = {side: {"ratio": [], "event2_ns": [], "record": []} for side in SIDES}
for r in range(ROUNDS):
    order = list(SIDES) if r % 2 == 0 else list(reversed(SIDES))
    for side in order:
        ratio, ns = event_cost(SIDES[side])
        runs[side]["ratio"].append(ratio)
        runs[side]["event2_ns"].append(ns)
    for side in order:
        runs[side]["record"].append(record_rate(SIDES[side]))
shutil.rmtree(tmp)
med = {s: {k: statistics.median(v) for k, v in runs[s].items()} for s in SIDES}
print(f"{'what':<28} {'old':>10} {'new':>10} {'new/old':>8}")
for key, name, scale in [("ratio", "event2 / floor", 1), ("event2_ns", "event2 ns", 1),
                         ("record", "record, M events/s", 1e-6)]:
    o, n = med["old"][key], med["new"][key]
    print(f"{name:<28} {o * scale:>10.4f} {n * scale:>10.4f} {n / o:>8.3f}")
print("per round (old, new):")
for key in runs["old"]:
    print(f"  {key}: " + " ".join(f"{o:.4g}/{n:.4g}" for o, n in zip(runs["old"][key], runs["new"][key])))
PY
