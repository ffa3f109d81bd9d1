#!/usr/bin/python3
"""Ship benchmark (scripts/ship-bench.sh runs it; results in BUILD/bench/ship.json).

1. Ship rate into one clickhouse-server: `nanotrace ship` of a trace file (gen_trace's
   io:submit/io:complete pairs) against ClickHouse's own clickhouse-client inserting the same
   rows (the events, intervals and losses rows `ship` made, dumped once as Native files) into
   tables of the same schema, in interleaved rounds (ship, client, ship, client, ...; each into
   a fresh database, dropped after), medians; and, in the same rounds, the server's own
   INSERT ... SELECT of the same rows from its local tables: the most it can take.
2. Query time on TRACES traces shipped under TRACES node names into two shards (a Distributed
   table over two servers): the cookbook's p99-per-node-per-minute query (docs/clickhouse.md,
   as written) against `nanotrace latency` run on each of the same traces, interleaved rounds.

The servers are our own, on free ports and data directories under a temporary directory,
listening on 127.0.0.1 only.
"""
import argparse
import json
import os
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, root, name, shard_ports=None):
        self.dir = os.path.join(root, name)
        self.http = free_port()
        self.tcp = free_port()
        self.shard_ports = shard_ports
        self.proc = None

    def url(self):
        return f"http://127.0.0.1:{self.http}"

    def start(self, shard_ports):
        d = self.dir
        os.makedirs(d + "/data", exist_ok=True)
        cluster = "".join(
            f"<shard><replica><host>127.0.0.1</host><port>{p}</port></replica></shard>"
            for p in shard_ports)
        with open(d + "/config.xml", "w") as f:
            f.write(f"""<?xml version="1.0"?>
<yandex>
<logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/server.err.log</errorlog><console>0</console></logger>
<listen_host>127.0.0.1</listen_host>
<http_port>{self.http}</http_port><tcp_port>{self.tcp}</tcp_port>
<path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path>
<user_files_path>{d}/user_files/</user_files_path><format_schema_path>{d}/format_schemas/</format_schema_path>
<users_config>{d}/users.xml</users_config>
<default_profile>default</default_profile><default_database>default</default_database>
<mark_cache_size>268435456</mark_cache_size><uncompressed_cache_size>268435456</uncompressed_cache_size>
<timezone>UTC</timezone>
<remote_servers><nt>{cluster}</nt></remote_servers>
</yandex>
""")
        with open(d + "/users.xml", "w") as f:
            f.write("""<?xml version="1.0"?>
<yandex><profiles><default></default></profiles>
<users><default><password></password><networks><ip>127.0.0.1</ip></networks><profile>default</profile><quota>default</quota></default></users>
<quotas><default></default></quotas></yandex>
""")
        log = open(d + "/stdout.log", "a")
        self.proc = subprocess.Popen(["clickhouse-server", "--config-file=" + d + "/config.xml"],
                                     stdout=log, stderr=log)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                self.query("SELECT 1")
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("clickhouse-server did not start: see " + d)

    def query(self, sql, out=None):
        with urllib.request.urlopen(self.url() + "/", data=sql.encode()) as r:
            if out is None:
                return r.read().decode()
            shutil.copyfileobj(r, out)
            return None

    def stop(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def process_cpu(pid):
    """User + system CPU seconds of a running process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measured(fn, server):
    """(wall seconds, CPU seconds of the processes fn ran, CPU seconds of the server)."""
    own, theirs = children_cpu(), process_cpu(server.proc.pid)
    wall = timed(fn)
    return wall, children_cpu() - own, process_cpu(server.proc.pid) - theirs


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def cookbook(source_dir, name):
    doc = open(os.path.join(source_dir, "docs/clickhouse.md")).read()
    m = re.search(r"```sql\n-- cookbook: " + name + r"\n(.*?)```", doc, re.S)
    return m.group(1)


def ship_rate(args, root, nanotrace, trace):
    server = Server(root, "single")
    server.start([])
    try:
        # The rows `ship` makes, once, as Native files for clickhouse-client.
        run([nanotrace, "ship", trace, "--clickhouse", server.url(), "--database", "prep",
             "--node", "bench"])
        files = {}
        for table in ("events", "intervals", "losses"):
            if int(server.query(f"SELECT count() FROM prep.{table}_local")) == 0:
                continue  # clickhouse-client refuses an empty insert
            path = os.path.join(root, table + ".native")
            with open(path, "wb") as f:
                server.query(f"SELECT * FROM prep.{table}_local FORMAT Native", out=f)
            files[table] = path
        events = int(server.query("SELECT count() FROM prep.events_local"))
        rows = sum(int(server.query(f"SELECT count() FROM prep.{t}_local")) for t in files)
        native_bytes = sum(os.path.getsize(p) for p in files.values())

        def fresh(db):
            server.query(f"CREATE DATABASE {db}")
            for table in files:
                server.query(f"CREATE TABLE {db}.{table}_local AS prep.{table}_local")

        def check_and_drop(db):
            got = int(server.query(f"SELECT count() FROM {db}.events_local"))
            assert got == events, (got, events)
            server.query(f"DROP DATABASE {db}")

        ship_s, client_s, server_s = [], [], []
        cpu = {"ship": [], "client": [], "insert_select": []}

        def take(times, side, m):
            times.append(m[0])
            cpu[side].append({"own_cpu_s": m[1], "server_cpu_s": m[2]})

        for r in range(args.rounds):
            db = f"ship_{r}"
            take(ship_s, "ship", measured(lambda: run(
                [nanotrace, "ship", trace, "--clickhouse", server.url(), "--database", db,
                 "--node", f"bench-{r}", *args.ship_args.split()]), server))
            check_and_drop(db)
            db = f"client_{r}"
            fresh(db)

            def client():
                for table, path in files.items():
                    with open(path, "rb") as f:
                        run(["clickhouse-client", "--host", "127.0.0.1", "--port",
                             str(server.tcp), "--query",
                             f"INSERT INTO {db}.{table}_local FORMAT Native"], stdin=f)
            take(client_s, "client", measured(client, server))
            check_and_drop(db)
            # The server's own ceiling: the same rows copied from a local table, nothing
            # parsed from a client.
            db = f"server_{r}"
            fresh(db)

            def insert_select():
                for table in files:
                    server.query(f"INSERT INTO {db}.{table}_local SELECT * FROM prep.{table}_local")
            take(server_s, "insert_select", measured(insert_select, server))
            check_and_drop(db)

        def rates(times, side):
            med = statistics.median(times)
            return {"median_s": med, "events_per_s": events / med, "rows_per_s": rows / med,
                    "native_mb_per_s": native_bytes / med / 1e6,
                    # CPU seconds, medians: the side's own processes and the server's.
                    "own_cpu_s": statistics.median(c["own_cpu_s"] for c in cpu[side]),
                    "server_cpu_s": statistics.median(c["server_cpu_s"] for c in cpu[side])}
        ship = rates(ship_s, "ship")
        client = rates(client_s, "client")
        ceiling = rates(server_s, "insert_select")
        return {
            "ship_args": args.ship_args,
            "events": events,
            "rows": rows,
            "native_bytes": native_bytes,
            "rounds": args.rounds,
            "ship_s": ship_s,
            "client_s": client_s,
            "insert_select_s": server_s,
            "ship": ship,
            "client": client,
            "insert_select": ceiling,
            "ship_events_per_s": ship["events_per_s"],
            "client_events_per_s": client["events_per_s"],
            "ship_vs_client": client["median_s"] / ship["median_s"],
            "ship_vs_insert_select": ceiling["median_s"] / ship["median_s"],
        }
    finally:
        server.stop()


def query_time(args, root, nanotrace, trace):
    shards = [Server(root, "shard0"), Server(root, "shard1")]
    ports = [s.tcp for s in shards]
    for s in shards:
        s.start(ports)
    try:
        urls = []
        for s in shards:
            urls += ["--clickhouse", s.url()]
        for n in range(args.traces):
            run([nanotrace, "ship", trace, *urls, "--cluster", "nt", "--node", f"node-{n}"])
        events = int(shards[0].query("SELECT count() FROM nanotrace.events"))
        intervals = int(shards[0].query("SELECT count() FROM nanotrace.intervals"))
        per_shard = [int(s.query("SELECT count() FROM nanotrace.events_local")) for s in shards]
        sql = cookbook(args.source_dir, "latency_per_minute")
        query_s, cli_s = [], []
        for _ in range(args.rounds):
            query_s.append(timed(lambda: shards[0].query(sql)))

            def cli():
                for _ in range(args.traces):
                    run([nanotrace, "latency", trace, "--begin", "io:submit", "--end",
                         "io:complete", "--key", "req"])
            cli_s.append(timed(cli))
        rows = shards[0].query(sql).count("\n")
        return {
            "traces": args.traces,
            "events": events,
            "events_per_shard": per_shard,
            "intervals": intervals,
            "query": "cookbook latency_per_minute (p50/p99/p99.9 per node, pair, minute)",
            "result_rows": rows,
            "rounds": args.rounds,
            "query_s": query_s,
            "latency_cli_s": cli_s,
            "query_median_s": statistics.median(query_s),
            "latency_cli_median_s": statistics.median(cli_s),
        }
    finally:
        for s in shards:
            s.stop()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--source-dir", required=True)
    p.add_argument("--trace", required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--traces", type=int, default=10)
    p.add_argument("--json", required=True)
    p.add_argument("--ship-args", default="",
                   help="more options of the timed ships (e.g. '--connections 1')")
    p.add_argument("--only", choices=["ship_rate", "query_time"],
                   help="run one of the two parts")
    args = p.parse_args()
    nanotrace = os.path.join(args.bin, "nanotrace")
    root = tempfile.mkdtemp(prefix="nt-ship-bench.")
    try:
        out = {
            "command": "scripts/ship-bench.sh",
            "clickhouse": "18.16 (Debian 12 clickhouse-server)",
        }
        if args.only in (None, "ship_rate"):
            out["ship_rate"] = ship_rate(args, root, nanotrace, args.trace)
        if args.only in (None, "query_time"):
            out["query_time"] = query_time(args, root, nanotrace, args.trace)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    with open(args.json, "w") as f:
        json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
