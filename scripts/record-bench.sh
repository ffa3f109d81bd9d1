#!/usr/bin/env bash
# `nanotrace record` benchmark (issue 4), results in build/bench/record.json:
#  1. sustained lossless drain: one producer thread at full speed in block mode, recorded to a
#     file in /dev/shm; events/s and MB/s of ring bytes, checked lossless (file read back),
#     with the recorder writing straight from the ring mapping with writev (default) and, for
#     comparison, copying through a user-space buffer first (NANOTRACE_RECORD_BUFFERED=1);
#  2. offered load of RATE events/s (a producer pacing itself): the producer's CPU time and
#     elapsed time with the recorder (block mode) versus without (overwrite mode, same
#     records written), interleaved A B A B, medians; and the recorder's CPU share;
#  3. an idle traced process: the recorder's CPU share while nothing is written.
# Environment: BIN (default build/bin), SECONDS_PER_RUN (3), PAIRS (3), RATE (20000000).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin} SECONDS_PER_RUN=${SECONDS_PER_RUN:-3} PAIRS=${PAIRS:-3} \
RATE=${RATE:-20000000} OUT=${OUT:-build/bench/record.json}
mkdir -p "$(dirname "$OUT")"
export BIN SECONDS_PER_RUN PAIRS RATE OUT
python3 - <<'PY'
import json, os, re, statistics, subprocess, time

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
SECS, PAIRS, RATE = float(os.environ["SECONDS_PER_RUN"]), int(os.environ["PAIRS"]), float(os.environ["RATE"])
CLI, PRODUCER = f"{BIN}/nanotrace", f"{BIN}/nanotrace_paced_producer"
FILE = f"/dev/shm/nanotrace-bench-{os.getpid()}.ntr"

def cpu(ru):
    return ru.ru_utime + ru.ru_stime

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

def run(mode, rate, record, env_extra=None, seconds=SECS):
    """One producer run; returns producer records, elapsed, producer cpu, recorder stats."""
    env = dict(os.environ, NANOTRACE_MODE=mode, NANOTRACE_BUFFER="4M")
    p = subprocess.Popen([PRODUCER, "--threads", "1", "--rate", str(rate), "--seconds", str(seconds),
                          "--go"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    pid = int(p.stdout.readline().split()[1])
    rec = None
    if record:
        renv = dict(os.environ, **(env_extra or {}))
        rec = subprocess.Popen([CLI, "record", str(pid), "-o", FILE], stderr=subprocess.PIPE,
                               env=renv, text=True)
        wait_consumer(pid)
    t0 = time.monotonic()
    p.stdin.write("\n"); p.stdin.flush(); p.stdin.close()
    done = p.stdout.readline().split()
    _, status, ru = os.wait4(p.pid, 0)
    records, elapsed = int(done[1]), float(done[2])
    out = {"records": records, "elapsed_s": elapsed, "producer_cpu_s": cpu(ru)}
    if rec:
        _, status, rru = os.wait4(rec.pid, 0)
        wall = time.monotonic() - t0
        err = rec.stderr.read()
        m = re.search(r"recorded (\d+) records \(([\d.]+) MB of rings", err)
        lost = re.search(r"total lost (\d+)", err)
        out.update(recorded=int(m.group(1)), ring_mb=float(m.group(2)),
                   lost=int(lost.group(1)), recorder_cpu_s=cpu(rru), recorder_wall_s=wall)
    seg = f"/dev/shm/nanotrace-{pid}"
    if os.path.exists(seg):
        os.unlink(seg)
    return out

def med(xs):
    return statistics.median(xs)

result = {"seconds_per_run": SECS, "pairs": PAIRS, "buffer": "4M", "mode": "block"}

# 1. Full-speed lossless drain, two copy paths interleaved.
drain = {"writev_from_mapping": [], "buffered_copy": []}
for _ in range(PAIRS):
    for name, extra in (("writev_from_mapping", {}), ("buffered_copy", {"NANOTRACE_RECORD_BUFFERED": "1"})):
        r = run("block", 0, True, extra)
        st = json.loads(subprocess.run([CLI, "stats", "--json", FILE], capture_output=True,
                                       text=True).stdout)
        r["file_records"] = st["records"]
        r["file_lost"] = st["lost"]
        r["lossless"] = r["lost"] == 0 and st["lost"] == 0 and st["records"] == r["records"]
        r["events_per_s"] = r["records"] / r["elapsed_s"]
        r["mb_per_s"] = r["ring_mb"] / r["elapsed_s"]
        r["recorder_cpu_share"] = r["recorder_cpu_s"] / r["recorder_wall_s"]
        drain[name].append(r)
        os.unlink(FILE)
result["full_speed_drain"] = {
    name: {"events_per_s": med([r["events_per_s"] for r in runs]),
           "mb_per_s": med([r["mb_per_s"] for r in runs]),
           "recorder_cpu_share": med([r["recorder_cpu_share"] for r in runs]),
           "all_lossless": all(r["lossless"] for r in runs), "runs": runs}
    for name, runs in drain.items()}

# 2. Offered load: A (no recorder, overwrite) / B (recorder, block), interleaved.
a_runs, b_runs = [], []
for _ in range(PAIRS):
    a_runs.append(run("overwrite", RATE, False))
    b = run("block", RATE, True)
    b["recorder_cpu_share"] = b["recorder_cpu_s"] / b["recorder_wall_s"]
    b_runs.append(b)
    os.unlink(FILE)
def per_event_ns(r):
    return r["producer_cpu_s"] / r["records"] * 1e9
result["offered_load"] = {
    "rate_events_per_s": RATE,
    "without_recorder": {"achieved_events_per_s": med([r["records"] / r["elapsed_s"] for r in a_runs]),
                         "producer_cpu_ns_per_event": med([per_event_ns(r) for r in a_runs]),
                         "runs": a_runs},
    "with_recorder": {"achieved_events_per_s": med([r["records"] / r["elapsed_s"] for r in b_runs]),
                      "producer_cpu_ns_per_event": med([per_event_ns(r) for r in b_runs]),
                      "recorder_cpu_share": med([r["recorder_cpu_share"] for r in b_runs]),
                      "all_lossless": all(r["lost"] == 0 for r in b_runs), "runs": b_runs},
}
ol = result["offered_load"]
ol["producer_slowdown"] = (ol["with_recorder"]["producer_cpu_ns_per_event"] /
                           ol["without_recorder"]["producer_cpu_ns_per_event"] - 1)
ol["throughput_loss"] = 1 - (ol["with_recorder"]["achieved_events_per_s"] /
                             ol["without_recorder"]["achieved_events_per_s"])

# 3. Idle: a producer writing 1000 events/s... none at all: rate 1 event/s batches of 256.
idle = run("block", 1, True, seconds=SECS)
result["idle"] = {"recorder_cpu_share": idle["recorder_cpu_s"] / idle["recorder_wall_s"],
                  "recorder_cpu_s": idle["recorder_cpu_s"], "wall_s": idle["recorder_wall_s"]}
os.unlink(FILE)

with open(OUT, "w") as f:
    json.dump(result, f, indent=2)
fs = result["full_speed_drain"]
for name, d in fs.items():
    print(f"full speed, {name}: {d['events_per_s']/1e6:.1f} M events/s, {d['mb_per_s']:.0f} MB/s, "
          f"recorder {d['recorder_cpu_share']*100:.0f}% of a core, lossless={d['all_lossless']}")
print(f"offered {RATE/1e6:.0f} M/s: achieved {ol['without_recorder']['achieved_events_per_s']/1e6:.1f} -> "
      f"{ol['with_recorder']['achieved_events_per_s']/1e6:.1f} M/s; producer CPU/event "
      f"{ol['without_recorder']['producer_cpu_ns_per_event']:.2f} -> "
      f"{ol['with_recorder']['producer_cpu_ns_per_event']:.2f} ns ({ol['producer_slowdown']*100:+.1f}%); "
      f"recorder {ol['with_recorder']['recorder_cpu_share']*100:.0f}% of a core; "
      f"lossless={ol['with_recorder']['all_lossless']}")
print(f"idle: recorder {result['idle']['recorder_cpu_share']*100:.2f}% of a core")
print(f"written {OUT}")
PY
