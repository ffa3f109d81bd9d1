#!/usr/bin/env bash
# Two builds' exports side by side: each build generates its own trace of EVENTS records
# (gen_trace, 4 threads, then `nanotrace recover` into a trace file in /dev/shm: equal
# records, each in the format its build reads), then every format is exported by the two
# builds in alternation (A B A B ..., ROUNDS rounds; the machine's speed changes every
# second or so, so only ratios of interleaved runs mean anything), and the median rate of
# each is printed, of wall time and of CPU time (user + system, all threads: on a loaded
# machine the wall time is mostly waiting for a CPU). Output goes to tmpfs: the exporter's
# time, not the disk's.
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

# One run: a line "WALL CPU" in seconds, appended to $out/SIDE.times.
run() {
  local build=$1 side=$2 what=$3
  local cmd
  case $what in
    stats) cmd=("$build/bin/nanotrace" stats "$out/$side.ntr") ;;
    latency) cmd=("$build/bin/nanotrace" latency "$out/$side.ntr" --begin io:submit
                  --end io:complete --key req) ;;
    *) cmd=("$build/bin/nanotrace" export "$out/$side.ntr" --format "$what"
            -o "$out/$side.$what") ;;
  esac
  /usr/bin/time -f "%e %U %S" -o "$out/time" "${cmd[@]}" >/dev/null 2>"$out/err" ||
    { cat "$out/err" >&2; exit 1; }
  awk '{print $1, $2 + $3}' "$out/time" >>"$out/$side.times"
  rm -rf "$out/$side.$what"
}

# Median of column $1 of the file $2.
median() { awk -v c="$1" '{print $c}' "$2" | sort -g | awk '{a[NR]=$1} END {print a[int((NR + 1) / 2)]}'; }
rate() { echo "$events / $1 / 1000000" | bc -l; }

printf '%-10s %11s %11s %8s %11s %11s %8s\n' what "old M ev/s" "new M ev/s" new/old \
  "old CPU" "new CPU" new/old
for what in $formats; do
  : >"$out/old.times"
  : >"$out/new.times"
  for ((r = 0; r < rounds; ++r)); do
    run "$old" old "$what"
    run "$new" new "$what"
  done
  o=$(median 1 "$out/old.times") n=$(median 1 "$out/new.times")
  oc=$(median 2 "$out/old.times") nc=$(median 2 "$out/new.times")
  printf '%-10s %11.2f %11.2f %8.3f %11.2f %11.2f %8.3f\n' "$what" "$(rate "$o")" "$(rate "$n")" \
    "$(echo "$o / $n" | bc -l)" "$(rate "$oc")" "$(rate "$nc")" "$(echo "$oc / $nc" | bc -l)"
done
echo "(M ev/s: events per second of wall time; CPU: events per CPU second, user + system)"
