#!/usr/bin/env bash
# CTF export against its floor: the time to export a 10 M-event trace to CTF, and the time
# `cp` takes to copy the same bytes within /dev/shm, in 7 interleaved pairs (medians).
# Writes build/bench/ctf-floor.json.   scripts/ctf-floor.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
B=$build/bin
mkdir -p "$build/bench"
line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard $B/gen_trace --events 10000000 --threads 4)
seg=${line##* }
out=/dev/shm/ctf-floor-$$
trap 'rm -rf "$seg" $out /dev/shm/ctf-floor-$$.bin /dev/shm/ctf-floor-$$.cp' EXIT
$B/nanotrace export $seg -f ctf -o $out 2>/dev/null
cat $out/stream-* > /dev/shm/ctf-floor-$$.bin
python3 - "$B/nanotrace" "$seg" "$out" "$build/bench/ctf-floor.json" /dev/shm/ctf-floor-$$ <<'PY'
import json, subprocess, sys, time, statistics
cli, seg, out, result, flat = sys.argv[1:]
e, c = [], []
for i in range(7):
    t = time.monotonic(); subprocess.run([cli, "export", seg, "-f", "ctf", "-o", out], check=True, stderr=subprocess.DEVNULL); e.append(time.monotonic() - t)
    t = time.monotonic(); subprocess.run(["cp", flat + ".bin", flat + ".cp"], check=True); c.append(time.monotonic() - t)
    subprocess.run(["rm", "-f", flat + ".cp"])
me, mc = statistics.median(e), statistics.median(c)
print(f"ctf export median {me:.3f} s ({10e6/me/1e6:.1f} M events/s), cp of the same bytes {mc:.3f} s, ratio {me/mc:.2f}")
print("ratios per pair:", " ".join(f"{a/b:.2f}" for a, b in zip(e, c)))
json.dump({"export_s": e, "cp_s": c, "median_export_s": me, "median_cp_s": mc,
           "events_per_s": 10e6 / me, "ratio_to_cp": me / mc,
           "pair_ratios": [a / b for a, b in zip(e, c)]}, open(result, "w"), indent=2)
PY
