#!/bin/bash
# A stuck operation on one node of four freezes the whole fleet: four nodes on one machine,
# each in its own network, mount and PID namespaces with one traced program (pairs of
# dur:begin / dur:end every millisecond) and one agent; nats-server on the host. `fleet arm`
# arms the stuck trigger `dur:begin..dur:end by req open > 100ms` in every node's program;
# node 3's program then begins an operation it never ends. The trigger fires on node 3 while
# the operation is open, every node freezes and is collected, and the merged trace names the
# open operation (node 3, its thread and its begin record, whose end is nowhere).
#
# Usage: fleet_duration_test.sh BIN_DIR   (root; nats-server installed)
set -u
BIN=$1
NT=$BIN/nanotrace
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (namespaces)"
command -v nats-server >/dev/null || skip "nats-server is not installed"

T=$(mktemp -d /tmp/nanotrace-fleet-duration.XXXXXX)
chmod 700 "$T"
TAG=$$
BR=ntfd$((TAG % 100000))
NET=10.$((150 + TAG % 50)).$((TAG / 50 % 250)).
. "$(dirname "$0")/test_port.sh"
PORT=$(test_port $((TAG + 7)) 0)
NATS_PID=""

cleanup() {
  touch "$T/stop"
  for n in 1 2 3 4; do
    for pid in $(ip netns pids ntd$TAG-$n 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
  done
  sleep 0.3
  for n in 1 2 3 4; do
    for pid in $(ip netns pids ntd$TAG-$n 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del ntd$TAG-$n 2>/dev/null
  done
  [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null
  ip link del "$BR" 2>/dev/null
  wait 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

ip link add "$BR" type bridge || fail "cannot create a bridge"
ip addr add ${NET}1/24 dev "$BR"
ip link set "$BR" up
for n in 1 2 3 4; do
  ns=ntd$TAG-$n
  ip netns add $ns || fail "cannot create network namespace"
  ip link add ntd${TAG}h$n type veth peer name eth0 netns $ns
  ip link set ntd${TAG}h$n master "$BR" up
  ip -n $ns addr add ${NET}$((10 + n))/24 dev eth0
  ip -n $ns link set eth0 up
  ip -n $ns link set lo up
done

printf 'user = nanotrace\npassword = duration-%s\n' "$TAG" >"$T/creds"
chmod 600 "$T/creds"
cat >"$T/nats.conf" <<CONF
listen: ${NET}1:$PORT
authorization { user: nanotrace, password: "duration-$TAG" }
CONF
nats-server -c "$T/nats.conf" >>"$T/nats.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 100); do
  (exec 3<>/dev/tcp/${NET}1/$PORT) 2>/dev/null && break
  sleep 0.05
done
URL=nats://${NET}1:$PORT
FLEET=(--broker "$URL" --credentials "$T/creds" --fleet d$TAG)

cat >"$T/node.sh" <<'NODE'
#!/bin/bash
# Inside the node's namespaces: a private /dev/shm and spool, the traced program (its stdin a
# pipe that stays open) and the agent.
n=$1; T=$2; BIN=$3; URL=$4; FLEETNAME=$5
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mkdir -p "$T/spool$n" && mount -t tmpfs -o mode=700 tmpfs "$T/spool$n"
sleep 1000 | NANOTRACE_NAME=pairs$n "$BIN/nanotrace_pairs_producer" serve "$T/stuck$n" \
  >/dev/null &
exec "$BIN/nanotrace" agent --node node$n --spool "$T/spool$n" --broker "$URL" \
  --credentials "$T/creds" --fleet "$FLEETNAME" --rate 2s --scan-ms 200 2>>"$T/agent$n.log"
NODE
chmod +x "$T/node.sh"
for n in 1 2 3 4; do
  ip netns exec ntd$TAG-$n unshare --mount --pid --fork --mount-proc \
    "$T/node.sh" $n "$T" "$BIN" "$URL" d$TAG &
done

for _ in $(seq 100); do
  out=$("$NT" fleet status "${FLEET[@]}" --nodes 4 --timeout-ms 1000 --json 2>/dev/null) &&
    [ "$(echo "$out" | /usr/bin/python3 -c 'import json,sys; a=json.load(sys.stdin); print(sum(len(n["processes"]) for n in a if n["connected"]))')" = 4 ] &&
    break
  sleep 0.1
done
[ "$(echo "${out:-[]}" | /usr/bin/python3 -c 'import json,sys; a=json.load(sys.stdin); print(sum(len(n["processes"]) for n in a if n["connected"]))')" = 4 ] ||
  fail "the 4 agents did not all report their program"

STUCK='dur:begin..dur:end by req open > 100ms'
"$NT" fleet arm "$STUCK" --after 1ms --nodes 4 "${FLEET[@]}" >"$T/arm.out" ||
  fail "fleet arm: $(cat "$T/arm.out")"
[ "$(grep -c '^  process' "$T/arm.out")" = 4 ] || fail "not armed in 4 processes: $(cat "$T/arm.out")"
# An unknown key is refused by every node's program, in one line each (`fleet arm` reports
# each process's answer).
"$NT" fleet arm 'dur:begin..dur:end by nokey open > 100ms' --nodes 4 "${FLEET[@]}" \
  >"$T/bad-arm.out" 2>&1
[ "$(grep -c "process .*: event dur:begin has no field 'nokey' (the key)$" "$T/bad-arm.out")" = 4 ] ||
  fail "not refused by the 4 programs: $(cat "$T/bad-arm.out")"
"$NT" fleet arm "$STUCK" --after 1ms --nodes 4 "${FLEET[@]}" >"$T/arm.out" ||
  fail "fleet arm again: $(cat "$T/arm.out")"

touch "$T/stuck3"
"$NT" fleet collect --nodes 4 --wait 20s --dir "$T/c1" "${FLEET[@]}" || fail "collect"
[ "$(ls "$T/c1"/*.nt 2>/dev/null | wc -l)" = 4 ] || fail "not 4 snapshots: $(ls "$T/c1")"
"$NT" merge "$T/c1"/*.nt -o "$T/merged.nt" --json >"$T/merge.json" || fail "merge: $(cat "$T/merge.json")"
"$NT" dump "$T/merged.nt" --json >"$T/merged.jsonl" || fail "dump of the merged trace"
/usr/bin/python3 - "$T/c1" "$T/merge.json" "$T/merged.jsonl" <<'PY' || fail "the merged trace"
import glob, json, os, sys
d, merge, dump = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]
manifests = [json.load(open(f)) for f in glob.glob(os.path.join(d, "*.json"))]
assert sorted(m["node"] for m in manifests) == ["node1", "node2", "node3", "node4"], manifests
for m in manifests:
    o = m["origins"][0]
    assert o["node"] == "node3" and o["event"] == "dur:begin", o
o = merge["origin"]
assert o["hostname"] == "node3" and o["event"] == "dur:begin", o
records = [json.loads(l) for l in open(dump)]
assert len(records) > 400, len(records)
# The origin is the open operation's begin record: node 3's, req 424242, and no end of it.
begin = [r for r in records if r["node"] == o["hostname"] and r["pid"] == o["pid"]
         and r["tid"] == o["tid"] and r["seq"] == o["seq"]]
assert len(begin) == 1, (o, begin)
assert begin[0]["event"] == "dur:begin" and begin[0]["fields"]["req"] == 424242, begin
assert not [r for r in records if r["event"] == "dur:end" and r["fields"]["req"] == 424242]
print("ok: node 3's open operation froze 4 nodes; the merged trace names it")
PY
[ $? = 0 ] || exit 1
# Node 3's snapshot keeps the trigger's facts: status names the open operation and its age.
named=0
for f in "$T/c1"/*.nt; do
  "$NT" status "$f" >"$T/status.out" 2>&1 || fail "status $f: $(cat "$T/status.out")"
  if grep -q "stuck: record" "$T/status.out"; then
    grep -Eq "stuck: record #[0-9]+ of thread [0-9]+ \(dur:begin req=424242 len=65536\), req=424242, open [0-9.]+ ms when it fired \(> 100.00 ms\)" \
      "$T/status.out" || fail "the open operation is not named: $(cat "$T/status.out")"
    named=$((named + 1))
  fi
done
[ $named = 1 ] || fail "$named snapshots name a stuck operation, not node 3's alone"
echo "PASS"
