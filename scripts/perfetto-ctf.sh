#!/usr/bin/env bash
# Perfetto's export time against CTF's, from the same trace file in the same run: the two
# exports alternate (CTF, Perfetto, CTF, ...; ROUNDS rounds), output to tmpfs, and the median
# of the per-round ratios Perfetto / CTF is printed, of wall time and of CPU time (user +
# system, every thread), with each side's median rate.
#
#   scripts/perfetto-ctf.sh BUILD_DIR TRACE_FILE [ROUNDS]    (default: 5 rounds)
set -euo pipefail
build=$(cd "$1" && pwd)
trace=$2
rounds=${3:-5}
out=$(mktemp -d /dev/shm/nt-perfetto-ctf.XXXXXX)
trap 'rm -rf "$out"' EXIT
events=$("$build/bin/nanotrace" stats --json "$trace" | /usr/bin/python3 -c \
  'import json, sys; print(json.load(sys.stdin)["records"])')

# One export: appends "WALL CPU" (seconds) to $out/FORMAT.times.
run() {
  /usr/bin/time -f "%e %U %S" -o "$out/time" \
    "$build/bin/nanotrace" export "$trace" --format "$1" -o "$out/x.$1" >/dev/null 2>"$out/err" ||
    { cat "$out/err" >&2; exit 1; }
  awk '{print $1, $2 + $3}' "$out/time" >>"$out/$1.times"
  rm -rf "$out/x.$1"
}

for ((r = 0; r < rounds; ++r)); do
  run ctf
  run perfetto
done
/usr/bin/python3 - "$out/ctf.times" "$out/perfetto.times" "$events" <<'PY'
import statistics, sys
ctf = [list(map(float, l.split())) for l in open(sys.argv[1])]
pf = [list(map(float, l.split())) for l in open(sys.argv[2])]
n = int(sys.argv[3])
for i, what in enumerate(("wall", "CPU")):
    ratios = [p[i] / c[i] for c, p in zip(ctf, pf)]
    print(f"{what}: CTF {n / statistics.median(c[i] for c in ctf) / 1e6:.2f} M ev/s, "
          f"Perfetto {n / statistics.median(p[i] for p in pf) / 1e6:.2f} M ev/s, "
          f"Perfetto / CTF time: median {statistics.median(ratios):.2f} x "
          f"({min(ratios):.2f}-{max(ratios):.2f}, {len(ratios)} rounds)")
PY
