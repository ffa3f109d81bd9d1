#!/usr/bin/python3
"""The fleet's figures (`make bench` -> build/bench/fleet.json), on this machine, with a real
nats-server on 127.0.0.1 and agents each in its own mount namespace (its own /dev/shm: it sees
only its node's producer):

  - freeze latency: from the matching record's CLOCK_REALTIME to the last node's freeze, over
    --triggers triggers with --nodes nodes (the origin node turns), interleaved trigger by
    trigger with the broker's own floor: a bare publish fanned out to as many subscriber
    processes (bench/fleet_broker_floor.cc), time to the last subscriber; and each hop's
    share (the manifests' "timing": the origin's watcher waking, its publish, each other
    agent's receipt and freeze request, each process's freeze; docs/fleet.md);
  - agent idle CPU with --idle-processes traced processes (100 events/s each), over 10 s;
  - time to collect --nodes nodes x --ring-mib MiB of rings (fleet snapshot, then collect),
    and to merge what was collected into one trace (`nanotrace merge`);
  - the event cost (tracepoint_bench --summary, ratio to its floor) without and with an agent
    watching the process, alternated 3 times each;
  - with --scaling 8,16,32,64: freeze latency and collection time against the number of agents.

Usage: scripts/fleet_bench.py [--out build/bench/fleet.json] [--nodes 8] [--triggers 200] ...
Needs root (mount namespaces)."""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, tempfile, time

BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin")
if "--bin" in sys.argv:  # a copy of the programs, while the build tree is being rebuilt
    BIN = sys.argv[sys.argv.index("--bin") + 1]
NT = os.path.join(BIN, "nanotrace")


def pct(values, p):
    values = sorted(values)
    if not values:
        return None
    k = (len(values) - 1) * p / 100
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


class Fleet:
    def __init__(self, tmp, port):
        self.tmp, self.port = tmp, port
        self.url = f"nats://127.0.0.1:{port}"
        self.creds = os.path.join(tmp, "creds")
        with open(self.creds, "w") as f:
            f.write("token = bench-token\n")
        os.chmod(self.creds, 0o600)
        self.nats = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port), "--auth",
                                      "bench-token"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.nodes = []
        time.sleep(0.5)

    def fleet_args(self):
        return ["--broker", self.url, "--credentials", self.creds, "--fleet", "bench"]

    def start_node(self, name, producers=1, env=None, producer_args=(), rate="0"):
        """An agent and its producers in their own mount namespace (private /dev/shm)."""
        spool = os.path.join(self.tmp, "spool-" + name)
        slow = os.path.join(self.tmp, "slow-" + name)
        env_s = " ".join(f"{k}={v}" for k, v in (env or {}).items())
        prod = " ".join(producer_args)
        script = (f"mount -t tmpfs -o mode=1777 tmpfs /dev/shm && "
                  f"for i in $(seq {producers}); do env {env_s} NANOTRACE_NAME=p{name} "
                  f"{BIN}/nanotrace_fleet_producer --slow {slow} {prod} >/dev/null & done; "
                  f"exec {NT} agent --node {name} --spool {spool} --scan-ms 200 --rate {rate} "
                  + " ".join(self.fleet_args()))
        log = open(os.path.join(self.tmp, f"agent-{name}.log"), "w")
        p = subprocess.Popen(["unshare", "--mount", "--fork", "sh", "-c", script],
                             stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
        self.nodes.append((name, p, spool, slow))
        return p

    def agent_pid(self, unshare_pid):
        with open(f"/proc/{unshare_pid}/task/{unshare_pid}/children") as f:
            return int(f.read().split()[0])

    def wait_processes(self, expected, timeout=None):
        # Scaled with the count: 64 agents starting at once on 2 loaded cores take a while.
        deadline = time.time() + (timeout or max(60, 3 * expected))
        while time.time() < deadline:
            # Every agent must answer within the timeout: 64 on 2 loaded cores need longer.
            r = subprocess.run([NT, "fleet", "status", "--json", "--nodes", str(len(self.nodes)),
                                "--timeout-ms", str(max(2000, 150 * len(self.nodes)))]
                               + self.fleet_args(),
                               capture_output=True, text=True)
            if r.returncode == 0:
                nodes = json.loads(r.stdout)
                if sum(len(n["processes"]) for n in nodes) >= expected:
                    return
            time.sleep(0.2)
        raise RuntimeError(f"the agents did not report {expected} processes")

    def fleet(self, *args, check=True):
        r = subprocess.run([NT, "fleet"] + list(args) + self.fleet_args(), capture_output=True,
                           text=True)
        if check and r.returncode != 0:
            raise RuntimeError(f"fleet {args}: {r.stderr}")
        return r

    def stop_nodes(self):
        for _, p, _, _ in self.nodes:
            os.killpg(p.pid, signal.SIGTERM)
        for _, p, _, _ in self.nodes:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.nodes = []

    def close(self):
        self.stop_nodes()
        self.nats.terminate()
        self.nats.wait()


def manifests(spool):
    out = {}
    try:
        names = os.listdir(spool)
    except FileNotFoundError:
        return out
    for n in names:
        if n.endswith(".json") and not n.startswith("tmp-"):
            out[n] = os.path.join(spool, n)
    return out


def clear_spool(spool):
    for n in os.listdir(spool):
        os.unlink(os.path.join(spool, n))


def freeze_latency(fleet, n, triggers, floor=True):
    """Triggers in turn on each node; returns (fleet latencies ms, floor latencies ms)."""
    for i in range(n):
        fleet.start_node(f"n{i}", env={"NANOTRACE_BUFFER": "256K"})
    fleet.wait_processes(n)
    fleet.fleet("arm", "test:io lat_us>10000", "--nodes", str(n), "--timeout-ms",
                str(max(3000, 150 * n)))
    subs, pub = [], None
    if floor:
        for _ in range(n):
            s = subprocess.Popen([os.path.join(BIN, "fleet_broker_floor"), "sub", fleet.url,
                                  "bench-token", "bench.floor"], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
            assert s.stdout.readline().strip() == "ready"
            subs.append(s)
        pub = subprocess.Popen([os.path.join(BIN, "fleet_broker_floor"), "pub", fleet.url,
                                "bench-token", "bench.floor"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True)
    lat, base, hops = [], [], {}
    for t in range(triggers):
        name, _, spool, slow = fleet.nodes[t % n]
        for _, _, sp, _ in fleet.nodes:
            clear_spool(sp)
        open(slow, "w").close()
        deadline = time.time() + 20
        while time.time() < deadline:
            ms = [manifests(sp) for _, _, sp, _ in fleet.nodes]
            if all(len(m) == 1 for m in ms):
                break
            # The latency comes from the manifests' timestamps, not from this loop: it looks
            # seldom, so as not to take a CPU from the agents while they freeze.
            time.sleep(0.01)
        else:
            for (nm, _, sp, _), m in zip(fleet.nodes, ms):
                print(nm, sorted(m), file=sys.stderr)
                os.system(f"tail -4 {fleet.tmp}/agent-{nm}.log >&2")
            raise RuntimeError(f"trigger {t}: not every node froze")
        docs = []
        for m in ms:
            for path in m.values():
                for _ in range(100):  # written by rename: complete once it is there
                    try:
                        docs.append(json.load(open(path)))
                        break
                    except (ValueError, FileNotFoundError):
                        time.sleep(0.001)
        match = docs[0]["origins"][0]["match_realtime_ns"]
        assert all(d["origins"][0]["match_realtime_ns"] == match for d in docs)
        lat.append((max(d["freeze_realtime_ns"] for d in docs) - match) / 1e6)
        add_hops(hops, docs, match)
        if floor:
            pub.stdin.write("go\n")
            pub.stdin.flush()
            pub.stdout.readline()
            received = []
            for s in subs:
                seq, sent, recv = map(int, s.stdout.readline().split())
                received.append(recv)
            base.append((max(received) - sent) / 1e6)
    for p in subs + ([pub] if pub else []):
        p.stdin.close()
        p.wait()
    fleet.stop_nodes()
    return lat, base, hops


# The hops of a fleet freeze, in order (docs/fleet.md, "Where the time goes"): each is the
# time from the previous step to this one, from the manifests' "timing" (CLOCK_REALTIME on one
# host) and each process's freeze time. Per-node hops have one sample per other node.
HOPS = ["match_to_woke", "woke_to_seen", "seen_to_published", "published_to_received",
        "received_to_handled", "handled_to_requested", "requested_to_frozen",
        "published_to_last_received", "match_to_published"]


DUMP = None  # --dump FILE: every trigger's manifests, one JSON line each


def add_hops(hops, docs, match):
    origin_node = docs[0]["origins"][0]["node"]
    origin = next((d for d in docs if d["node"] == origin_node), None)
    if origin is None or "published_ns" not in origin.get("timing", {}):
        return
    o = origin["timing"]

    def put(name, later, earlier):
        hops.setdefault(name, []).append((later - earlier) / 1e6)

    put("match_to_woke", o["woke_ns"], match)
    put("woke_to_seen", o["seen_ns"], o["woke_ns"])
    put("seen_to_published", o["published_ns"], o["seen_ns"])
    put("match_to_published", o["published_ns"], match)
    if DUMP:
        with open(DUMP, "a") as f:
            f.write(json.dumps({"match": match, "manifests": docs}) + "\n")
    last = 0
    for d in docs:
        if d is origin:
            continue
        t = d.get("timing", {})
        if not all(k in t for k in ("received_ns", "handled_ns", "requested_ns")):
            continue
        put("published_to_received", t["received_ns"], o["published_ns"])
        last = max(last, t["received_ns"])
        put("received_to_handled", t["handled_ns"], t["received_ns"])
        put("handled_to_requested", t["requested_ns"], t["handled_ns"])
        for p in d["processes"]:
            if "frozen_realtime_ns" in p:
                put("requested_to_frozen", p["frozen_realtime_ns"], t["requested_ns"])
    if last:
        put("published_to_last_received", last, o["published_ns"])


def hop_table(hops):
    return {h: {"p50_ms": pct(hops[h], 50), "p99_ms": pct(hops[h], 99), "samples": len(hops[h])}
            for h in HOPS if h in hops}


def idle_cpu(fleet, processes, seconds=10):
    p = fleet.start_node("idle", producers=processes, producer_args=["--period-us", "10000"])
    fleet.wait_processes(processes)
    fleet.fleet("arm", "test:io lat_us>10000", "--nodes", "1")
    agent = fleet.agent_pid(p.pid)
    tick = os.sysconf("SC_CLK_TCK")

    def cpu():
        with open(f"/proc/{agent}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / tick

    c0, t0 = cpu(), time.time()
    time.sleep(seconds)
    c1, t1 = cpu(), time.time()
    fleet.stop_nodes()
    return 100.0 * (c1 - c0) / (t1 - t0)


def collect_time(fleet, n, ring_mib, parallel=None, zstd=True):
    records = ring_mib * 1024 * 1024 // 24
    for i in range(n):
        fleet.start_node(f"c{i}", env={"NANOTRACE_BUFFER": f"{ring_mib}M"},
                         producer_args=["--burst", str(records), "--period-us", "100000"])
    fleet.wait_processes(n)
    time.sleep(1.0)  # the bursts are written
    out = os.path.join(fleet.tmp, f"collected-{n}")
    t0 = time.time()
    r = fleet.fleet("snapshot", "--nodes", str(n), "--dir", out, "--wait", "60s",
                    "--timeout-ms", "60000", *(["--parallel", str(parallel)] if parallel else []),
                    *([] if zstd else ["--no-zstd"]))
    total = time.time() - t0
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))
    last = r.stdout.strip().splitlines()[-1]
    copied = float(last.split(" in ")[1].split(" s ")[0])
    # "(N MiB over the broker)" when compressed (a build before it prints none).
    wire_mib = float(last.split(" (")[1].split(" MiB")[0]) if " (" in last else None
    fleet.stop_nodes()
    snapshots = sorted(os.path.join(out, f) for f in os.listdir(out) if f.endswith(".nt"))
    merged = os.path.join(fleet.tmp, f"merged-{n}.nt")
    t0 = time.time()
    m = subprocess.run([NT, "merge", "--json", "-o", merged] + snapshots, capture_output=True,
                       text=True)
    merge_s = time.time() - t0
    if m.returncode != 0:
        raise RuntimeError(f"merge: {m.stdout} {m.stderr}")
    merge = json.loads(m.stdout)
    assert len(merge["nodes"]) == n, merge["nodes"]
    shutil.rmtree(out)
    os.unlink(merged)
    return {"nodes": n, "ring_mib": ring_mib, "parallel": parallel or "default", "zstd": zstd,
            "wire_mib": wire_mib, "bytes": size, "snapshot_and_collect_s": total,
            "collect_s": copied, "merge_s": merge_s, "merged_records": merge["records"],
            "collect_and_merge_s": total + merge_s}


def event_cost(fleet, reps=3):
    """tracepoint_bench --summary in a private /dev/shm, alternately alone and with an agent."""
    ratios = {"alone": [], "agent": []}
    for rep in range(reps):
        for mode in ("alone", "agent"):
            summary = os.path.join(fleet.tmp, f"summary-{mode}-{rep}.json")
            agent = ""
            if mode == "agent":
                agent = (f"{NT} agent --node cost --spool {fleet.tmp}/spool-cost --scan-ms 200 "
                         + " ".join(fleet.fleet_args()) + " 2>/dev/null & agent=$!; ")
            stop = 'kill $agent; wait $agent' if mode == "agent" else "true"
            script = (f"mount -t tmpfs -o mode=1777 tmpfs /dev/shm && {agent}"
                      f"{BIN}/tracepoint_bench --summary={summary} --rounds=200 >/dev/null; "
                      f"{stop}")
            subprocess.run(["unshare", "--mount", "--fork", "sh", "-c", script], check=True)
            ratios[mode].append(json.load(open(summary))["ratio_event2_to_floor"])
    return {"ratio_event2_to_floor_alone": statistics.median(ratios["alone"]),
            "ratio_event2_to_floor_with_agent": statistics.median(ratios["agent"]),
            "runs": ratios}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="build/bench/fleet.json")
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--triggers", type=int, default=200)
    ap.add_argument("--idle-processes", type=int, default=50)
    ap.add_argument("--ring-mib", type=int, default=64)
    ap.add_argument("--scaling", default="", help="e.g. 8,16,32,64 agents")
    ap.add_argument("--scaling-triggers", type=int, default=30)
    ap.add_argument("--scaling-ring-mib", type=int, default=4)
    ap.add_argument("--only", default="latency,idle,collect,cost")
    ap.add_argument("--bin", default=BIN, help="where the programs are (default build/bin)")
    ap.add_argument("--collect-parallel", type=int,
                    help="nodes `fleet snapshot` copies at once (default: its own default)")
    ap.add_argument("--collect-no-zstd", action="store_true",
                    help="`fleet snapshot --no-zstd`: the agents send their chunks uncompressed")
    ap.add_argument("--dump", help="append each trigger's manifests to this file (JSON lines)")
    a = ap.parse_args()
    global DUMP
    DUMP = a.dump
    if os.geteuid() != 0:
        sys.exit("fleet_bench: needs root (mount namespaces)")
    only = set(a.only.split(","))
    tmp = tempfile.mkdtemp(prefix="nanotrace-fleet-bench.")
    fleet = Fleet(tmp, 30000 + os.getpid() % 20000)
    result = {"machine_cpus": os.cpu_count(), "command": " ".join(sys.argv),
              "load_average_at_start": os.getloadavg()}
    failed = None
    try:
        if "latency" in only:
            load0 = os.getloadavg()
            lat, base, hops = freeze_latency(fleet, a.nodes, a.triggers)
            result["freeze_latency"] = {
                "nodes": a.nodes, "triggers": a.triggers,
                "what": "matching record's CLOCK_REALTIME to the last node's freeze (ms)",
                "p50_ms": pct(lat, 50), "p99_ms": pct(lat, 99), "max_ms": max(lat),
                "broker_floor": {
                    "what": "bare NATS publish to as many subscriber processes, to the last (ms)",
                    "p50_ms": pct(base, 50), "p99_ms": pct(base, 99), "max_ms": max(base)},
                "p99_vs_floor_p99": pct(lat, 99) / pct(base, 99),
                "hops": hop_table(hops),
                "load_average": [load0, os.getloadavg()]}
            print(json.dumps({k: v for k, v in result["freeze_latency"].items() if k != "hops"}),
                  flush=True)
            for h, v in result["freeze_latency"]["hops"].items():
                print(f"  {h:24} p50 {v['p50_ms']:8.3f} ms  p99 {v['p99_ms']:8.3f} ms  "
                      f"({v['samples']} samples)", flush=True)
        if "idle" in only:
            result["agent_idle_cpu_percent"] = {"processes": a.idle_processes,
                                                "percent_of_a_core": idle_cpu(fleet, a.idle_processes)}
            print(json.dumps(result["agent_idle_cpu_percent"]), flush=True)
        if "collect" in only:
            result["collect"] = collect_time(fleet, a.nodes, a.ring_mib, a.collect_parallel,
                                             not a.collect_no_zstd)
            print(json.dumps(result["collect"]), flush=True)
        if "cost" in only:
            result["event_cost"] = event_cost(fleet)
            print(json.dumps(result["event_cost"]), flush=True)
        if a.scaling:
            rows = []
            result["scaling"] = {"triggers": a.scaling_triggers, "ring_mib": a.scaling_ring_mib,
                                 "rows": rows}
            for n in map(int, a.scaling.split(",")):
                lat, _, _ = freeze_latency(fleet, n, a.scaling_triggers, floor=False)
                c = collect_time(fleet, n, a.scaling_ring_mib)
                rows.append({"agents": n, "freeze_p50_ms": pct(lat, 50), "freeze_p99_ms": pct(lat, 99),
                             "freeze_max_ms": max(lat), "collect_s": c["collect_s"],
                             "collect_bytes": c["bytes"], "merge_s": c["merge_s"]})
                print(json.dumps(rows[-1]), flush=True)
    except (RuntimeError, AssertionError, OSError) as e:
        failed = result["error"] = f"{type(e).__name__}: {e}"  # what was measured is kept
    finally:
        fleet.close()
        shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print("wrote", a.out)
    if failed:
        sys.exit("fleet_bench: " + failed)


if __name__ == "__main__":
    main()
