#!/bin/bash
# `nanotrace agent --kernel sched`: the agent keeps the kernel's last events of its node's
# traced processes in an overwrite ftrace instance of its own, and a round's snapshot carries
# their window beside the rings. One node, alone (no broker reachable: the trigger fires, the
# agent copies its node locally), in a mount namespace of its own (a private /dev/shm, so the
# agent sees only the test's producer) but the host's PID namespace (ftrace's filters name
# the kernel's thread ids).
#
#   - the snapshot of the round holds the producer's records and sched events of its thread,
#     after the trigger's match as well as before it;
#   - the manifest counts the kernel sub-buffers copied;
#   - the agent's ftrace instance is gone when the agent stops.
#
# Usage: fleet_kernel_test.sh BIN_DIR   (root; tracefs)
set -u
BIN=$1
NT=$BIN/nanotrace
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (ftrace, namespaces)"
TRACEFS=/sys/kernel/tracing
[ -d $TRACEFS/instances ] || mount -t tracefs nodev $TRACEFS 2>/dev/null || skip "no tracefs"
[ -d $TRACEFS/instances ] || skip "no tracefs"

T=$(mktemp -d /tmp/nanotrace-fleet-kernel.XXXXXX)
chmod 700 "$T"
cleanup() {
  touch "$T/stop"
  for _ in $(seq 100); do [ -e "$T/done" ] && break; sleep 0.05; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
printf 'token = kernel-test\n' >"$T/creds"
chmod 600 "$T/creds"

# The node: the producer and the agent in a mount namespace of their own, until $T/stop.
cat >"$T/node.sh" <<'NODE'
#!/bin/bash
T=$1; BIN=$2
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
NANOTRACE_NAME=kproducer "$BIN/nanotrace_fleet_producer" --slow "$T/slow" --period-us 500 \
  >/dev/null </dev/null &
echo $! >"$T/producer.pid"
"$BIN/nanotrace" agent --node knode --spool "$T/spool" --broker nats://127.0.0.1:1 \
  --credentials "$T/creds" --kernel sched --kernel-flight-buffer 256 --scan-ms 100 \
  2>"$T/agent.log" &
echo $! >"$T/agent.pid"
while [ ! -e "$T/stop" ]; do
  # The test arms the producer from inside (its segment is in this /dev/shm).
  if [ -e "$T/arm" ]; then
    "$BIN/nanotrace" arm "$(cat "$T/producer.pid")" 'test:io lat_us>10000' --after 2ms \
      >"$T/arm.out" 2>&1
    echo $? >"$T/armed"
    rm "$T/arm"
  fi
  sleep 0.05
done
kill -TERM "$(cat "$T/agent.pid")" "$(cat "$T/producer.pid")"
wait
touch "$T/done"
NODE
chmod +x "$T/node.sh"
unshare --mount "$T/node.sh" "$T" "$BIN" &

wait_for() {  # wait_for SECONDS COMMAND...
  local n=$(($1 * 20)); shift
  for _ in $(seq $n); do "$@" && return 0; sleep 0.05; done
  return 1
}
wait_for 20 grep -qs "keeping the kernel's last events in ftrace instance" "$T/agent.log" ||
  fail "the agent did not start its ftrace instance: $(cat "$T/agent.log")"
instance=$(sed -n "s/.*keeping the kernel's last events in ftrace instance \(.*\)$/\1/p" "$T/agent.log")
[ -d "$TRACEFS/instances/$instance" ] || fail "no instance $instance"
[ "$(cat "$TRACEFS/instances/$instance/tracing_on")" = 1 ] || fail "$instance is not tracing"
touch "$T/arm"
wait_for 10 test -e "$T/armed" || fail "not armed"
[ "$(cat "$T/armed")" = 0 ] || fail "arm: $(cat "$T/arm.out")"
sleep 0.5  # kernel events before the match
touch "$T/slow"
# The spool writes each file under a tmp- name and renames it; the manifest comes last.
wait_for 20 sh -c "ls '$T'/spool/*.json 2>/dev/null | grep -qv '/tmp-'" ||
  fail "no round: $(cat "$T/agent.log")"
manifest=$(ls "$T"/spool/*.json | grep -v '/tmp-')
snap=$(ls "$T"/spool/*.nt | grep -v '/tmp-')
"$NT" dump --json "$snap" >"$T/dump.jsonl" || fail "dump of $snap"
/usr/bin/python3 - "$manifest" "$T/dump.jsonl" "$(cat "$T/producer.pid")" <<'PY' || fail "the round's kernel events"
import json, sys
m = json.load(open(sys.argv[1]))
pid = int(sys.argv[3])
p = m["processes"][0]
assert len(m["processes"]) == 1 and p["pid"] == pid, m
assert p["kernel_pages"] > 0, p
origin = m["origins"][0]
assert origin["pid"] == pid and origin["event"] == "test:io", origin
user, mine, after = 0, 0, 0
match = None
for line in open(sys.argv[2]):
    r = json.loads(line)
    if "kernel" not in r:
        user += 1
        if r.get("seq") == origin["seq"] and r.get("tid") == origin["tid"]:
            match = r["time_ns"]
        continue
    f = r.get("fields", {})
    if r["event"] == "sched:sched_switch" and pid in (f.get("prev_pid"), f.get("next_pid")):
        mine += 1
        if match is not None and r["time_ns"] > match:
            after += 1
assert user > 100, user
assert match is not None, "the matching record is not in the snapshot"
assert mine > 10, f"{mine} sched_switch events of the producer's thread"
assert after > 0, "no kernel event after the match"
print(f"ok: the round's snapshot holds {user} records and {mine} sched_switch events of the "
      f"producer ({after} after the match), {p['kernel_pages']} kernel sub-buffers")
PY
[ $? = 0 ] || exit 1
touch "$T/stop"
wait_for 10 test -e "$T/done" || fail "the node did not stop"
[ -d "$TRACEFS/instances/$instance" ] && fail "instance $instance left behind"
echo "ok: the agent's ftrace instance went with it"
echo "PASS"
