"""The Python module against the real CLI on real traces: every value equals `nanotrace dump
--json`'s (every field type, hostile strings, NaN and infinities), in numpy tables and in
pandas frames, with no Python object per row (strings dictionary-encoded); stats and latency
equal the CLI's JSON, pairs agree with a brute-force match of dump's records, losses are
reported, bad input raises nanotrace.Error, and a live process is controlled."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import nanotrace
from conftest import BIN, cli, cli_json, dump_json

FIXED = ("time_ns", "pid", "tid", "seq")


def json_equal(value, expected, ftype):
    """value (from the module) is what dump --json printed as expected."""
    if ftype in ("f32", "f64") and isinstance(expected, str):
        return {"NaN": math.isnan, "Infinity": lambda v: v == math.inf,
                "-Infinity": lambda v: v == -math.inf}[expected](value)
    if ftype == "pointer":
        return expected == f"0x{int(value):x}"
    if ftype in ("f32", "f64"):
        return float(value) == expected and math.copysign(1, value) == math.copysign(1, expected)
    if ftype == "bool":
        return bool(value) is expected
    if isinstance(expected, str):
        return isinstance(value, str) and value == expected
    return type(expected) is int and int(value) == expected


def check_encoding(column):
    """A column holds no Python object per row: an ndarray of numbers, or a Categorical whose
    codes are the narrowest integers pandas would choose and whose categories are distinct."""
    if isinstance(column, nanotrace.Categorical):
        n = len(column.categories)
        assert column.categories.dtype == object and not column.categories.flags.writeable
        assert len(set(column.categories.tolist())) == n  # distinct
        width = np.int8 if n < 127 else np.int16 if n < 32767 else np.int32
        assert column.codes.dtype == width
        assert len(column.codes) == 0 or 0 <= column.codes.min() <= column.codes.max() < n
    else:
        assert isinstance(column, np.ndarray) and column.dtype != object, column.dtype


def check_against_dump(trace, source):
    """Every row of every table equals the dump line of the same record, and every dump line
    has a row: tables rows are keyed by (tid, seq). A string field's tables share one
    categories array."""
    lines = dump_json(source)
    pid = trace.process["pid"]
    # Without kernel events, times count from the process's start.
    assert trace.process["origin_realtime_ns"] == trace.process["start_realtime_ns"] > 0
    by_key = {(j["tid"], j["seq"]): j for j in lines}
    assert len(by_key) == len(lines)
    types = {e["name"]: [(f[0], f[1]) for f in e["fields"]] for e in trace.event_info()}
    names = {t["tid"]: t["name"] for t in trace.threads()}
    seen = 0
    shared = {}  # a string field's categories, by name
    for name, table in trace.events().items():
        fields = types[name]
        assert list(table)[: len(FIXED)] == list(FIXED)
        assert len(table) == len(FIXED) + len(fields)  # no event column
        for column, (fname, ftype) in zip(list(table)[len(FIXED):], fields):
            check_encoding(table[column])
            if ftype == "string":
                assert shared.setdefault(fname, table[column].categories) is \
                    table[column].categories
        values = {c: list(table[c]) for c in table}  # decoded, once per column
        for i in range(len(table["time_ns"])):
            j = by_key[(int(table["tid"][i]), int(table["seq"][i]))]
            assert j["event"] == name
            assert j["time_ns"] == int(table["time_ns"][i])
            assert j["thread"] == names[j["tid"]]
            assert int(table["pid"][i]) == pid
            assert list(j["fields"]) == [f for f, _ in fields]
            for (fname, ftype), column in zip(fields, list(table)[len(FIXED):]):
                value = values[column][i]
                assert json_equal(value, j["fields"][fname], ftype), (name, fname, value, j)
            seen += 1
    assert seen == len(lines)
    check_frame_against_dump(trace, lines, types)


def check_frame_against_dump(trace, lines, types):
    """to_pandas() of every event: the dump lines in order, with the event and every string
    column a pandas Categorical (NaN where an event lacks the field)."""
    import pandas as pd

    frame = trace.to_pandas()
    assert len(frame) == len(lines)
    assert list(frame.columns)[:5] == list(FIXED) + ["event"]
    assert frame["event"].dtype == "category"
    assert list(frame["event"]) == [j["event"] for j in lines]
    assert frame["seq"].tolist() == [j["seq"] for j in lines]
    assert frame["time_ns"].tolist() == [j["time_ns"] for j in lines]
    for fname in {f for fields in types.values() for f, t in fields if t == "string"}:
        column = "fields." + fname if fname in FIXED + ("event",) else fname
        assert frame[column].dtype == "category", column
        got = frame[column].tolist()
        for value, j in zip(got, lines):
            if fname in j["fields"]:
                assert value == j["fields"][fname], (fname, value, j)
            else:
                assert pd.isna(value), (fname, value, j)


def test_values_equal_dump_json_from_segment_and_file(traced, recovered):
    segment = traced("export_helper", "--pairs", 200)
    check_against_dump(nanotrace.open(segment), segment)
    path = recovered(segment)
    trace = nanotrace.open(path)
    assert trace.is_file
    check_against_dump(trace, path)
    types = trace.events("test:types")
    # Each number in its field's own width.
    widths = {"i8": (np.int8, -5), "i16": (np.int16, -300), "i32": (np.int32, -70000),
              "i64": (np.int64, -5000000000), "u8": (np.uint8, 200), "u16": (np.uint16, 60000),
              "u32": (np.uint32, 4000000000), "u64": (np.uint64, 18000000000000000000),
              "f32": (np.float32, 1.5), "f64": (np.float64, -2.25), "ptr": (np.uint64, 0x1234)}
    for field, (dtype, value) in widths.items():
        assert types[field].dtype == dtype and types[field][0] == value, field
    assert types["seq"].dtype == np.uint32 and types["time_ns"].dtype == np.uint64
    assert types["flag"].dtype == np.bool_ and types["flag"][0]
    assert types["name"][0] == "hello world"
    assert types["fields.event"][0] == 7  # a field named like a fixed column
    strings = trace.events("test:strings")
    assert strings["first"][0] == "" and len(strings["second"][0]) == 63


def test_hostile_strings_and_non_finite_numbers(traced, recovered):
    segment = traced("text_helper")
    for source in (segment, recovered(segment)):
        trace = nanotrace.open(source)
        check_against_dump(trace, source)
        numbers = trace.events("text:numbers")
        assert math.isnan(numbers["nan"][0])
        assert numbers["inf"][0] == math.inf and numbers["ninf"][0] == -math.inf
        assert math.copysign(1, numbers["negzero"][0]) == -1
        bad = trace.events("text:bad")
        assert bad["cont"][0] == "\ufffdx\ufffd"
        for column in ("cont", "overlong", "surrogate", "high", "mixed"):
            assert all(isinstance(s, str) for s in bad[column])
            for s in bad[column]:
                s.encode("utf-8")  # valid text: no lone surrogates
        # A pair keyed and split by invalid text.
        pairs = trace.pairs("text:begin", "text:end", "key", by="dev")
        assert list(pairs["kind"]) == ["pair"]
        assert pairs["key"][0] == "k\ufffd" and pairs["by"][0] == "d\ufffd"
        for column in pairs.values():
            check_encoding(column)
        threads = {t["name"] for t in trace.threads()}
        assert any("\ufffd" in name for name in threads)


def test_dictionaries_of_strings_that_read_alike(traced, recovered):
    # Strings whose bytes differ only where they are ill-formed are one category (as dump
    # prints them alike); 300 distinct strings need 16-bit codes; text:begin shares dev's.
    segment = traced("text_helper", "--dictionary")
    for source in (segment, recovered(segment)):
        trace = nanotrace.open(source)
        check_against_dump(trace, source)
        tables = trace.events(["text:dict", "text:begin"])
        table = tables["text:dict"]
        dev, many = table["dev"], table["many"]
        assert sorted(dev.categories.tolist()) == ["", "d", "d\ufffd"]
        assert dev.codes.dtype == np.int8 and many.codes.dtype == np.int16
        assert len(many.categories) == 300 and list(many[:3]) == ["s0", "s1", "s2"]
        assert tables["text:begin"]["dev"].categories is dev.categories  # one read
        assert (dev == "d\ufffd").sum() == 400 and (dev != "d").sum() == 500
        assert (dev == "absent").sum() == 0
        assert dev.decode().tolist() == list(dev) and len(dev.decode()) == 600
        frame = trace.events("text:dict", pandas=True)
        assert frame["dev"].dtype == "category" and frame["many"].cat.codes.dtype == np.int16
        assert frame["dev"].tolist() == list(dev)
        # pandas adopts the codes as they are.
        as_pandas = dev.to_pandas()
        assert np.shares_memory(as_pandas.codes, dev.codes)
        structured = trace.events("text:dict", structured=True)
        assert (structured["dev"] == dev.codes).all()
        assert structured.dtype["dev"].metadata["categories"].tolist() == dev.categories.tolist()


def test_stats_equal_cli_and_report_losses(traced):
    # 64 KiB rings overwritten many times over: the reader sees the gaps.
    overwrite = traced("nanotrace_test_producer", "--threads", 2, "--events", 50000,
                       env={"NANOTRACE_BUFFER": "64K"})
    # A discarding ring without a consumer drops what does not fit, and counts it.
    discard = traced("nanotrace_test_producer", "--threads", 2, "--events", 50000,
                     env={"NANOTRACE_BUFFER": "64K", "NANOTRACE_MODE": "discard"})
    for segment, kind in ((overwrite, "overwritten"), (discard, "dropped")):
        trace = nanotrace.open(segment)
        stats = trace.stats()
        expected = cli_json("stats", "--json", segment)
        assert stats["corrupt_blocks"] == 0 and stats["unreadable"] == 0
        for key in ("rate_per_s", "span_s"):
            assert stats.pop(key) == pytest.approx(expected.pop(key))
        for a, b in zip(stats["threads"], expected["threads"]):
            assert a.pop("rate_per_s") == pytest.approx(b.pop("rate_per_s"))
        for a, b in zip(stats["events"], expected["events"]):
            assert a.pop("rate_per_s") == pytest.approx(b.pop("rate_per_s"))
        assert stats == expected
        assert stats["lost"] > 0
        assert sum(t[kind] for t in stats["threads"]) > 0
        rows = trace.events("test:rec")
        assert len(rows["seq"]) + stats["lost"] == 100000
        # The producer numbers its records: a row's own seq field is the reader's seq.
        assert (rows["seq"] == rows["fields.seq"]).all()


def test_latency_equals_cli_and_pairs_match_brute_force(traced):
    segment = traced("export_helper", "--pairs", 300, "--unmatched-begins", 5,
                     "--unmatched-ends", 4)
    trace = nanotrace.open(segment)
    got = trace.latency("test:begin", "test:end", "id", by="dev", top=5)
    expected = cli_json("latency", segment, "--begin", "test:begin", "--end", "test:end",
                        "--key", "id", "--by", "dev", "--top", 5, "--json")
    assert got == expected

    pairs = trace.pairs("test:begin", "test:end", "id", by="dev")
    kinds = list(pairs["kind"])
    assert kinds.count("pair") == got["overall"]["count"] == 300
    assert kinds.count("unmatched_begin") == got["overall"]["unmatched_begins"] == 5
    assert kinds.count("unmatched_end") == got["unmatched_ends"] == 4
    # Brute force from dump's records: ids are unique, so each begin pairs with its end.
    begins, latencies = {}, {}
    for j in dump_json(segment):
        if j["event"] == "test:begin":
            begins[j["fields"]["id"]] = j
        elif j["event"] == "test:end" and j["fields"]["id"] in begins:
            b = begins[j["fields"]["id"]]
            latencies[j["fields"]["id"]] = (j["time_ns"] - b["time_ns"], b["fields"]["dev"],
                                            b["tid"], j["tid"])
    matched = pairs["kind"] == "pair"
    mine = {int(k): (int(lat), by, int(bt), int(et)) for k, lat, by, bt, et in zip(
        pairs["key"][matched], pairs["latency_ns"][matched], pairs["by"][matched],
        pairs["begin_tid"][matched], pairs["end_tid"][matched])}
    assert mine == latencies
    frame = trace.pairs("test:begin", "test:end", "id", pandas=True)
    assert len(frame) == 309 and "by" not in frame
    assert frame["kind"].dtype == "category"
    # An unmatched end has no by value.
    unmatched_end = pairs["kind"] == "unmatched_end"
    assert [pairs["by"][i] for i in np.flatnonzero(unmatched_end)] == [None] * 4
    for column in pairs.values():
        if column is not pairs["by"]:
            check_encoding(column)


def test_pandas_and_structured(traced):
    import pandas as pd  # python3-pandas is in the Makefile's PACKAGES: no skip
    segment = traced("export_helper", "--pairs", 50)
    trace = nanotrace.open(segment)
    begin = trace.to_pandas("test:begin")
    assert isinstance(begin, pd.DataFrame)
    assert list(begin.columns) == list(FIXED) + ["id", "dev"]
    assert len(begin) == 50 + 7
    assert trace.events("test:begin", pandas=True).equals(begin)
    # Every event in one frame, in dump's order.
    everything = trace.to_pandas()
    lines = dump_json(segment)
    assert list(everything["event"]) == [j["event"] for j in lines]
    assert list(everything["seq"]) == [j["seq"] for j in lines]
    assert "status" in everything and "i8" in everything
    begins = everything[everything["event"] == "test:begin"]
    assert begins["id"].astype("uint64").tolist() == begin["id"].tolist()
    assert begins["dev"].tolist() == begin["dev"].tolist()
    assert everything["dev"].isna().sum() == len(lines) - len(begin)  # None elsewhere
    group = trace.to_pandas("test")
    assert len(group) == len(lines)
    with nanotrace.open(segment) as again:
        ends = again.events("test:end")
    assert len(ends["id"]) == 50 + 3 and again._trace is None  # the arrays outlive the trace
    structured = trace.events("test:end", structured=True)
    assert structured.dtype.names == FIXED + ("id", "status")
    assert "event" not in trace.events("test:end") and "event" not in begin
    assert list(structured["id"]) == list(trace.events("test:end")["id"])


def test_to_pandas_keeps_integers_exact_across_events(traced):
    import pandas as pd
    segment = traced("export_helper", "--pairs", 4, "--mixed-widths", 1)
    trace = nanotrace.open(segment)
    # Widths one integer type holds: that type.
    frame = trace.to_pandas(["test:narrow", "test:wide"])
    assert frame["v"].dtype == np.int32
    assert dict(zip(frame["event"], frame["v"])) == {"test:narrow": 200, "test:wide": -70000}
    # uint64 above 2^63 with int64: Python ints, not floats.
    frame = trace.to_pandas(["test:huge", "test:negative"])
    assert frame["v"].dtype == object
    assert dict(zip(frame["event"], frame["v"])) == {"test:huge": 2**63 + 1, "test:negative": -1}
    # A column only some events have: nullable, exact where present, <NA> elsewhere.
    frame = trace.to_pandas(["test:huge", "test:begin"])
    assert str(frame["v"].dtype) == "UInt64"
    huge = frame["event"] == "test:huge"
    assert frame["v"][huge].tolist() == [2**63 + 1]
    assert frame["v"][~huge].isna().all() and (~huge).sum() == 4 + 7
    assert str(frame["id"].dtype) == "UInt64" and frame["id"][huge].isna().all()
    # The same as dump --json, event by event.
    everything = trace.to_pandas()
    lines = dump_json(segment)
    for row, j in zip(everything.itertuples(index=False), lines):
        if "v" in j["fields"]:
            assert row.v == j["fields"]["v"] and not isinstance(row.v, float), j
        else:
            assert pd.isna(row.v), j


def test_merged_file_of_several_nodes(tmp_path, traced):
    """A file `nanotrace merge` wrote reads like any other: its nodes, and every record of every
    node, the same counts as the CLI's stats."""
    segment = traced("nanotrace_test_producer", "--threads", "2", "--events", "300")
    files = []
    for name in ("east", "west"):
        path = str(tmp_path / f"{name}.ntr")
        r = subprocess.run([os.path.join(BIN, "nanotrace"), "recover", segment, "-o", path],
                           capture_output=True, env=dict(os.environ, NANOTRACE_NODE_NAME=name))
        assert r.returncode == 0, r.stderr
        files.append(path)
    merged = str(tmp_path / "merged.ntr")
    cli("merge", *files, "-o", merged)
    trace = nanotrace.open(merged)
    nodes = trace.nodes
    assert [n["hostname"] for n in nodes] == ["east", "west"]
    assert [n["alignment"] for n in nodes] == ["reference", "shared-clock"]
    assert nodes[1]["error_bound_ns"] == 0 and nodes[0]["origin"] is None
    stats = cli_json("stats", "--json", merged)
    assert [n["hostname"] for n in stats["nodes"]] == ["east", "west"]
    rows = sum(len(t["time_ns"]) for t in trace.events().values())
    assert rows == stats["records"] == 2 * 2 * 300


def test_bad_input_raises_a_clear_error(tmp_path, traced, recovered):
    with pytest.raises(nanotrace.Error, match="^nanotrace: "):
        nanotrace.open(str(tmp_path / "missing.ntr"))
    garbage = tmp_path / "garbage.ntr"
    garbage.write_bytes(b"NOTATRACE" + bytes(range(256)) * 64)
    with pytest.raises(nanotrace.Error, match="^nanotrace: "):
        nanotrace.open(str(garbage))
    with pytest.raises(nanotrace.Error, match="nosuch"):
        nanotrace.open("name:nosuch-python-test")
    # A real file with its header damaged, and one with its data damaged past the header.
    path = recovered(traced("export_helper", "--pairs", 20))
    data = bytearray(open(path, "rb").read())
    header = bytearray(data)
    header[:8] = b"NANOTRxx"
    (tmp_path / "header.ntr").write_bytes(header)
    with pytest.raises(nanotrace.Error, match="^nanotrace: "):
        nanotrace.open(str(tmp_path / "header.ntr"))
    for at in range(len(data) // 2, len(data), max(1, len(data) // 16)):
        hurt = bytearray(data)
        hurt[at] ^= 0xFF
        (tmp_path / "hurt.ntr").write_bytes(hurt)
        try:
            trace = nanotrace.open(str(tmp_path / "hurt.ntr"))
        except nanotrace.Error as e:
            assert str(e).startswith("nanotrace: ")
            continue
        trace.events()  # whatever was kept reads without a crash
        trace.stats()
    trace = nanotrace.open(path)
    with pytest.raises(nanotrace.Error, match="no event or group 'test:nosuch'"):
        trace.events("test:nosuch")
    with pytest.raises(nanotrace.Error, match="nosuch"):
        trace.pairs("test:begin", "test:nosuch", "id")
    with pytest.raises(nanotrace.Error, match="has no field"):
        trace.latency("test:begin", "test:end", "nofield")
    with pytest.raises(nanotrace.Error, match="trace file"):
        nanotrace.control(path)


def test_live_process_controlled():
    env = dict(os.environ)
    producer = subprocess.Popen(
        [os.path.join(BIN, "nanotrace_test_producer"), "--events", "100", "--hold"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    try:
        pid = int(producer.stdout.readline().split()[1])
        assert producer.stdout.readline().strip() == b"ready"
        trace = nanotrace.open(pid)
        assert trace.process["alive"] and not trace.is_file
        assert len(trace.events("test:rec")["seq"]) == 100
        with trace.control() as process:
            assert process.groups()["test"] is True
            process.disable("test")
            assert process.groups()["test"] is False
            assert trace.groups()["test"] is False  # the process's own table says so
            process.enable("test")
            assert trace.groups()["test"] is True
            with pytest.raises(nanotrace.Error, match="nosuchgroup"):
                process.enable("nosuchgroup")
            process.arm("test:rec value>=5", after_events=7)
            state = process.trigger()
            assert state["state"] == "armed"
            assert state["expression"] == "test:rec value>=5" and state["after_events"] == 7
            with pytest.raises(nanotrace.Error, match="nosuchfield"):
                process.arm("test:rec nosuchfield>1")
            process.disarm()
            assert process.trigger()["state"] == "none"
        with pytest.raises(nanotrace.Error):
            nanotrace.control(f"/dev/shm/nanotrace-{pid}-nosuch")
    finally:
        producer.stdin.close()
        producer.wait(timeout=60)


def test_example_runs():
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "analyze.py")
    r = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "io:submit" in r.stdout and "latency per device" in r.stdout


def test_diff_equals_cli_json(traced):
    # stages_program: B adds 400 us to its parse stage; nanotrace.diff() returns what
    # `nanotrace diff --json` prints, and names that stage first among the changes observed
    # (one run a side: not attributable). The delay is a spin on the wall clock: on a busy
    # machine a preempted spin only lengthens, so the delta is at least the delay, not near it.
    a = traced("stages_program", "--requests", 500)
    b = traced("stages_program", "--requests", 500, "--delay-stage", "parse", "--delay-us", 400)
    got = nanotrace.diff(a, [b])
    assert got == cli_json("diff", a, b, "--json")
    assert got["statistics"]["attributable"] is False and got["ranked"] == []
    first = got["subjects"][got["observed_ranked"][0]]
    assert first["name"] == "stage:parse_begin -> stage:parse_end by req"
    p50 = next(m for m in first["metrics"] if m["metric"] == "p50")
    assert p50["observed"] and not p50["significant"] and p50["delta"] > 360000
    with pytest.raises(nanotrace.Error, match="no event"):
        nanotrace.diff(a, b, pairs=["stage:nope,stage:parse_end,req"])
