#!/bin/bash
# The fleet end to end, on one machine: four nodes, each in its own network namespace (a veth
# pair to a bridge on the host), mount namespace (its own /dev/shm and spool) and PID
# namespace, with one traced producer and one agent each; a cluster of three nats-servers on
# the host (routes on 127.0.0.1), requiring a user and a password that holds a '#'; every agent
# and command given the three; Prometheus on the host scraping every agent's /metrics; a
# chronyd (its own command socket, a local reference, not steering the clock) that node 1 asks.
#
#   1. A slow I/O on node 3 freezes every node; each node's snapshot holds the matching
#      record's time, and names node 3, its process, thread and record as the origin; its
#      NODE chunk names its node and carries clock pairs and the clock sync (chrony on node 1,
#      unknown elsewhere); `nanotrace merge` of the round is in exact time order and names
#      node 3 as the origin; each node copied its rings --copy-delay after it learned of
#      the freeze.
#   2. An agent killed mid-test, and a server of the cluster killed mid-round: the server of
#      node 3's agent is stopped, node 1 fires (its announcement stuck in that server, for
#      node 3), the server is killed: every live node freezes (node 3 on a repeat of the
#      announcement, once it has reconnected to another server); the killed agent's restart
#      loses no armed trigger (the trigger lives in the traced process).
#   3. The whole cluster stopped: a local trigger still freezes its node, whose announcement
#      reaches no server while it is repeated (counted local-only); the agents reconnect.
#   4. Bad credentials are refused and logged; a credentials file others can read is refused;
#      a fetch naming a path outside the spool, or a FIFO in it, is refused at once.
#   5. Prometheus scrapes the agents and the values come back from its query API, the
#      clock's error bound among them (chrony's on node 1, NaN: unknown, elsewhere); every
#      agent's /metrics passes `promtool check metrics`.
#   6. A stuck operation: a waiter (an I/O begun, never ended) starts on node 2. Node 2's agent
#      (given the pair rule with --pair before any of its processes has the events) finds it:
#      its /metrics gives the age of the oldest open operation, growing, and passes promtool;
#      Prometheus's alert `nanotrace_pair_oldest_open_seconds > 0.5` fires for node 2 alone;
#      `fleet top` lists the waiter first with its node, key and thread, its age growing from
#      one call to the next.
#
# Usage: fleet_system_test.sh BIN_DIR   (root; nats-server, prometheus (promtool), chrony;
# BIN_DIR holds the tool, the fleet's test programs and waiter_program of tests/live)
set -u
BIN=$1
NT=$BIN/nanotrace
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (namespaces)"
command -v nats-server >/dev/null || skip "nats-server is not installed"
command -v prometheus >/dev/null || skip "prometheus is not installed"
command -v promtool >/dev/null || skip "promtool (package prometheus) is not installed"
[ -x /usr/sbin/chronyd ] || skip "chrony is not installed"

T=$(mktemp -d /tmp/nanotrace-fleet.XXXXXX)
chmod 700 "$T"
TAG=$$
BR=ntfb$((TAG % 100000))
NET=10.$((200 + TAG % 50)).$((TAG / 50 % 250)).
. "$(dirname "$0")/test_port.sh"
PORT=$(test_port "$TAG" 30)  # server i (1-3): clients PORT+i, routes PORT+10+i, monitor PORT+20+i
PROM_PORT=$((PORT + 30))
NATS_PIDS=(0 "" "" ""); PROM_PID=""; CHRONY_PID=""

cleanup() {
  touch "$T/stop"
  for n in 1 2 3 4; do
    for pid in $(ip netns pids ntf$TAG-$n 2>/dev/null); do kill -TERM "$pid" 2>/dev/null; done
  done
  sleep 0.5
  for n in 1 2 3 4; do
    for pid in $(ip netns pids ntf$TAG-$n 2>/dev/null); do kill -KILL "$pid" 2>/dev/null; done
    ip netns del ntf$TAG-$n 2>/dev/null
  done
  for i in 1 2 3; do [ -n "${NATS_PIDS[$i]}" ] && kill -KILL "${NATS_PIDS[$i]}" 2>/dev/null; done
  [ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null
  [ -n "$CHRONY_PID" ] && kill "$CHRONY_PID" 2>/dev/null
  ip link del "$BR" 2>/dev/null
  wait 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

# --- Network: a bridge on the host, one veth pair per node ------------------------------------
ip link add "$BR" type bridge || fail "cannot create a bridge"
ip addr add ${NET}1/24 dev "$BR"
ip link set "$BR" up
for n in 1 2 3 4; do
  ns=ntf$TAG-$n
  ip netns add $ns || fail "cannot create network namespace"
  ip link add ntf${TAG}h$n type veth peer name eth0 netns $ns
  ip link set ntf${TAG}h$n master "$BR" up
  ip -n $ns addr add ${NET}$((10 + n))/24 dev eth0
  ip -n $ns link set eth0 up
  ip -n $ns link set lo up
done

# --- A cluster of three brokers, with credentials ------------------------------------------------
# The password holds a '#': the credentials file gives it as written.
printf 'user = nanotrace\npassword = fleet#%s\n' "$TAG" >"$T/creds"
chmod 600 "$T/creds"
printf 'user = nanotrace\npassword = wrong\n' >"$T/bad-creds"
chmod 600 "$T/bad-creds"
for i in 1 2 3; do
  cat >"$T/nats$i.conf" <<CONF
server_name: s$i
listen: ${NET}1:$((PORT + i))
http: 127.0.0.1:$((PORT + 20 + i))
authorization { user: nanotrace, password: "fleet#$TAG" }
cluster {
  name: ntf$TAG
  listen: 127.0.0.1:$((PORT + 10 + i))
  routes: [nats://127.0.0.1:$((PORT + 11)), nats://127.0.0.1:$((PORT + 12)), nats://127.0.0.1:$((PORT + 13))]
}
CONF
done
start_nats() {  # start_nats I: server I, once it accepts clients
  nats-server -c "$T/nats$1.conf" >>"$T/nats$1.log" 2>&1 &
  NATS_PIDS[$1]=$!
  for _ in $(seq 100); do
    (exec 3<>/dev/tcp/${NET}1/$((PORT + $1))) 2>/dev/null && return 0
    sleep 0.05
  done
  fail "nats-server $1 did not start: $(tail -3 "$T/nats$1.log")"
}
stop_nats() {  # stop_nats I
  [ -n "${NATS_PIDS[$1]}" ] || return 0
  kill -KILL "${NATS_PIDS[$1]}" 2>/dev/null; wait "${NATS_PIDS[$1]}" 2>/dev/null; NATS_PIDS[$1]=""
}
# monitor I PATH: server I's monitoring endpoint (JSON).
monitor() {
  /usr/bin/python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
    "http://127.0.0.1:$((PORT + 20 + $1))$2"
}
routes_up() {
  for i in 1 2 3; do
    [ "$(monitor $i /routez 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["num_routes"])' 2>/dev/null)" = 2 ] || return 1
  done
}
for i in 1 2 3; do start_nats $i; done
URL=nats://${NET}1:$((PORT + 1)),nats://${NET}1:$((PORT + 2)),nats://${NET}1:$((PORT + 3))
FLEET=(--broker "$URL" --credentials "$T/creds" --fleet t$TAG)

# --- Clock sync: a chronyd on a command socket of its own, for node 1 -------------------------
mkdir -m 700 "$T/chrony"
printf 'local stratum 8\ncmdport 0\nbindcmdaddress %s\npidfile %s\ndriftfile %s\n' \
  "$T/chrony/chronyd.sock" "$T/chrony/chronyd.pid" "$T/chrony/drift" >"$T/chrony/chrony.conf"
/usr/sbin/chronyd -x -u root -d -l "$T/chrony/log" -f "$T/chrony/chrony.conf" >/dev/null 2>&1 &
CHRONY_PID=$!
for _ in $(seq 200); do
  chronyc -h "$T/chrony/chronyd.sock" -c -n tracking >/dev/null 2>&1 && break
  sleep 0.05
done
chronyc -h "$T/chrony/chronyd.sock" -c -n tracking >/dev/null 2>&1 || fail "chronyd did not start"

# --- Nodes: a producer and an agent each, in their own mount and PID namespaces ---------------
cat >"$T/node.sh" <<'NODE'
#!/bin/bash
# Inside the node's namespaces: a private /dev/shm and spool, then the producer and the agent
# (restarted when it dies, as systemd would). Node 1's agent asks the test's chronyd.
n=$1; T=$2; BIN=$3; URL=$4; FLEETNAME=$5; ADDR=$6
[ "$n" = 1 ] && export NANOTRACE_CHRONY_SOCKET=$T/chrony/chronyd.sock
PAIR=()  # node 2's live view is given its pair rule (section 6's waiter has its events)
[ "$n" = 2 ] && PAIR=(--pair io:submit,io:complete,req)
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
mkdir -p "$T/spool$n" && mount -t tmpfs -o mode=700 tmpfs "$T/spool$n"
NANOTRACE_NAME=producer$n "$BIN/nanotrace_fleet_producer" --slow "$T/slow$n" >/dev/null </dev/null &
while [ ! -e "$T/stop" ]; do
  "$BIN/nanotrace" agent --node node$n --spool "$T/spool$n" --broker "$URL" \
    --credentials "$T/creds" --fleet "$FLEETNAME" --metrics "$ADDR:9464" --rate 2s \
    --scan-ms 200 --copy-delay 100ms --announce-for 2s "${PAIR[@]}" 2>>"$T/agent$n.log"
  echo "agent exited: $?" >>"$T/agent$n.log"
  sleep 0.2
  while [ -e "$T/down$n" ]; do sleep 0.05; done  # the test keeps this node's agent down
done
NODE
chmod +x "$T/node.sh"
for n in 1 2 3 4; do
  ip netns exec ntf$TAG-$n unshare --mount --pid --fork --mount-proc \
    "$T/node.sh" $n "$T" "$BIN" "$URL" t$TAG ${NET}$((10 + n)) &
done

# --- Prometheus, scraping every agent every second --------------------------------------------
# The alert an on-call engineer sets on a stuck operation (section 6).
cat >"$T/rules.yml" <<RULES
groups:
  - name: nanotrace
    rules:
      - alert: NanotraceStuckOperation
        expr: nanotrace_pair_oldest_open_seconds > 0.5
RULES
cat >"$T/prometheus.yml" <<PROM
global: { scrape_interval: 1s, scrape_timeout: 900ms, evaluation_interval: 1s }
rule_files: ['$T/rules.yml']
scrape_configs:
  - job_name: nanotrace
    static_configs:
      - targets: ['${NET}11:9464', '${NET}12:9464', '${NET}13:9464', '${NET}14:9464']
PROM
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/prom" \
  --web.listen-address=127.0.0.1:$PROM_PORT >"$T/prometheus.log" 2>&1 &
PROM_PID=$!

# Waits until every agent answers with one traced process.
wait_nodes() {
  for _ in $(seq 100); do
    out=$("$NT" fleet status "${FLEET[@]}" --nodes 4 --timeout-ms 1000 --json 2>/dev/null) &&
      [ "$(echo "$out" | /usr/bin/python3 -c 'import json,sys; a=json.load(sys.stdin); print(sum(len(n["processes"]) for n in a if n["connected"]))')" = 4 ] &&
      return 0
    sleep 0.1
  done
  "$NT" fleet status "${FLEET[@]}" --nodes 4
  fail "the 4 agents did not all report their producer"
}
wait_nodes
for _ in $(seq 100); do routes_up && break; sleep 0.1; done
routes_up || fail "the three servers did not form a cluster: $(tail -3 "$T"/nats*.log)"
echo "ok: 4 agents up, one producer each; 3 servers in a cluster"

# --- 1. A slow I/O on node 3 freezes every node ------------------------------------------------
"$NT" fleet arm 'test:io lat_us>10000' --after 1ms --nodes 4 "${FLEET[@]}" >"$T/arm.out" ||
  fail "fleet arm: $(cat "$T/arm.out")"
[ "$(grep -c '^  process' "$T/arm.out")" = 4 ] || fail "not armed in 4 processes: $(cat "$T/arm.out")"
touch "$T/slow3"
"$NT" fleet collect --nodes 4 --wait 20s --dir "$T/c1" "${FLEET[@]}" || fail "collect round 1"
round1_end=$EPOCHREALTIME
ls "$T/c1"/*.nt >/dev/null 2>&1 || fail "no snapshot collected"
"$BIN/nanotrace_fleet_snapshot_info" "$T/c1"/*.nt >"$T/c1.info" || fail "snapshots unreadable"
/usr/bin/python3 - "$T/c1" "$T/c1.info" <<'PY' || fail "round 1 content"
import json, os, sys, glob
d, info = sys.argv[1], [json.loads(l) for l in open(sys.argv[2])]
manifests = [json.load(open(f)) for f in glob.glob(os.path.join(d, "*.json"))]
assert len(manifests) == 4, f"{len(manifests)} manifests"
assert sorted(m["node"] for m in manifests) == ["node1", "node2", "node3", "node4"]
origin = manifests[0]["origins"][0]
for m in manifests:
    o = m["origins"][0]
    assert o["node"] == "node3" and o["event"] == "test:io", o
    assert o == origin, (o, origin)
    assert len(m["processes"]) == 1 and "error" not in m["processes"][0], m
    # Each node copies --copy-delay after it learned of the freeze, not at once.
    t = m["timing"]
    learned = t["seen_ns"] if m["node"] == "node3" else t["received_ns"]
    assert t["copied_ns"] - learned >= 100_000_000, t
assert len(info) == 4, info
match = origin["match_realtime_ns"]
for s in info:
    mode = oct(os.stat(s["file"]).st_mode & 0o777)
    assert mode == "0o600", (s["file"], mode)
    assert s["trigger_state"] == "frozen", s
    # Each snapshot holds the matching time: records before it and up to its freeze.
    assert s["first_realtime_ns"] < match, ("no history before the match", s)
    assert s["frozen_realtime_ns"] >= match, s
    assert s["records"] > 100, s
node3 = [s for s in info if s["name"] == "producer3"][0]
assert len(node3["slow"]) == 1, node3
slow = node3["slow"][0]
assert slow["tid"] == origin["tid"] and slow["seq"] == origin["seq"], (slow, origin)
assert node3["pid"] == origin["pid"]
assert abs(slow["realtime_ns"] - match) < 1000, (slow, match)
assert node3["trigger_event"] != 0
for s in info:
    if s["name"] != "producer3":
        assert s["slow"] == [] and s["trigger_event"] == 0, s  # frozen on the fleet's request
# Each snapshot's NODE chunk: the agent's node name, clock pairs taken at the copy, the clock
# sync its node has (node 1 asks a chronyd), and the trigger origin on node 3 alone.
for s in info:
    assert len(s["nodes"]) == 1, s
    n, node = s["nodes"][0], "node" + s["name"][len("producer"):]
    assert n["hostname"] == node and n["clock_pairs"] == 8, s
    if node == "node1":
        assert n["sync_source"] == "chrony" and n["synchronised"], n
        assert n["sync_bound_ns"] is not None and n["sync_bound_ns"] < 1000000, n
    else:
        assert n["sync_source"] == "unknown" and n["sync_bound_ns"] is None, n
    if node == "node3":
        assert n["has_origin"] and n["origin_pid"] == origin["pid"], n
        assert n["origin_tid"] == origin["tid"] and n["origin_seq"] == origin["seq"], n
        assert n["origin_event"] == "test:io", n
    else:
        assert not n["has_origin"], n
lat = max(m["latency_ns"] for m in manifests)
print(f"ok: round 1: 4 nodes frozen, origin node3 pid {origin['pid']} tid {origin['tid']} "
      f"record #{origin['seq']}, last node frozen {lat/1e6:.2f} ms after the match")
PY
[ $? = 0 ] || exit 1
# The collected snapshots merge into one trace: exact time order on one host (the nodes share
# the machine and its boot, so one clock), node 3 named as the origin, node 1's clock sync kept.
"$NT" merge "$T/c1"/*.nt -o "$T/merged.nt" --json >"$T/merge.json" || fail "merge: $(cat "$T/merge.json")"
"$NT" dump "$T/merged.nt" --json >"$T/merged.jsonl" || fail "dump of the merged trace"
/usr/bin/python3 - "$T/merge.json" "$T/merged.jsonl" "$T/c1" <<'PY' || fail "merged trace"
import json, glob, os, sys
m = json.load(open(sys.argv[1]))
origin = json.load(open(glob.glob(os.path.join(sys.argv[3], "*.json"))[0]))["origins"][0]
o = m["origin"]
assert o["hostname"] == "node3" and o["pid"] == origin["pid"] and o["tid"] == origin["tid"], o
assert o["seq"] == origin["seq"], (o, origin)
assert sorted(n["hostname"] for n in m["nodes"]) == ["node1", "node2", "node3", "node4"], m
for n in m["nodes"]:
    assert n["alignment"] in ("reference", "shared-clock"), n
    assert n["sync_source"] == ("chrony" if n["hostname"] == "node1" else "unknown"), n
times = [json.loads(l)["time_ns"] for l in open(sys.argv[2])]
assert len(times) > 400 and times == sorted(times), "merged records out of time order"
print(f"ok: merged {len(times)} records of 4 nodes in time order, origin node3")
PY
[ $? = 0 ] || exit 1

# --- 2. An agent killed mid-test ---------------------------------------------------------------
agent_pid() {  # the host pid of node $1's agent
  for pid in $(ip netns pids ntf$TAG-$1); do
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "^$NT agent" && echo "$pid"
  done
}
victim=$(agent_pid 2)
[ -n "$victim" ] || fail "no agent on node 2"
touch "$T/down2"
kill -KILL "$victim"
# The server node 3's agent is connected to (each server's /connz names its clients).
server_of() {
  for i in 1 2 3; do
    monitor $i /connz | /usr/bin/python3 -c 'import json,sys; sys.exit(0 if any(c.get("name") == sys.argv[1] for c in json.load(sys.stdin)["connections"]) else 1)' \
      "nanotrace-agent-node$1" 2>/dev/null && echo $i
  done
}
S=$(server_of 3)
[ -n "$S" ] || fail "node 3's agent is on none of the servers"
sleep "$(/usr/bin/python3 -c 'import sys, time; print(max(0, float(sys.argv[1]) + 2.2 - time.time()))' "$round1_end")"  # past the rate interval of round 1
# Mid-round: node 3's server stops (what it is sent for node 3 stays in it), node 1 fires, the
# server dies with node 1's announcement in it. Node 3's agent reconnects to another server
# and freezes on a repeat of the announcement.
kill -STOP "${NATS_PIDS[$S]}"
touch "$T/slow1"
for _ in $(seq 400); do [ -e "$T/slow1" ] || break; sleep 0.05; done
[ -e "$T/slow1" ] && fail "node 1 did not fire"
sleep 0.3
stop_nats "$S"
"$NT" fleet collect --nodes 3 --wait 20s --dir "$T/c2" "${FLEET[@]}" || fail "collect round 2"
/usr/bin/python3 - "$T/c2" "$S" <<'PY' || fail "round 2 content"
import json, glob, os, sys
ms = {m["node"]: m for m in (json.load(open(f)) for f in glob.glob(os.path.join(sys.argv[1], "*.json")))}
assert sorted(ms) == ["node1", "node3", "node4"], sorted(ms)
assert all(m["origins"][0]["node"] == "node1" for m in ms.values()), ms
match = ms["node1"]["origins"][0]["match_realtime_ns"]
# Its server stopped before the match and died 0.3 s after it: node 3 has the announcement
# from another server once reconnected, on a repeat (without the repeats, never).
late = ms["node3"]["timing"]["received_ns"] - match
print(f"ok: round 2 with node 2's agent killed and server s{sys.argv[2]} (node 3's) killed "
      f"mid-round: {sorted(ms)} froze, node 3 {late / 1e6:.0f} ms after the match")
PY
[ $? = 0 ] || exit 1
# Node 2's agent comes back once node 1 no longer repeats round 2 (it would freeze for it).
for _ in $(seq 400); do grep -q "stopped repeating the freeze" "$T/agent1.log" && break; sleep 0.05; done
grep -q "stopped repeating the freeze" "$T/agent1.log" || fail "node 1 never stopped repeating"
rm "$T/down2"
wait_nodes  # node 2's agent is back
"$NT" fleet status "${FLEET[@]}" --nodes 4 --json >"$T/status2.json" || fail "status after restart"
/usr/bin/python3 - "$T/status2.json" <<'PY' || fail "node 2's trigger after the agent's restart"
import json, sys
n2 = [n for n in json.load(open(sys.argv[1])) if n["node"] == "node2"][0]
p = n2["processes"][0]
assert p["trigger"] == "armed" and p["expression"] == "test:io lat_us>10000", p
assert n2["armed"] == "test:io lat_us>10000", n2
print("ok: node 2's restarted agent found its producer still armed")
PY
[ $? = 0 ] || exit 1

# --- 3. The whole cluster stopped ----------------------------------------------------------------
# Past every node's rate interval (2 s from when it took round 2: later on a node that had the
# announcement late), or node 4's firing is held back, not announced.
sleep "$(/usr/bin/python3 -c '
import glob, json, os, sys, time
took = [m["timing"].get("received_ns", m["timing"].get("seen_ns", 0))
        for m in (json.load(open(f)) for f in glob.glob(os.path.join(sys.argv[1], "*.json")))]
print(max(0, max(took) / 1e9 + 2.2 - time.time()))' "$T/c2")"
down_before=$(grep -c "broker down" "$T/agent4.log")
for i in 1 2 3; do stop_nats $i; done
for _ in $(seq 400); do
  [ "$(grep -c "broker down" "$T/agent4.log")" -gt "$down_before" ] && break
  sleep 0.05
done
[ "$(grep -c "broker down" "$T/agent4.log")" -gt "$down_before" ] || fail "node 4 saw no broker down"
touch "$T/slow4"
for _ in $(seq 400); do [ -e "$T/slow4" ] || break; sleep 0.05; done
[ -e "$T/slow4" ] && fail "node 4 did not fire"
# Its announcement, repeated for --announce-for (2 s), reaches no server: node 4 froze alone.
for _ in $(seq 400); do grep -q "reached no server" "$T/agent4.log" && break; sleep 0.05; done
grep -q "reached no server" "$T/agent4.log" || fail "node 4: $(tail -5 "$T/agent4.log")"
for i in 1 2 3; do start_nats $i; done
wait_nodes
"$NT" fleet status "${FLEET[@]}" --nodes 4 --json >"$T/status3.json" || fail "status after broker restart"
/usr/bin/python3 - "$T/status3.json" <<'PY' || fail "local freeze with the broker down"
import json, sys
nodes = {n["node"]: n for n in json.load(open(sys.argv[1]))}
assert nodes["node4"]["local_only"] == 1, nodes["node4"]
assert nodes["node4"]["rounds"] == 3, nodes["node4"]
assert nodes["node1"]["rounds"] == 2 and nodes["node3"]["rounds"] == 2, nodes
assert all(n["connected"] for n in nodes.values())
print("ok: cluster down: node 4 froze alone; the agents reconnected")
PY
[ $? = 0 ] || exit 1
"$NT" fleet collect --nodes 1 --wait 5s --dir "$T/c3" "${FLEET[@]}" || fail "collect round 3"
ls "$T/c3" | grep -q "node4" || fail "node 4's local round not collected"

# --- 4. Security -------------------------------------------------------------------------------
if "$NT" fleet status --broker "$URL" --credentials "$T/bad-creds" --fleet t$TAG >"$T/bad.out" 2>&1; then
  fail "bad credentials accepted"
fi
grep -qi "authorization" "$T/bad.out" || fail "bad credentials: $(cat "$T/bad.out")"
cp "$T/creds" "$T/open-creds"; chmod 644 "$T/open-creds"
if "$NT" fleet status --broker "$URL" --credentials "$T/open-creds" >"$T/open.out" 2>&1; then
  fail "a credentials file others can read was accepted"
fi
grep -q "chmod 600" "$T/open.out" || fail "open credentials: $(cat "$T/open.out")"
ip netns exec ntf$TAG-1 unshare --mount sh -c "mount -t tmpfs tmpfs /dev/shm; timeout 3 '$NT' agent --node intruder --spool '$T/spool-bad' --broker '$URL' --credentials '$T/bad-creds' --fleet t$TAG" 2>"$T/intruder.log"
grep -qi "authorization" "$T/intruder.log" || fail "the refused agent did not log why: $(cat "$T/intruder.log")"
"$NT" fleet status "${FLEET[@]}" --json >"$T/status4.json"
grep -q intruder "$T/status4.json" && fail "an agent with bad credentials joined"
if "$NT" fleet fetch node1 ../../etc/passwd --output "$T/passwd" "${FLEET[@]}" >"$T/fetch.out" 2>&1; then
  fail "a path outside the spool was served"
fi
grep -q "refused" "$T/fetch.out" || fail "fetch outside the spool: $(cat "$T/fetch.out")"
# A FIFO in node 1's spool (its own mount namespace): refused at once, naming it, and the
# agent serves its files as before.
nsenter -t "$(agent_pid 1)" -m mkfifo "$T/spool1/x.node1.1.nt" || fail "mkfifo in node 1's spool"
if timeout 20 "$NT" fleet fetch node1 x.node1.1.nt --output "$T/fifo" "${FLEET[@]}" >"$T/fifo.out" 2>&1; then
  fail "a FIFO was served"
fi
grep -q "not a regular file (a FIFO)" "$T/fifo.out" || fail "FIFO in the spool: $(cat "$T/fifo.out")"
manifest=$(basename "$(ls "$T/c1"/*node1.json)")
timeout 20 "$NT" fleet fetch node1 "$manifest" --output "$T/m1.json" "${FLEET[@]}" >/dev/null 2>&1 &&
  cmp -s "$T/m1.json" "$T/c1/$manifest" || fail "node 1's fetches after the FIFO"
echo "ok: bad credentials refused and logged; open credentials file refused; path outside the spool and a FIFO in it refused"

# --- 5. Prometheus -----------------------------------------------------------------------------
query() {
  /usr/bin/python3 - "$PROM_PORT" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/api/v1/query?query=" + urllib.parse.quote(sys.argv[2])
r = json.load(urllib.request.urlopen(url, timeout=2))
print(json.dumps({x["metric"].get("node", ""): float(x["value"][1]) for x in r["data"]["result"]}, sort_keys=True))
PY
}
ok=""
for _ in $(seq 150); do
  rounds=$(query 'nanotrace_fleet_rounds_total' 2>/dev/null)
  refused=$(query 'nanotrace_fleet_refused_messages_total' 2>/dev/null)
  if [ "$rounds" = '{"node1": 2.0, "node2": 0.0, "node3": 2.0, "node4": 3.0}' ] &&
     echo "$refused" | grep -q '"node1": [1-9]'; then ok=1; break; fi
  sleep 0.2
done
[ -n "$ok" ] || fail "Prometheus: rounds $rounds, refused $refused"
hist=$(query 'nanotrace_process_history_seconds > 0')
armed=$(query 'nanotrace_process_trigger_armed')
[ "$(echo "$hist" | /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 4 ] ||
  fail "Prometheus: history $hist"
[ "$armed" = '{"node1": 1.0, "node2": 1.0, "node3": 1.0, "node4": 1.0}' ] || fail "armed: $armed"
# The clock's error bound: chrony's (a local reference: its root dispersion, well under 1 ms)
# on node 1, unknown (NaN, source "unknown") on the others.
chrony_bound=$(query 'nanotrace_clock_error_bound_seconds{source="chrony"} < 0.001')
unknown_bound=$(query 'nanotrace_clock_error_bound_seconds{source="unknown"}')
synced=$(query 'nanotrace_clock_synchronised')
echo "$chrony_bound" | grep -q '^{"node1": [0-9.e-]*}$' ||
  fail "chrony's bound: $chrony_bound (unknown: $unknown_bound, synchronised: $synced)"
[ "$unknown_bound" = '{"node2": NaN, "node3": NaN, "node4": NaN}' ] ||
  fail "unknown bounds: $unknown_bound"
[ "$synced" = '{"node1": 1.0, "node2": 0.0, "node3": 0.0, "node4": 0.0}' ] || fail "synced: $synced"
"$NT" fleet status "${FLEET[@]}" --nodes 4 >"$T/status5.txt" || fail "status"
grep -q "^node node1: .*clock chrony ±" "$T/status5.txt" || fail "status clock: $(cat "$T/status5.txt")"
grep -q "^node node2: .*clock unknown$" "$T/status5.txt" || fail "status clock: $(cat "$T/status5.txt")"
echo "ok: Prometheus scraped the 4 agents: rounds $rounds, clock bound $chrony_bound"
# promtool's lint of an agent's /metrics (Prometheus's text format, as a client that asks for no
# other gets it; every agent serves the same families); what Prometheus got, OpenMetrics, ends
# with its # EOF.
url=http://${NET}11:9464/metrics
/usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
  "$url" >"$T/metrics1.txt" || fail "node 1's /metrics"
promtool check metrics <"$T/metrics1.txt" >"$T/promtool1.out" 2>&1 ||
  fail "promtool check metrics: $(cat "$T/promtool1.out")"
/usr/bin/python3 -c 'import sys, urllib.request; r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], headers={"Accept": "application/openmetrics-text; version=1.0.0"}), timeout=2); b = r.read().decode(); sys.exit(0 if r.headers["Content-Type"].startswith("application/openmetrics-text") and b.endswith("# EOF\n") else 1)' \
  "$url" || fail "node 1's /metrics in OpenMetrics"
echo "ok: promtool check metrics passes on an agent's /metrics"

# --- 6. A stuck operation: /metrics, a Prometheus alert, `fleet top` -----------------------------
t6=$EPOCHREALTIME
# The waiter, in node 2's mount, PID and network namespaces (its /dev/shm), its stdin held open.
mkfifo "$T/waiter.in"
nsenter -t "$(agent_pid 2)" -m -p -n env NANOTRACE_NAME=waiter2 "$BIN/waiter_program" --stuck 777 \
  <"$T/waiter.in" >"$T/waiter.out" 2>&1 &
exec 7>"$T/waiter.in"
for _ in $(seq 100); do grep -q ready "$T/waiter.out" && break; sleep 0.05; done
grep -q ready "$T/waiter.out" || fail "waiter_program: $(cat "$T/waiter.out")"
# oldest_open NODE: node N's nanotrace_pair_oldest_open_seconds for the rule, "" if absent.
oldest_open() {
  /usr/bin/python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode())' \
    "http://${NET}1$1:9464/metrics" >"$T/metrics-live$1.txt" 2>/dev/null || return 0
  sed -n 's/^nanotrace_pair_oldest_open_seconds{node="node'"$1"'",begin="io:submit",end="io:complete",key="req"} //p' \
    "$T/metrics-live$1.txt"
}
# Each wait is bounded (20 s) but generous: the view samples at nice 19, late on a busy machine.
age1=""
for _ in $(seq 200); do
  age1=$(oldest_open 2)
  [ -n "$age1" ] && /usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$age1" && break
  sleep 0.1
done
[ -n "$age1" ] || fail "node 2's /metrics has no oldest open operation: $(grep pair "$T/metrics-live2.txt")"
grep -q '^nanotrace_pair_open_operations{node="node2",begin="io:submit",end="io:complete",key="req"} 1$' \
  "$T/metrics-live2.txt" || fail "node 2's open operations: $(grep pair "$T/metrics-live2.txt")"
promtool check metrics <"$T/metrics-live2.txt" >"$T/promtool2.out" 2>&1 ||
  fail "promtool check metrics (node 2, with the pair gauges): $(cat "$T/promtool2.out")"
# The alert fires for node 2's rule, and for no other node.
alerts() {
  /usr/bin/python3 - "$PROM_PORT" <<'PY'
import json, sys, urllib.request
r = json.load(urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/api/v1/alerts", timeout=2))
print(" ".join(sorted(f'{a["labels"]["node"]}:{a["labels"]["begin"]}:{a["state"]}'
                      for a in r["data"]["alerts"])))
PY
}
fired=""
for _ in $(seq 200); do
  fired=$(alerts 2>/dev/null)
  [ "$fired" = "node2:io:submit:firing" ] && break
  sleep 0.1
done
[ "$fired" = "node2:io:submit:firing" ] || fail "Prometheus alert: '$fired'"
# A later sample gives it older (the alert may fire before the view samples again).
grown() { /usr/bin/python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if b > a + 0.4 else 1)' "$@"; }
age2=$age1
for _ in $(seq 200); do
  age2=$(oldest_open 2)
  [ -n "$age2" ] && grown "$age1" "$age2" && break
  sleep 0.1
done
[ -n "$age2" ] && grown "$age1" "$age2" ||
  fail "the oldest open operation's age did not grow: $age1 then $age2"
echo "ok: node 2's /metrics: oldest open operation ${age1}s then ${age2}s (promtool passes); Prometheus's alert fired for node 2"
# fleet top: the waiter first, naming node 2, its key and thread; its age grows between calls.
waiter_age() {
  /usr/bin/python3 -c 'import json, sys; print([a for a in json.load(open(sys.argv[1])) if a["node"] == "node2"][0]["frame"]["waiters"][0]["age_ns"])' "$1" 2>/dev/null
}
"$NT" fleet top --once "${FLEET[@]}" --nodes 4 --json >"$T/top1.json" || fail "fleet top --json"
"$NT" fleet top --once "${FLEET[@]}" --nodes 4 >"$T/top.txt" || fail "fleet top: $(cat "$T/top.txt")"
a1=$(waiter_age "$T/top1.json")
for _ in $(seq 40); do  # a later frame (the agent's view samples every second)
  sleep 0.5
  "$NT" fleet top --once "${FLEET[@]}" --nodes 4 --json >"$T/top2.json" || fail "fleet top --json"
  a2=$(waiter_age "$T/top2.json")
  [ -n "$a1" ] && [ -n "$a2" ] && [ "$a2" -gt $((a1 + 500000000)) ] && break
done
/usr/bin/python3 - "$T/top1.json" "$T/top2.json" "$T/top.txt" <<'PY' || fail "fleet top"
import json, sys
def waiter(path):
    nodes = {a["node"]: a for a in json.load(open(path))}
    assert sorted(nodes) == ["node1", "node2", "node3", "node4"], nodes.keys()
    for n, a in nodes.items():
        assert "error" not in a, a
        assert n == "node2" or a["frame"]["waiters"] == [], a
    w = nodes["node2"]["frame"]["waiters"][0]
    assert w["key"] == "777" and w["thread"] == "stuck-worker" and w["process"] == "waiter2", w
    assert w["rule"] == {"begin": "io:submit", "end": "io:complete", "key": "req"}, w
    return w["age_ns"]
a1, a2 = waiter(sys.argv[1]), waiter(sys.argv[2])
assert a2 > a1 + 500_000_000, (a1, a2)
lines = open(sys.argv[3]).read().splitlines()
assert lines[0] == "IN FLIGHT, oldest first: 1 open on 4 nodes", lines[0]
row = lines[2].split()
assert row[1] == "node2" and row[3] == "waiter2" and row[5] == "stuck-worker", lines[2]
assert "777" in row and "io:submit" in row, lines[2]
for n in ("node1", "node2", "node3", "node4"):
    assert any(l.startswith(f"node {n}: 1 process") or l.startswith(f"node {n}: 2 processes")
               for l in lines), (n, lines)
print(f"ok: fleet top: node2's waiter 777 first, {a1/1e9:.2f} s then {a2/1e9:.2f} s old")
PY
[ $? = 0 ] || exit 1
exec 7>&-
echo "ok: section 6 took $(/usr/bin/python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$t6") s"
echo "PASS"
