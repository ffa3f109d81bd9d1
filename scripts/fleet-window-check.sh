#!/bin/bash
# A fleet time window on a process that writes nothing after its match: when does it freeze,
# and what do the agent's manifest and /metrics say? One agent on this host (its own mount and
# PID namespaces: a private /dev/shm, so it sees only the processes started here), a
# nats-server on 127.0.0.1 with a token, `fleet arm 'test:rec seq==1000' --after WINDOW`, and
# per round a new producer that writes records 0 to 1000 and then nothing. Prints, per round,
# the origin's freeze after its match from the manifest (frozen_realtime_ns, latency_ns) and
# the agent's nanotrace_fleet_last_freeze_latency_seconds.
#
#   scripts/fleet-window-check.sh [BUILD_DIR] [ROUNDS] [WINDOW]   (root; nats-server)
#
# Before the in-process deadline freeze every round said 1,004-1,012 ms (the agent's fallback
# froze the process); since, the window (the freeze is stamped with the deadline; the state
# turns frozen when the process's control thread runs, which tests/runtime/trigger*_test.cc
# bound).
set -u
BIN=$(realpath "${1:-build}")/bin
ROUNDS=${2:-5}
WINDOW=${3:-500us}
NT=$BIN/nanotrace
[ "$(id -u)" = 0 ] || { echo "needs root (namespaces)"; exit 77; }
command -v nats-server >/dev/null || { echo "nats-server is not installed"; exit 77; }
T=$(mktemp -d /tmp/nanotrace-window.XXXXXX)
chmod 700 "$T"
PORT=$((30000 + $$ % 20000))
METRICS=127.0.0.1:$((PORT + 1))
NATS_PID=""
NODE_PID=""
cleanup() {
  touch "$T/stop"
  exec 7>&- 2>/dev/null
  [ -n "$NODE_PID" ] && kill "$NODE_PID" 2>/dev/null
  [ -n "$NATS_PID" ] && kill "$NATS_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$T"
}
trap cleanup EXIT

printf 'token = w%s\n' "$$" >"$T/creds"
chmod 600 "$T/creds"
printf 'listen: 127.0.0.1:%s\nauthorization { token: "w%s" }\n' "$PORT" "$$" >"$T/nats.conf"
nats-server -c "$T/nats.conf" >"$T/nats.log" 2>&1 &
NATS_PID=$!
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.05; done
FLEET=(--broker "nats://127.0.0.1:$PORT" --credentials "$T/creds" --fleet w$$)

mkdir -m 700 "$T/spool"
for r in $(seq "$ROUNDS"); do mkfifo "$T/go$r"; done
cat >"$T/node.sh" <<'NODE'
#!/bin/bash
# Inside the node's namespaces: the agent, and one producer per round, each started when the
# script opens its FIFO and producing when it writes a line to it.
T=$1; BIN=$2; ROUNDS=$3; METRICS=$4; shift 4
mount -t tmpfs -o mode=1777 tmpfs /dev/shm
"$BIN/nanotrace" agent --node n1 --spool "$T/spool" --rate 1s --scan-ms 100 \
  --metrics "$METRICS" "$@" 2>>"$T/agent.log" &
for r in $(seq "$ROUNDS"); do
  "$BIN/nanotrace_test_producer" --events 1001 --go --hold <"$T/go$r" >"$T/producer$r.out"
done
wait
NODE
chmod +x "$T/node.sh"
unshare --mount --pid --fork --mount-proc "$T/node.sh" "$T" "$BIN" "$ROUNDS" "$METRICS" \
  "${FLEET[@]}" &
NODE_PID=$!
sleep 1
"$NT" fleet arm 'test:rec seq==1000' --after "$WINDOW" --nodes 1 "${FLEET[@]}" >"$T/arm.out" ||
  { echo "fleet arm failed: $(cat "$T/arm.out")"; exit 1; }

for r in $(seq "$ROUNDS"); do
  exec 7>"$T/go$r"  # starts round r's producer
  # The agent arms a process it finds (every 100 ms here): wait until it is armed.
  for _ in $(seq 100); do
    "$NT" fleet status "${FLEET[@]}" --nodes 1 --json 2>/dev/null >"$T/status.json"
    /usr/bin/python3 -c '
import json, sys
nodes = json.load(open(sys.argv[1]))
ps = [p for n in nodes for p in n.get("processes", [])]
sys.exit(0 if ps and all(p.get("trigger") == "armed" for p in ps) else 1)' \
      "$T/status.json" && break
    sleep 0.1
  done
  before=$(ls "$T/spool"/*.json 2>/dev/null | wc -l)
  echo go >&7
  for _ in $(seq 100); do
    [ "$(ls "$T/spool"/*.json 2>/dev/null | wc -l)" -gt "$before" ] && break
    sleep 0.05
  done
  sleep 0.2  # the manifest is replaced whole; the metrics follow it
  manifest=$(ls -t "$T/spool"/*.json | head -1)
  metric=$(curl -s "http://$METRICS/metrics" | awk '/^nanotrace_fleet_last_freeze_latency_seconds/ {print $2}')
  /usr/bin/python3 - "$manifest" "$r" "$metric" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
match = m["origins"][0]["match_realtime_ns"]
frozen = [p.get("frozen_realtime_ns", 0) for p in m["processes"]]
print(f"round {sys.argv[2]}: frozen {(max(frozen) - match) / 1e6:.3f} ms after the match "
      f"(manifest latency_ns {m['latency_ns'] / 1e6:.3f} ms, metric {sys.argv[3]} s)")
PY
  exec 7>&-  # round r's producer exits
  sleep 1.1  # the agent's rate interval
done
