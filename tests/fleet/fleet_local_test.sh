#!/bin/bash
# One agent alone (no broker reachable), two traced producers A and B in a mount namespace of
# their own (a private /dev/shm, so the agent sees only them), each armed from inside:
#
#   - A fires: its node freezes and is copied; the announcement, repeated for --announce-for,
#     reaches no server: counted local-only, logged;
#   - B fires within the --rate interval: held back (counted rate-limited, frozen, to be copied
#     when the interval ends), then B exits long before it does: the agent copies B's firing
#     when it sees B gone (round ID-local, B's matching record in it), not never;
#   - the agent's /metrics counts both and passes `promtool check metrics`.
#
# Usage: fleet_local_test.sh BIN_DIR   (root: mount namespaces; promtool)
set -u
BIN=$1
NT=$BIN/nanotrace
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mount namespaces)"
command -v promtool >/dev/null || skip "promtool (package prometheus) is not installed"

T=$(mktemp -d /tmp/nanotrace-fleet-local.XXXXXX)
chmod 700 "$T"
. "$(dirname "$0")/test_port.sh"
METRICS=127.0.0.1:$(test_port $$ 0)
cleanup() {
  touch "$T/stop"
  for _ in $(seq 100); do [ -e "$T/done" ] && break; sleep 0.05; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
printf 'token = local#test\n' >"$T/creds"
chmod 600 "$T/creds"

# The node: the producers and the agent in a mount namespace of their own, until $T/stop.
cat >"$T/node.sh" <<'NODE'
#!/bin/bash
T=$1; BIN=$2; METRICS=$3
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
for p in a b; do
  NANOTRACE_NAME=producer-$p "$BIN/nanotrace_fleet_producer" --slow "$T/slow-$p" \
    --period-us 500 >/dev/null </dev/null &
  echo $! >"$T/$p.pid"
done
"$BIN/nanotrace" agent --node lnode --spool "$T/spool" --broker nats://127.0.0.1:1 \
  --credentials "$T/creds" --rate 60s --announce-for 1s --scan-ms 100 --metrics "$METRICS" \
  2>"$T/agent.log" &
echo $! >"$T/agent.pid"
while [ ! -e "$T/stop" ]; do
  for p in a b; do  # the test arms the producers from inside (their segments are here)
    if [ -e "$T/arm-$p" ]; then
      "$BIN/nanotrace" arm "$(cat "$T/$p.pid")" 'test:io lat_us>10000' --after 2ms \
        >"$T/arm-$p.out" 2>&1
      echo $? >"$T/armed-$p"
      rm "$T/arm-$p"
    fi
  done
  [ -e "$T/end-b" ] && kill -TERM "$(cat "$T/b.pid")" && rm "$T/end-b"
  sleep 0.02
done
kill -TERM "$(cat "$T/agent.pid")" "$(cat "$T/a.pid")" "$(cat "$T/b.pid")" 2>/dev/null
wait
touch "$T/done"
NODE
chmod +x "$T/node.sh"
unshare --mount "$T/node.sh" "$T" "$BIN" "$METRICS" &

wait_for() {  # wait_for SECONDS COMMAND...
  local n=$(($1 * 20)); shift
  for _ in $(seq $n); do "$@" && return 0; sleep 0.05; done
  return 1
}
metrics() {
  /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
    "http://$METRICS/metrics"
}
metric() {  # metric NAME: its value (one sample)
  metrics | awk -v m="$1" '$1 ~ "^"m"[{ ]" {print $2}'
}
wait_for 20 sh -c "grep -sc 'watching process' '$T/agent.log' | grep -q 2" ||
  fail "the agent did not find the 2 producers: $(cat "$T/agent.log")"
a=$(cat "$T/a.pid"); b=$(cat "$T/b.pid")
touch "$T/arm-a" "$T/arm-b"
wait_for 10 sh -c "test -e '$T/armed-a' && test -e '$T/armed-b'" || fail "not armed"
[ "$(cat "$T/armed-a")$(cat "$T/armed-b")" = 00 ] || fail "arm: $(cat "$T"/arm-*.out)"

# A fires: the node's round.
touch "$T/slow-a"
wait_for 20 sh -c "ls '$T'/spool/*.lnode.json >/dev/null 2>&1" || fail "no round: $(cat "$T/agent.log")"
# B fires within the 60 s interval: held back.
touch "$T/slow-b"
wait_for 20 grep -q "process $b fired .* within the rate interval" "$T/agent.log" ||
  fail "B's firing was not held back: $(cat "$T/agent.log")"
# B ends long before the interval does.
touch "$T/end-b"
wait_for 20 grep -q "process $b ended within the rate interval" "$T/agent.log" ||
  fail "B's end was not seen: $(cat "$T/agent.log")"
wait_for 20 sh -c "ls '$T'/spool/*-local.lnode.json >/dev/null 2>&1" ||
  fail "B's held-back firing was not copied: $(ls "$T/spool"; cat "$T/agent.log")"
local=$(ls "$T"/spool/*-local.lnode.json)
snap=$(ls "$T"/spool/*-local.lnode.$b.nt) || fail "no snapshot of B"
"$BIN/nanotrace_fleet_snapshot_info" "$snap" >"$T/b.info" || fail "B's snapshot unreadable"
/usr/bin/python3 - "$local" "$T/b.info" "$b" <<'PY' || fail "B's copied firing"
import json, sys
m = json.load(open(sys.argv[1]))
s = json.loads(open(sys.argv[2]).read())
b = int(sys.argv[3])
assert [p["pid"] for p in m["processes"]] == [b] and "error" not in m["processes"][0], m
o = m["origins"][0]
assert len(m["origins"]) == 1 and o["pid"] == b and o["event"] == "test:io", m
assert s["pid"] == b and s["trigger_state"] == "frozen", s
slow = s["slow"]
assert len(slow) == 1 and slow[0]["seq"] == o["seq"] and slow[0]["tid"] == o["tid"], (slow, o)
assert s["records"] > 10 and s["first_realtime_ns"] < o["match_realtime_ns"], s
print(f"ok: B (pid {b}) fired within the rate interval and ended: its firing was copied "
      f"({s['records']} records, the matching one #{o['seq']} among them)")
PY
[ $? = 0 ] || exit 1

# A's announcement reached no server in --announce-for: local-only. The counts, and promtool.
wait_for 20 grep -q "reached no server" "$T/agent.log" || fail "A's announcement: $(cat "$T/agent.log")"
local_only_counted() { [ "$(metric nanotrace_fleet_local_only_total)" = 1 ]; }
wait_for 10 local_only_counted ||
  fail "local_only: $(metrics | grep fleet_)"
[ "$(metric nanotrace_fleet_rate_limited_total)" = 1 ] || fail "rate_limited: $(metrics | grep fleet_)"
[ "$(metric nanotrace_fleet_snapshots_total)" = 3 ] || fail "snapshots: $(metrics | grep fleet_)"
metrics >"$T/metrics.txt"
promtool check metrics <"$T/metrics.txt" >"$T/promtool.out" 2>&1 ||
  fail "promtool check metrics: $(cat "$T/promtool.out")"
echo "ok: /metrics counts 1 local-only and 1 rate-limited firing, 3 snapshots (A and B in A's round, B's own); promtool passes"
echo "PASS"
