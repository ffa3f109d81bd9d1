#!/usr/bin/env bash
# `nanotrace record` benchmark, results in build/bench/record.json:
#  1. sustained lossless drain: one producer thread at full speed in block mode, recorded to a
#     file in /dev/shm; events/s and MB/s of ring bytes, checked lossless (the file is read
#     back: its record count must equal what the producer wrote, with nothing lost). With
#     24-byte events, every way the recorder can move stable ring bytes to the file is run in
#     the same interleaved rounds: writev straight from the ring mapping (the default),
#     through a user-space buffer, copy_file_range and splice from the segment's descriptor
#     (NANOTRACE_RECORD_COPY); with 40-byte events, the default;
#  2. offered load of RATE events/s (a producer pacing itself), 24-byte and 40-byte events:
#     the producer's CPU time per event and its achieved rate with the recorder (block mode)
#     versus without (overwrite mode, same records written), interleaved A B A B, medians;
#     and the recorder's CPU share;
#  3. an idle traced process: the recorder's CPU share while nothing is written.
# The headline figures use 24-byte events: a two-field event (`req={} lat={}`, the typical
# I/O tracepoint) is 24 bytes, and the issue's target of 40 M events/s is its "about 1 GB/s"
# at that size. The 40-byte (four-field) figures show how the cost follows bytes, not events.
# Every run takes the medians of PAIRS rounds; the machine's speed changes state every second
# or so, so only figures of the same run compare.
# Environment: BIN (default build/bin), SECONDS_PER_RUN (3), PAIRS (3), OFFERED_PAIRS (twice
# PAIRS: the producer's slowdown is a few percent, and three pairs have measured +20 %),
# RATE (20000000), OUT (build/bench/record.json).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin} SECONDS_PER_RUN=${SECONDS_PER_RUN:-3} PAIRS=${PAIRS:-3} \
RATE=${RATE:-20000000} OUT=${OUT:-build/bench/record.json}
OFFERED_PAIRS=${OFFERED_PAIRS:-$((PAIRS * 2))}
mkdir -p "$(dirname "$OUT")"
export BIN SECONDS_PER_RUN PAIRS OFFERED_PAIRS RATE OUT
python3 - <<'PY'
import json, os, re, statistics, subprocess, time

BIN, OUT = os.environ["BIN"], os.environ["OUT"]
SECS, PAIRS, RATE = float(os.environ["SECONDS_PER_RUN"]), int(os.environ["PAIRS"]), float(os.environ["RATE"])
OFFERED_PAIRS = int(os.environ["OFFERED_PAIRS"])
CLI, PRODUCER = f"{BIN}/nanotrace", f"{BIN}/nanotrace_paced_producer"
FILE = f"/dev/shm/nanotrace-bench-{os.getpid()}.ntr"
HEADLINE_FIELDS = 2  # 24-byte events
FIELDS = {2: "event_24B", 4: "event_40B"}

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

def run(mode, rate, record, fields, copy=None, seconds=SECS):
    """One producer run; returns producer records, elapsed, producer cpu, recorder stats."""
    env = dict(os.environ, NANOTRACE_MODE=mode, NANOTRACE_BUFFER="4M")
    p = subprocess.Popen([PRODUCER, "--threads", "1", "--rate", str(rate), "--seconds", str(seconds),
                          "--fields", str(fields), "--go"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    pid = int(p.stdout.readline().split()[1])
    rec = None
    if record:
        renv = dict(os.environ)
        renv.pop("NANOTRACE_RECORD_COPY", None)
        if copy:
            renv["NANOTRACE_RECORD_COPY"] = copy
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
        if not m or not lost or "unavailable" in err:
            raise SystemExit(f"recorder failed: {err}")
        out.update(recorded=int(m.group(1)), ring_mb=float(m.group(2)),
                   lost=int(lost.group(1)), recorder_cpu_s=cpu(rru), recorder_wall_s=wall,
                   recorder_cpu_share=cpu(rru) / wall)
    seg = f"/dev/shm/nanotrace-{pid}"
    if os.path.exists(seg):
        os.unlink(seg)
    return out

def med(xs):
    return statistics.median(xs)

def read_back(r):
    """Checks the file: as many records as the producer wrote, none lost."""
    st = json.loads(subprocess.run([CLI, "stats", "--json", FILE], capture_output=True,
                                   text=True).stdout)
    r["file_records"] = st["records"]
    r["file_lost"] = st["lost"]
    r["lossless"] = r["lost"] == 0 and st["lost"] == 0 and st["records"] == r["records"]
    os.unlink(FILE)

result = {"seconds_per_run": SECS, "pairs": PAIRS, "offered_pairs": OFFERED_PAIRS,
          "buffer": "4M", "mode": "block",
          "headline_event_bytes": 24,
          "targets": {"lossless_events_per_s": 40e6, "offered_producer_slowdown": 0.10,
                      "offered_recorder_cpu_share": 0.5, "idle_recorder_cpu_share": 0.02}}

# 1. Full-speed lossless drain: every copy path with 24-byte events and the default with
# 40-byte events, all interleaved (the order rotates each round).
variants = [(2, "writev", None), (2, "buffered", "buffered"),
            (2, "copy_file_range", "copy_file_range"), (2, "splice", "splice"), (4, "writev", None)]
drain = {v: [] for v in variants}
for i in range(PAIRS):
    for v in variants[i % len(variants):] + variants[:i % len(variants)]:
        fields, name, copy = v
        r = run("block", 0, True, fields, copy)
        read_back(r)
        r["events_per_s"] = r["records"] / r["elapsed_s"]
        r["mb_per_s"] = r["ring_mb"] / r["elapsed_s"]
        r["ring_bytes_per_event"] = r["ring_mb"] * 1e6 / max(r["recorded"], 1)
        r["recorder_cpu_ns_per_event"] = r["recorder_cpu_s"] / max(r["records"], 1) * 1e9
        drain[v].append(r)
result["full_speed_drain"] = {}
for (fields, name, copy), runs in drain.items():
    result["full_speed_drain"].setdefault(FIELDS[fields], {})[name] = {
        "env": f"NANOTRACE_RECORD_COPY={copy}" if copy else "(default)",
        "events_per_s": med([r["events_per_s"] for r in runs]),
        "mb_per_s": med([r["mb_per_s"] for r in runs]),
        "ring_bytes_per_event": med([r["ring_bytes_per_event"] for r in runs]),
        "recorder_cpu_share": med([r["recorder_cpu_share"] for r in runs]),
        "recorder_cpu_ns_per_event": med([r["recorder_cpu_ns_per_event"] for r in runs]),
        "all_lossless": all(r["lossless"] for r in runs), "runs": runs}

# 2. Offered load: A (no recorder, overwrite) / B (recorder, block), interleaved, both sizes.
def per_event_ns(r):
    return r["producer_cpu_s"] / r["records"] * 1e9
result["offered_load"] = {}
runs = {(f, rec): [] for f in FIELDS for rec in (False, True)}
for i in range(OFFERED_PAIRS):
    for fields in FIELDS:
        for recorded in ((False, True) if i % 2 == 0 else (True, False)):
            r = run("block" if recorded else "overwrite", RATE, recorded, fields)
            if recorded:
                os.unlink(FILE)
            runs[(fields, recorded)].append(r)
for fields, key in FIELDS.items():
    a_runs, b_runs = runs[(fields, False)], runs[(fields, True)]
    ol = {
        "rate_events_per_s": RATE,
        "without_recorder": {"achieved_events_per_s": med([r["records"] / r["elapsed_s"] for r in a_runs]),
                             "producer_cpu_ns_per_event": med([per_event_ns(r) for r in a_runs]),
                             "runs": a_runs},
        "with_recorder": {"achieved_events_per_s": med([r["records"] / r["elapsed_s"] for r in b_runs]),
                          "producer_cpu_ns_per_event": med([per_event_ns(r) for r in b_runs]),
                          "recorder_cpu_share": med([r["recorder_cpu_share"] for r in b_runs]),
                          "all_lossless": all(r["lost"] == 0 for r in b_runs), "runs": b_runs},
    }
    ol["producer_slowdown"] = (ol["with_recorder"]["producer_cpu_ns_per_event"] /
                               ol["without_recorder"]["producer_cpu_ns_per_event"] - 1)
    # The same from each pair of neighbouring runs (less exposed to the machine's state).
    ol["producer_slowdown_pairwise_median"] = med(
        [per_event_ns(b) / per_event_ns(a) - 1 for a, b in zip(a_runs, b_runs)])
    ol["throughput_loss"] = 1 - (ol["with_recorder"]["achieved_events_per_s"] /
                                 ol["without_recorder"]["achieved_events_per_s"])
    result["offered_load"][key] = ol

# 3. Idle: rate 1 event/s, in batches of 256: nothing written for the whole run after the first.
idle = run("block", 1, True, HEADLINE_FIELDS, seconds=SECS)
result["idle"] = {"recorder_cpu_share": idle["recorder_cpu_s"] / idle["recorder_wall_s"],
                  "recorder_cpu_s": idle["recorder_cpu_s"], "wall_s": idle["recorder_wall_s"]}
os.unlink(FILE)

head = result["full_speed_drain"]["event_24B"]["writev"]
hol = result["offered_load"]["event_24B"]
result["summary"] = {
    "lossless_events_per_s": head["events_per_s"], "lossless_mb_per_s": head["mb_per_s"],
    "lossless": head["all_lossless"],
    "offered_producer_slowdown": hol["producer_slowdown"],
    "offered_recorder_cpu_share": hol["with_recorder"]["recorder_cpu_share"],
    "idle_recorder_cpu_share": result["idle"]["recorder_cpu_share"],
}
with open(OUT, "w") as f:
    json.dump(result, f, indent=2)

for key, paths in result["full_speed_drain"].items():
    for name, d in paths.items():
        print(f"full speed, {key[6:]} events, {name}: {d['events_per_s']/1e6:.1f} M events/s, "
              f"{d['mb_per_s']:.0f} MB/s, recorder {d['recorder_cpu_share']*100:.0f}% of a core "
              f"({d['recorder_cpu_ns_per_event']:.1f} ns/event), lossless={d['all_lossless']}")
for key, ol in result["offered_load"].items():
    print(f"offered {RATE/1e6:.0f} M/s, {key[6:]} events: achieved "
          f"{ol['without_recorder']['achieved_events_per_s']/1e6:.1f} -> "
          f"{ol['with_recorder']['achieved_events_per_s']/1e6:.1f} M/s; producer CPU/event "
          f"{ol['without_recorder']['producer_cpu_ns_per_event']:.2f} -> "
          f"{ol['with_recorder']['producer_cpu_ns_per_event']:.2f} ns ({ol['producer_slowdown']*100:+.1f}%, "
          f"pairwise {ol['producer_slowdown_pairwise_median']*100:+.1f}%); "
          f"recorder {ol['with_recorder']['recorder_cpu_share']*100:.0f}% of a core; "
          f"lossless={ol['with_recorder']['all_lossless']}")
print(f"idle: recorder {result['idle']['recorder_cpu_share']*100:.2f}% of a core")
s = result["summary"]
print(f"headline (24 B events): lossless {s['lossless_events_per_s']/1e6:.1f} M events/s "
      f"(target 40); at {RATE/1e6:.0f} M/s offered, producer {s['offered_producer_slowdown']*100:+.1f}% "
      f"(target <= +10%), recorder {s['offered_recorder_cpu_share']*100:.0f}% of a core (target <= 50%)")
print(f"written {OUT}")
PY
