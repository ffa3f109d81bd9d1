#!/usr/bin/env bash
# `make demo`: nanotrace in about a minute. iograph runs a graph of dependent reads over and
# over on a loop device (an O_DIRECT file when not root), traced in flight-recorder mode, and
# each step below prints one line saying what it shows, then the tool's own output:
# list and live stats from another process, a lossless recording, latency by backend, a
# trigger that freezes the rings on a slow I/O, export to Perfetto and CTF (read back by
# babeltrace2) and the HTML report. Intermediate files go to a temporary directory that is
# removed at exit; the report and the Perfetto file are kept in build/demo/.
#
# Nothing here depends on timing for its exit status: every wait polls for a condition with a
# deadline, and no pipeline ends before its writer does. `make test` runs it three times.
#   scripts/demo.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
NT=$build/bin/nanotrace
IOG=$build/bin/iograph
kept=$build/demo
for tool in "$NT" "$IOG"; do
  [ -x "$tool" ] || { echo "demo: $tool not found; build first (make demo does)" >&2; exit 1; }
done
command -v babeltrace2 >/dev/null || { echo "demo: babeltrace2 not installed (make setup)" >&2; exit 1; }
mkdir -p "$kept"
work=$(mktemp -d "${TMPDIR:-/tmp}/nanotrace-demo.XXXXXX")
pid=""

stop_iograph() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    # Killed, it leaves its segment behind (that is what `nanotrace recover` is for).
    rm -f "/dev/shm/nanotrace-$pid"
    pid=""
  fi
}
cleanup() {
  stop_iograph
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step=0
bold='' plain=''
if [ -t 1 ]; then bold=$'\e[1m' plain=$'\e[0m'; fi
say() {
  step=$((step + 1))
  printf '\n%s%d. %s%s\n' "$bold" "$step" "$*" "$plain"
}

# wait_for WHAT SECONDS COMMAND...: runs COMMAND every 0.1 s until it succeeds, for at most
# SECONDS; fails with a message naming WHAT (and iograph's output, if iograph died).
wait_for() {
  local what=$1 limit=$2
  shift 2
  local deadline=$((SECONDS + limit))
  until "$@"; do
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      echo "demo: iograph exited while waiting for $what:" >&2
      cat "$work/iograph.log" >&2
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "demo: no $what after ${limit} s" >&2
      return 1
    fi
    sleep 0.1
  done
}

has_finished_a_graph() {
  "$NT" dump "$pid" --json -n 1 -e iograph:graph_end >"$work/first.jsonl" 2>/dev/null &&
    [ -s "$work/first.jsonl" ]
}
# quiet COMMAND...: runs COMMAND with its output in a log, shown only if it fails.
quiet() {
  "$@" >"$work/quiet.log" 2>&1 || { cat "$work/quiet.log" >&2; return 1; }
}
is_frozen() {
  "$NT" status "$pid" >"$work/status.txt" && grep -q "trigger: frozen" "$work/status.txt"
}

# --- 1. the traced program ------------------------------------------------------------------
if [ "$(id -u)" -eq 0 ] && [ -e /dev/loop-control ]; then
  target=loop
  where="a loop device (direct I/O over /dev/shm)"
else
  image=$work/iograph.img
  head -c $((64 << 20)) /dev/zero >"$image"
  target="file:$image"
  where="a 64 MiB file (not root: no loop device)"
fi
say "iograph runs a rope of 128 dependent 4 KiB reads on $where, on 4 backends in turn, traced by nanotrace"
# 16 MiB rings: what happens before `record` starts is still in them on a fast machine.
NANOTRACE_NAME=iograph-demo NANOTRACE_MODE=overwrite NANOTRACE_BUFFER=16M NANOTRACE_THREADS=4 \
  "$IOG" bench --target "$target" --shapes rope --size 128 --repeat 1000000 --warmup 0 --trace \
  >"$work/iograph.log" 2>&1 &
pid=$!
wait_for "traced graph from iograph (pid $pid)" 60 has_finished_a_graph
"$NT" events "$pid" >"$work/events.txt"
echo "pid $pid; $(grep -c iograph: "$work/events.txt") call sites of group iograph registered"

# --- 2. list --------------------------------------------------------------------------------
say "nanotrace list: another process finds every traced process by its shared-memory segment"
"$NT" list >"$work/list.txt"
grep -E "^ +(PID|$pid) " "$work/list.txt"

# --- 3. live stats --------------------------------------------------------------------------
say "nanotrace stats: counts, rates and losses read live from the running process's rings"
"$NT" stats "$pid"

# --- 4. record ------------------------------------------------------------------------------
say "nanotrace record: 3 s of the live process drained into a trace file (the recorder itself loses nothing)"
"$NT" record "$pid" -o "$work/run.ntr" --duration 3 >"$work/record.txt" 2>&1
head -n 1 "$work/record.txt"
grep "total lost" "$work/record.txt" || true
recorded=$(sed -n 's/^recorded \([0-9]*\) records.*/\1/p' "$work/record.txt")

# --- 4b. kernel events ------------------------------------------------------------------------
if [ "$target" = loop ] && [ -d /sys/kernel/tracing ]; then
  say "nanotrace record --kernel io_uring,block + breakdown: each I/O joined with its io_uring and block events, on one clock"
  "$NT" record "$pid" -o "$work/kernel.ntr" --duration 2 --kernel io_uring,block >"$work/kernel.txt" 2>&1 ||
    { cat "$work/kernel.txt" >&2; exit 1; }
  grep "^kernel:" "$work/kernel.txt" || true
  "$NT" breakdown "$work/kernel.ntr"
fi

# --- 5. latency by backend ------------------------------------------------------------------
say "nanotrace latency: time per graph (graph_start -> graph_end) by backend, from the file"
"$NT" latency "$work/run.ntr" --begin iograph:graph_start --end iograph:graph_end --key graph \
  --by backend >"$work/latency.txt"
sed '/^histogram/,$d' "$work/latency.txt"

# --- 6. trigger -----------------------------------------------------------------------------
# The threshold is the recording's 99th percentile of I/O latency (lat_us of node_complete),
# so the trigger fires within a second or so whatever the machine's speed; should the machine
# turn faster meanwhile, it is halved every 5 s.
"$NT" dump "$work/run.ntr" --json -e iograph:node_complete >"$work/complete.jsonl"
sed -n 's/.*"lat_us":\([0-9]*\).*/\1/p' "$work/complete.jsonl" | sort -n >"$work/lat.txt"
count=$(wc -l <"$work/lat.txt")
[ "$count" -gt 0 ] || { echo "demo: the recording holds no node_complete record" >&2; exit 1; }
threshold=$(sed -n "$(((count * 99 + 99) / 100))p" "$work/lat.txt")
after=50
say "nanotrace arm: freeze the flight recorder on a slow I/O, lat_us > $threshold (the p99 of the recording), $after records after it"
tries=0
until false; do
  "$NT" arm "$pid" "iograph:node_complete lat_us>$threshold" --after "$after"
  waited=$((SECONDS + 5))
  until is_frozen || [ "$SECONDS" -ge "$waited" ]; do
    kill -0 "$pid" 2>/dev/null || { echo "demo: iograph exited:" >&2; cat "$work/iograph.log" >&2; exit 1; }
    sleep 0.1
  done
  grep -q "trigger: frozen" "$work/status.txt" && break
  tries=$((tries + 1))
  if [ "$tries" -ge 8 ] || [ "$threshold" -eq 0 ]; then
    echo "demo: the trigger never fired" >&2
    exit 1
  fi
  threshold=$((threshold / 2))
  echo "(nothing that slow in 5 s: re-arming at lat_us > $threshold)"
  "$NT" disarm "$pid" >/dev/null
done
cat "$work/status.txt"

say "nanotrace dump: the frozen rings around the I/O that fired the trigger (>>)"
match_seq=$(sed -n 's/.* record #\([0-9]*\) of thread \([0-9]*\) .*/\1/p' "$work/status.txt")
match_tid=$(sed -n 's/.* record #\([0-9]*\) of thread \([0-9]*\) .*/\2/p' "$work/status.txt")
# The text and JSON dumps of frozen rings list the same records in the same order.
"$NT" dump "$pid" >"$work/frozen.txt"
"$NT" dump "$pid" --json >"$work/frozen.jsonl"
# (The keys' order is not part of the match: a record has one seq per thread.)
line=$(grep -n "\"seq\":$match_seq," "$work/frozen.jsonl" | grep "\"tid\":$match_tid," |
  cut -d: -f1) ||
  { echo "demo: record #$match_seq of thread $match_tid is not in the frozen rings" >&2; exit 1; }
total=$(wc -l <"$work/frozen.jsonl")
awk -v m="$line" 'NR >= m - 4 && NR <= m + 3 { print (NR == m ? ">> " : "   ") $0 }' \
  "$work/frozen.txt"
after_match=$((total - line))
if [ "$after_match" -eq "$after" ]; then
  echo "   ... and $after_match records after it: the rings froze exactly $after records after the match"
else
  echo "   ... and $after_match records after it (armed for $after, counted over all threads)"
fi
stop_iograph

# --- 7. export ------------------------------------------------------------------------------
say "nanotrace export: the recording as Perfetto protobuf and as CTF, which babeltrace2 reads"
quiet "$NT" export "$work/run.ntr" -f perfetto -o "$kept/iograph.perfetto-trace" \
  --slice iograph:node_submit,iograph:node_complete,node
quiet "$NT" export "$work/run.ntr" -f ctf -o "$work/ctf"
# babeltrace2 warns on stderr about records the flight recorder overwrote before `record`.
babeltrace2 "$work/ctf" >"$work/babeltrace.txt" 2>"$work/babeltrace.err" ||
  { cat "$work/babeltrace.err" >&2; exit 1; }
echo "Perfetto: $kept/iograph.perfetto-trace ($(stat -c %s "$kept/iograph.perfetto-trace") bytes; open it in https://ui.perfetto.dev)"
echo "CTF: babeltrace2 reads $(wc -l <"$work/babeltrace.txt") events (the recording holds $recorded)"

# --- 8. report ------------------------------------------------------------------------------
say "nanotrace report: one self-contained HTML page (summary, counts, latency histograms, timeline)"
quiet "$NT" report "$work/run.ntr" -o "$kept/report.html"
echo "open $kept/report.html"
