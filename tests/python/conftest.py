"""Fixtures of the Python module's tests: real traced programs (the export and text helpers,
the test producer) run with their segment kept, trace files written by the real CLI, and
`nanotrace dump --json` / `stats --json` / `latency --json` as the reference. ctest runs these
with /usr/bin/python3 -m pytest, PYTHONPATH=BUILD/python and NANOTRACE_BIN_DIR=BUILD/bin."""

import json
import os
import re
import subprocess

import pytest

BIN = os.environ.get("NANOTRACE_BIN_DIR", "")
CLI = os.path.join(BIN, "nanotrace")


def cli(*args, check=True):
    r = subprocess.run([CLI, *map(str, args)], capture_output=True, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"nanotrace {args}: {r.stderr.decode(errors='replace')}")
    return r


def dump_json(source):
    out = cli("dump", "--json", source).stdout.decode()
    # Lines end at "\n" only: str.splitlines() would also split at U+0085 and U+2028 in strings.
    return [json.loads(line) for line in out.split("\n") if line]


def cli_json(*args):
    return json.loads(cli(*args).stdout)


class Traced:
    """A helper program run to completion, its segment kept (removed afterwards)."""

    def __init__(self, program, *args, env=None):
        e = dict(os.environ, NANOTRACE_KEEP="1", **(env or {}))
        r = subprocess.run(
            [os.path.join(BIN, program), *map(str, args)], capture_output=True, env=e, timeout=300
        )
        assert r.returncode == 0, r.stderr
        m = re.search(rb"segment (\S+)", r.stdout)
        if m:
            self.segment = m.group(1).decode()
        else:  # the test producer prints only "pid N"
            m = re.search(rb"pid (\d+)", r.stdout)
            assert m, r.stdout
            self.segment = f"/dev/shm/nanotrace-{m.group(1).decode()}"

    def close(self):
        if os.path.exists(self.segment):
            os.unlink(self.segment)


@pytest.fixture
def traced(request):
    made = []

    def run(program, *args, env=None):
        t = Traced(program, *args, env=env)
        made.append(t)
        return t.segment

    yield run
    for t in made:
        t.close()


@pytest.fixture
def recovered(tmp_path):
    """A trace file of a segment's records, written by `nanotrace recover`."""

    def make(segment, name="trace.ntr"):
        path = tmp_path / name
        cli("recover", segment, "-o", path)
        return str(path)

    return make
