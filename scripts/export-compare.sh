#!/usr/bin/env bash
# Two builds' exports side by side: each build generates its own trace of EVENTS records
# (gen_trace, 4 threads, then `nanotrace recover` into a trace file in /dev/shm: equal
# records, each in the format its build reads), then every format is exported by the two
# builds in alternation (A B A B ..., ROUNDS rounds; the machine's speed changes every
# second or so, so only ratios of interleaved runs mean anything), and the median rate of
# each is printed. Output goes to tmpfs: the exporter's time, not the disk's.
#
#   scripts/export-compare.sh OLD_BUILD NEW_BUILD [EVENTS] [ROUNDS] [FORMATS]
#   (default: 10000000 events, 5 rounds, "reader ctf chrome perfetto stats latency")
# stats and latency read every record (one pass; the reader's rate as users see it).
set -euo pipefail
old=$(cd "$1" && pwd)
new=$(cd "$2" && pwd)
events=${3:-10000000}
rounds=${4:-5}
formats=${5:-"ctf chrome perfetto stats latency"}
out=$(mktemp -d /dev/shm/nt-export-compare.XXXXXX)
trap 'rm -rf "$out"' EXIT

for side in old new; do
  build=${!side}
  line=$(NANOTRACE_KEEP=1 NANOTRACE_BUFFER=256M NANOTRACE_MODE=discard \
         "$build/bin/gen_trace" --events "$events" --threads 4)
  segment=${line##* }
  "$build/bin/nanotrace" recover "$segment" -o "$out/$side.ntr" >/dev/null
  rm -f "$segment"
done

# One run: seconds of wall time.
run() {
  local build=$1 side=$2 what=$3
  local t0 t1
  t0=$(date +%s.%N)
  case $what in
    stats) "$build/bin/nanotrace" stats "$out/$side.ntr" >/dev/null 2>"$out/err" ;;
    latency) "$build/bin/nanotrace" latency "$out/$side.ntr" --begin io:submit \
               --end io:complete --key req >/dev/null 2>"$out/err" ;;
    *) "$build/bin/nanotrace" export "$out/$side.ntr" --format "$what" \
         -o "$out/$side.$what" >/dev/null 2>"$out/err" ;;
  esac || { cat "$out/err" >&2; exit 1; }
  t1=$(date +%s.%N)
  rm -rf "$out/$side.$what"
  echo "$t1 - $t0" | bc -l
}

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }

printf '%-10s %12s %12s %8s\n' what "old M ev/s" "new M ev/s" new/old
for what in $formats; do
  : >"$out/old.times"
  : >"$out/new.times"
  for ((r = 0; r < rounds; ++r)); do
    run "$old" old "$what" >>"$out/old.times"
    run "$new" new "$what" >>"$out/new.times"
  done
  o=$(median <"$out/old.times")
  n=$(median <"$out/new.times")
  printf '%-10s %12.2f %12.2f %8.3f\n' "$what" "$(echo "$events / $o / 1000000" | bc -l)" \
    "$(echo "$events / $n / 1000000" | bc -l)" "$(echo "$o / $n" | bc -l)"
done
