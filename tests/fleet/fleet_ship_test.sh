#!/bin/bash
# Agents that ship their snapshots into ClickHouse (`agent --ship-clickhouse`), end to end on
# one machine: a real nats-server (user and password) and a real clickhouse-server on
# 127.0.0.1, two nodes, each a mount namespace of its own (its own /dev/shm) with one traced
# producer and one agent.
#
#   1. `fleet snapshot`: both agents ship their snapshot; the events table holds each node's
#      trace once, its counts per event equal to `nanotrace stats --json` on the snapshot;
#      each snapshot is left as it was, beside a 0600 `.shipped` marker.
#      The agents' /metrics, shipping families included, pass `promtool check metrics`.
#   2. ClickHouse killed, another `fleet snapshot`: the agents' /metrics and `fleet status`
#      show failed attempts and the snapshot queued. An agent stopped meanwhile exits
#      promptly (no wait on the dead server) and, restarted, queues its unshipped snapshot.
#      ClickHouse restarted on its data: the queued snapshots land, each once.
#   3. A third `fleet snapshot` ships only its own snapshots: nothing earlier again. An agent
#      restarted on its spool ships nothing again (the markers); one whose marker was removed
#      ships that snapshot again and ClickHouse finds it stored: still once.
#
# Usage: fleet_ship_test.sh BIN_DIR   (root; nats-server, clickhouse-server, promtool installed)
set -u
BIN=$1
NT=$BIN/nanotrace
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (mount namespaces)"
command -v nats-server >/dev/null || skip "nats-server is not installed"
command -v clickhouse-server >/dev/null || skip "clickhouse-server is not installed"
command -v promtool >/dev/null || skip "promtool (package prometheus) is not installed"
PY=/usr/bin/python3

T=$(mktemp -d /tmp/nanotrace-fleet-ship.XXXXXX)
chmod 700 "$T"
TAG=$$
. "$(dirname "$0")/test_port.sh"
PORT=$(test_port "$TAG" 4)  # nats; then ClickHouse's HTTP and TCP ports, the agents' metrics
CH_HTTP=$((PORT + 1)); CH_TCP=$((PORT + 2)); METRICS1=$((PORT + 3)); METRICS2=$((PORT + 4))
CH=http://127.0.0.1:$CH_HTTP
NATS_PID=""; CH_PID=""; NODE_PIDS=""

cleanup() {
  touch "$T/stop"
  for f in "$T"/agent?.pid "$T"/producer?.pid; do
    [ -e "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null
  done
  for pid in $NODE_PIDS; do kill -TERM "$pid" 2>/dev/null; done
  [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null
  [ -n "$CH_PID" ] && kill -KILL "$CH_PID" 2>/dev/null
  wait 2>/dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT

# Polls (every 0.1 s, at most $1 tries) until the command after it succeeds.
wait_for() {
  local tries=$1
  shift
  for _ in $(seq "$tries"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

# --- Broker with credentials ---------------------------------------------------------------------
printf 'user = nanotrace\npassword = ship-%s\n' "$TAG" >"$T/creds"
chmod 600 "$T/creds"
printf 'listen: 127.0.0.1:%s\nauthorization { user: nanotrace, password: "ship-%s" }\n' \
  "$PORT" "$TAG" >"$T/nats.conf"
nats-server -c "$T/nats.conf" >>"$T/nats.log" 2>&1 &
NATS_PID=$!
wait_for 100 bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null ||
  fail "nats-server did not start: $(tail -3 "$T/nats.log")"
FLEET=(--broker nats://127.0.0.1:$PORT --credentials "$T/creds" --fleet s$TAG)

# --- ClickHouse, on ports and a data directory of its own ---------------------------------------
mkdir -p "$T/ch/data"
cat >"$T/ch/config.xml" <<CONF
<?xml version="1.0"?>
<yandex>
<logger><level>warning</level><log>$T/ch/server.log</log><errorlog>$T/ch/server.err.log</errorlog><console>0</console></logger>
<listen_host>127.0.0.1</listen_host>
<http_port>$CH_HTTP</http_port>
<tcp_port>$CH_TCP</tcp_port>
<path>$T/ch/data/</path><tmp_path>$T/ch/tmp/</tmp_path>
<user_files_path>$T/ch/user_files/</user_files_path>
<format_schema_path>$T/ch/format_schemas/</format_schema_path>
<users_config>$T/ch/users.xml</users_config>
<default_profile>default</default_profile>
<default_database>default</default_database>
<mark_cache_size>67108864</mark_cache_size>
<uncompressed_cache_size>67108864</uncompressed_cache_size>
<timezone>UTC</timezone>
</yandex>
CONF
cat >"$T/ch/users.xml" <<CONF
<?xml version="1.0"?>
<yandex><profiles><default></default></profiles>
<users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default></default></quotas></yandex>
CONF
sql() { curl -sS --fail-with-body --max-time 20 "$CH/" --data-binary "$1"; }
start_clickhouse() {
  clickhouse-server --config-file="$T/ch/config.xml" >>"$T/ch/stdout.log" 2>&1 &
  CH_PID=$!
  wait_for 600 sql 'SELECT 1' >/dev/null 2>&1 ||
    fail "clickhouse-server did not answer: $(tail -3 "$T/ch/server.err.log" 2>/dev/null)"
}
start_clickhouse
echo "ok: nats-server and clickhouse-server up"

# --- Nodes: a private /dev/shm each, a producer and an agent (restarted when it ends) ----------
cat >"$T/node.sh" <<'NODE'
#!/bin/bash
n=$1; T=$2; BIN=$3; METRICS=$4; CH=$5; shift 5
mount -t tmpfs -o mode=1777 tmpfs /dev/shm || exit 1
NANOTRACE_NAME=producer$n "$BIN/nanotrace_fleet_producer" >/dev/null </dev/null &
echo $! >"$T/producer$n.pid"
while [ ! -e "$T/stop" ]; do
  "$BIN/nanotrace" agent --node node$n --spool "$T/spool$n" "$@" --metrics "127.0.0.1:$METRICS" \
    --scan-ms 200 --ship-clickhouse "$CH" --ship-retry-max 1s 2>>"$T/agent$n.log" &
  echo $! >"$T/agent$n.pid"
  wait $!
  echo "agent exited: $?" >>"$T/agent$n.log"
  while [ -e "$T/down$n" ] && [ ! -e "$T/stop" ]; do sleep 0.05; done
done
NODE
chmod +x "$T/node.sh"
unshare --mount "$T/node.sh" 1 "$T" "$BIN" $METRICS1 "$CH" "${FLEET[@]}" &
NODE_PIDS="$NODE_PIDS $!"
unshare --mount "$T/node.sh" 2 "$T" "$BIN" $METRICS2 "$CH" "${FLEET[@]}" &
NODE_PIDS="$NODE_PIDS $!"

# metric N NAME: the value of NAME on node N's /metrics ("" if none).
metric() {
  local port=$METRICS1
  [ "$1" = 2 ] && port=$METRICS2
  curl -s --max-time 2 "http://127.0.0.1:$port/metrics" | awk -v m="$2" '$1 ~ "^"m"[{ ]" || $1 ~ "^"m"$" {print $2}'
}
# metrics_are "N:NAME=VALUE ...": every one holds now.
metrics_are() {
  local kv n name value
  for kv in "$@"; do
    n=${kv%%:*}; name=${kv#*:}; name=${name%%=*}; value=${kv#*=}
    [ "$(metric "$n" "$name")" = "$value" ] || return 1
  done
}
show_metrics() {
  for n in 1 2; do
    echo "node$n: $(metric $n nanotrace_fleet_shipped_snapshots_total) shipped," \
      "$(metric $n nanotrace_fleet_ship_queue) queued," \
      "$(metric $n nanotrace_fleet_ship_failures_total) failures"
  done
}
nodes_up() {
  local out
  out=$("$NT" fleet status "${FLEET[@]}" --nodes 2 --timeout-ms 1000 --json 2>/dev/null) &&
    [ "$(echo "$out" | $PY -c 'import json,sys; print(sum(len(n["processes"]) for n in json.load(sys.stdin) if n["connected"]))')" = 2 ]
}
wait_for 200 nodes_up || fail "the 2 agents did not report their producer: $(tail -3 "$T"/agent*.log)"
echo "ok: 2 agents up, one producer each"

# check_stored ROUNDS...: ClickHouse holds every snapshot of these rounds (collected into
# $T/<round>, named as in the spools) once, its counts per event equal to `nanotrace stats
# --json` on the spool's file, and nothing else.
check_stored() {
  local round f n
  : >"$T/stats.jsonl"
  for round in "$@"; do
    for f in "$T/$round"/*.nt; do
      n=$(basename "$f" | cut -d. -f3)
      f=$T/spool${n#node}/$(basename "$f")
      "$NT" stats "$f" --json | $PY -c 'import json,sys; j=json.load(sys.stdin); print(json.dumps({"file": sys.argv[1], "events": {e["event"]: e["count"] for e in j["events"]}}))' \
        "$(basename "$f")" >>"$T/stats.jsonl" || fail "stats $f"
    done
  done
  sql "SELECT source, node, toString(trace_id), events FROM nanotrace.traces FORMAT JSONEachRow" \
    >"$T/traces.jsonl" || fail "query traces"
  sql "SELECT toString(trace_id) AS id, event, count() AS n FROM nanotrace.events GROUP BY id, event FORMAT JSONEachRow" \
    >"$T/events.jsonl" || fail "query events"
  $PY - "$T/stats.jsonl" "$T/traces.jsonl" "$T/events.jsonl" <<'PY'
import collections, json, os, sys
stats = [json.loads(l) for l in open(sys.argv[1])]
traces = [json.loads(l) for l in open(sys.argv[2])]
events = collections.defaultdict(dict)
for l in open(sys.argv[3]):
    r = json.loads(l)
    events[r["id"]][r["event"]] = int(r["n"])
by_file = collections.defaultdict(list)
for t in traces:
    by_file[os.path.basename(t["source"])].append(t)
assert sorted(by_file) == sorted(s["file"] for s in stats), (sorted(by_file), stats)
for s in stats:
    rows = by_file[s["file"]]
    assert len(rows) == 1, ("stored more than once", rows)
    t = rows[0]
    node = s["file"].split(".")[2]  # ROUND.NODE.PID.nt
    assert t["node"] == node, (t, node)
    assert events[t["toString(trace_id)"]] == s["events"], (s, events[t["toString(trace_id)"]])
    assert int(t["events"]) == sum(s["events"].values()), (t, s)
assert len(events) == len(stats), "events of a trace not in traces"
print(f"ok: ClickHouse holds {len(stats)} snapshots once each, counts equal to stats: "
      + ", ".join(f'{s["file"].split(".")[2]} {sum(s["events"].values())}' for s in stats))
PY
}

# --- 1. `fleet snapshot`: both agents ship -----------------------------------------------------
"$NT" fleet snapshot --nodes 2 --dir "$T/r1" "${FLEET[@]}" >"$T/r1.out" ||
  fail "fleet snapshot 1: $(cat "$T/r1.out")"
[ "$(ls "$T"/r1/*.nt | wc -l)" = 2 ] || fail "round 1: $(ls "$T/r1")"
wait_for 300 metrics_are 1:nanotrace_fleet_shipped_snapshots_total=1 \
  2:nanotrace_fleet_shipped_snapshots_total=1 1:nanotrace_fleet_ship_queue=0 \
  2:nanotrace_fleet_ship_queue=0 || fail "round 1 not shipped: $(show_metrics)"
check_stored r1 || fail "round 1 in ClickHouse"
# The shipping's families beside the others: promtool's lint of /metrics.
curl -s --max-time 2 "http://127.0.0.1:$METRICS1/metrics" >"$T/metrics1.txt"
grep -q nanotrace_fleet_ship_queue "$T/metrics1.txt" || fail "no shipping metrics"
promtool check metrics <"$T/metrics1.txt" >"$T/promtool.out" 2>&1 ||
  fail "promtool check metrics: $(cat "$T/promtool.out")"
for f in "$T"/r1/*.nt; do
  name=$(basename "$f"); n=$(echo "$name" | cut -d. -f3); n=${n#node}
  cmp -s "$f" "$T/spool$n/$name" || fail "$name changed in the spool after shipping"
  [ "$(stat -c %a "$T/spool$n/$name.shipped")" = 600 ] || fail "$name.shipped is not 0600"
  grep -q '"already_stored": false' "$T/spool$n/$name.shipped" || fail "marker $name.shipped"
done
[ "$(metric 1 nanotrace_fleet_ship_failures_total)" = 0 ] || fail "failures with a server up"
echo "ok: round 1 shipped by both agents; snapshots unchanged, markers 0600"

# --- 2. ClickHouse down -------------------------------------------------------------------------
kill -KILL "$CH_PID"; wait "$CH_PID" 2>/dev/null; CH_PID=""
"$NT" fleet snapshot --nodes 2 --dir "$T/r2" "${FLEET[@]}" >"$T/r2.out" ||
  fail "fleet snapshot 2 (ClickHouse down): $(cat "$T/r2.out")"
failing() {
  local n
  for n in 1 2; do
    [ "$(metric $n nanotrace_fleet_ship_queue)" = 1 ] || return 1
    [ "$(metric $n nanotrace_fleet_ship_failures_total)" -ge 2 ] 2>/dev/null || return 1
    [ "$(metric $n nanotrace_fleet_ship_last_error_time_seconds)" != 0 ] || return 1
  done
}
wait_for 300 failing || fail "ClickHouse down: no failures counted: $(show_metrics)"
"$NT" fleet status "${FLEET[@]}" --nodes 2 >"$T/status2.txt" || fail "status"
[ "$(grep -c '^  ship: 1 snapshots shipped .*, 1 queued, [0-9]* failed attempts, 0 rejected, last error: .*ClickHouse at .*connect' "$T/status2.txt")" = 2 ] ||
  fail "fleet status while ClickHouse is down: $(cat "$T/status2.txt")"
echo "ok: ClickHouse down: both agents count failures and keep the snapshot queued"
# An agent stopped while its server is down exits at once; restarted, it finds its unshipped
# snapshot in the spool.
touch "$T/down1"
victim=$(cat "$T/agent1.pid")
stopped_at=$(date +%s.%N)
kill -TERM "$victim"
wait_for 100 bash -c "! kill -0 $victim 2>/dev/null" || fail "agent 1 did not stop within 10 s"
echo "ok: agent 1 stopped in $($PY -c "import time; print(f'{time.time() - $stopped_at:.2f}')") s with its server down"
rm "$T/down1"
wait_for 200 bash -c "[ \"\$(cat $T/agent1.pid)\" != $victim ]" || fail "agent 1 not restarted"
wait_for 200 metrics_are 1:nanotrace_fleet_ship_queue=1 ||
  fail "the restarted agent did not queue its unshipped snapshot: $(show_metrics)"
grep -q "1 snapshots of the spool not shipped yet: queued" "$T/agent1.log" ||
  fail "agent 1's log: $(tail -5 "$T/agent1.log")"
start_clickhouse
wait_for 300 metrics_are 1:nanotrace_fleet_shipped_snapshots_total=1 \
  2:nanotrace_fleet_shipped_snapshots_total=2 1:nanotrace_fleet_ship_queue=0 \
  2:nanotrace_fleet_ship_queue=0 || fail "queued snapshots not shipped: $(show_metrics)"
check_stored r1 r2 || fail "rounds 1 and 2 in ClickHouse"
echo "ok: ClickHouse back: the queued snapshots landed once"

# --- 3. No duplicates ---------------------------------------------------------------------------
"$NT" fleet snapshot --nodes 2 --dir "$T/r3" "${FLEET[@]}" >"$T/r3.out" ||
  fail "fleet snapshot 3: $(cat "$T/r3.out")"
wait_for 300 metrics_are 1:nanotrace_fleet_shipped_snapshots_total=2 \
  2:nanotrace_fleet_shipped_snapshots_total=3 1:nanotrace_fleet_ship_queue=0 \
  2:nanotrace_fleet_ship_queue=0 || fail "round 3 not shipped: $(show_metrics)"
check_stored r1 r2 r3 || fail "rounds 1-3 in ClickHouse"
# Node 2's agent restarted on its spool, its round-1 marker removed: that snapshot alone is
# shipped again, and found stored.
first=$(basename "$(ls "$T"/r1/*.node2.*.nt)")
rm "$T/spool2/$first.shipped"
touch "$T/down2"
victim=$(cat "$T/agent2.pid")
kill -TERM "$victim"
wait_for 100 bash -c "! kill -0 $victim 2>/dev/null" || fail "agent 2 did not stop"
rm "$T/down2"
wait_for 200 bash -c "[ \"\$(cat $T/agent2.pid)\" != $victim ]" || fail "agent 2 not restarted"
wait_for 300 metrics_are 2:nanotrace_fleet_shipped_snapshots_total=1 2:nanotrace_fleet_ship_queue=0 ||
  fail "agent 2 after its restart: $(show_metrics)"
grep -q '"already_stored": true' "$T/spool2/$first.shipped" || fail "re-shipped marker"
[ "$(metric 2 nanotrace_fleet_ship_failures_total)" = 0 ] || fail "agent 2: failures"
check_stored r1 r2 r3 || fail "ClickHouse after agent 2's restart"
echo "ok: a third round and an agent's restart ship nothing twice"
echo "PASS"
