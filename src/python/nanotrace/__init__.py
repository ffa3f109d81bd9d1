"""nanotrace from Python: traces as numpy columns or pandas DataFrames, begin/end pairs,
latency, statistics, and control of a live traced process.

    import nanotrace
    trace = nanotrace.open("trace.ntr")          # a trace file, a pid, "name:NAME" or a segment
    io = trace.events("io:submit")               # {column: ndarray}
    df = trace.to_pandas("io:submit")            # the same as a DataFrame
    pairs = trace.pairs("io:submit", "io:complete", "req")
    print(trace.latency("io:submit", "io:complete", "req")["overall"]["p99_ns"])
    print(trace.stats()["lost"])

    with nanotrace.control(1234) as process:     # a live process
        process.enable("io")
        process.arm("io:complete lat_us>1000", after_events=100)

Values equal what `nanotrace dump --json` prints for the same records: columns time_ns,
pid, tid, seq and one per field (a field named like one of those, or "event", is
"fields.NAME"); a table of one event has no event column, a frame of several events
(to_pandas()) has one. thread names are in trace.threads(). pid holds one value per table
from one process: a read-only array of that value repeated (no memory per row). Numbers
keep their field's width: an i32 field is int32, a u8 field uint8, pointers uint64, an f32
field float32 (NaN and infinities as such), bools bool. seq is uint32 while every sequence
number of the read fits (a thread's first 4 Gi records), else uint64.

No table holds a Python object per row. Strings are dictionary-encoded: a Categorical
(numpy: nanotrace.Categorical, integer codes into an array of the distinct strings, made
once per trace and shared by every table with that field; pandas: pandas.Categorical over
the same codes and categories). Its values, decoded (column[i], list(column),
column.decode()), are str as in the JSON (bytes that are not valid UTF-8 become U+FFFD). So
are enum fields with value names (the name where the value has one, the number otherwise)
and the event column of a frame of several events. Rows are in the merged time order of
`nanotrace dump`.

Errors (no such process or file, a corrupt file, an unknown event) raise nanotrace.Error.
Reads release the GIL; a Trace (or Control) is used by one thread at a time.
"""

import numpy as np  # the tables are numpy arrays: imported here, not within the first read

from . import _nanotrace
from ._nanotrace import Error

__all__ = ["Error", "Trace", "Control", "Categorical", "open", "control", "diff"]


class Categorical:
    """A dictionary-encoded column, numpy's counterpart of pandas.Categorical: `codes` (an
    int8, int16 or int32 ndarray, as pandas would choose; -1 where a row has no value) index
    `categories` (a read-only object ndarray of distinct values, str for strings).

    column[i] is a value (None for -1), column[a:b] or column[mask] a Categorical of those
    rows; column == "sda" is a boolean mask (a compare of codes, not of strings);
    column.decode() (or np.asarray(column)) is an object array of the values, made on
    request; column.to_pandas() a pandas.Categorical over the same codes (no copy)."""

    __slots__ = ("codes", "categories")

    def __init__(self, codes, categories):
        self.codes = codes
        self.categories = categories

    def __len__(self):
        return len(self.codes)

    @property
    def dtype(self):
        return self.codes.dtype

    def __getitem__(self, index):
        codes = self.codes[index]
        if isinstance(codes, np.ndarray):
            return Categorical(codes, self.categories)
        return None if codes < 0 else self.categories[codes]

    def __iter__(self):
        categories = list(self.categories)
        return (None if c < 0 else categories[c] for c in self.codes.tolist())

    def code(self, value):
        """The code of value, or -1 if no row holds it."""
        where = np.flatnonzero(self.categories == value) if len(self.categories) else []
        return int(where[0]) if len(where) else -1

    def __eq__(self, value):
        if isinstance(value, Categorical):
            return NotImplemented
        code = self.code(value)
        return self.codes == code if code >= 0 else np.zeros(len(self.codes), dtype=bool)

    def __ne__(self, value):
        return ~self.__eq__(value)

    __hash__ = None

    def decode(self):
        """The values as an object array (None where the code is -1): one reference per row,
        made now."""
        out = self.categories.take(np.maximum(self.codes, 0))
        if len(out) and self.codes.min() < 0:
            out[self.codes < 0] = None
        return out

    def __array__(self, dtype=None):
        out = self.decode()
        return out if dtype is None else out.astype(dtype)

    def tolist(self):
        return list(self)

    def to_pandas(self, dtypes=None):
        """A pandas.Categorical over the same codes and categories (dtypes: a dict by which
        columns sharing their categories share one CategoricalDtype)."""
        import pandas as pd

        dtypes = {} if dtypes is None else dtypes
        held = dtypes.get(id(self.categories))
        if held is None:
            held = dtypes[id(self.categories)] = (self.categories,
                                                  pd.CategoricalDtype(self.categories))
        return pd.Categorical.from_codes(self.codes, dtype=held[1])

    def __repr__(self):
        shown = ", ".join(repr(v) for v in self[:8])
        more = ", ..." if len(self) > 8 else ""
        return (f"nanotrace.Categorical([{shown}{more}], {len(self)} rows, "
                f"{len(self.categories)} categories)")


def _wrap(table):
    """A table from the extension: (codes, categories) pairs become Categoricals."""
    return {k: Categorical(*v) if isinstance(v, tuple) else v for k, v in table.items()}


def _frame(table, dtypes):
    import pandas as pd

    return pd.DataFrame({k: v.to_pandas(dtypes) if isinstance(v, Categorical) else v
                         for k, v in table.items()}, copy=False)

def _runs(side):
    """A side of a diff: a path, "A1.ntr,A2.ntr", or a list of paths."""
    import os
    if isinstance(side, (str, bytes)) or hasattr(side, "__fspath__"):
        return [p for p in os.fsdecode(side).split(",") if p]
    return [os.fsdecode(p) for p in side]


def diff(a, b, pairs=None, alpha=0.05, min_change=5.0, resamples=2000,
         seed=0x6E616E6F74726163):
    """Which part got slower between runs A and B, by how much and how sure: the dict that
    `nanotrace diff A B --json` prints (same keys, same values for the same options).

    a, b: a trace file (or segment), "A1.ntr,A2.ntr", or a list of them; or benchmark result
    JSON files (Google Benchmark, `iograph bench --json`): runs of one build each, several a
    side for findings (with one run a side, "statistics"["attributable"] is False and the
    changes are in "observed_ranked"). pairs: "BEGIN,END,KEY" texts (default: the known pairs
    that occur on both sides). alpha: family-wise level; min_change: the least change a
    finding must be sure of, in percent of A's value (as --min-change and
    "statistics"["min_change_percent"]); resamples, seed: of the bootstrap."""
    import json
    text = _nanotrace.diff_json(_runs(a), _runs(b), _names(pairs), float(alpha),
                                float(min_change), int(resamples), int(seed))
    return json.loads(text)


def _names(name):
    if name is None:
        return []
    if isinstance(name, str):
        return [name]
    return list(name)


class Trace:
    """The records of one traced process: a trace file, or a segment (live or left behind).

    A live segment is read as it is at each call (the records written so far), without
    consuming them."""

    def __init__(self, source):
        self._trace = _nanotrace.open_trace(str(source))
        self.source = str(source)

    @property
    def is_file(self):
        return self._trace.is_file

    @property
    def warning(self):
        """Why part of a trace file was ignored (a damaged tail), or ""."""
        return self._trace.warning

    @property
    def process(self):
        """The traced process: pid, names, clock, ring sizes, losses, trigger."""
        return self._trace.process

    @property
    def nodes(self):
        """The machines the processes ran on: one in a snapshot or recording, several in a file
        `nanotrace merge` wrote (hostname, ids, pids, alignment, error_bound_ns (None: unknown),
        clock sync, and the trigger origin or None); [] for a live segment."""
        return self._trace.nodes

    def event_info(self):
        """The events: id, name ("group:event"), format, fields [(name, type, value names)]."""
        return self._trace.event_list()

    def event_names(self):
        return sorted({e["name"] for e in self._trace.event_list()})

    def threads(self):
        return self._trace.thread_list()

    def groups(self):
        """{group: enabled}."""
        return self._trace.groups()

    def refresh(self):
        """Re-reads a live segment's tables (events registered since open)."""
        self._trace.refresh()

    def _tables(self, name, row_order=False):
        tables, orders, event_codes, event_names = self._trace.read_tables(_names(name),
                                                                           row_order)
        return {k: _wrap(t) for k, t in tables.items()}, orders, event_codes, event_names

    def _single(self, name, tables):
        if len(tables) != 1:  # call sites of one name with different fields
            raise Error(f"nanotrace: {name} has {len(tables)} field layouts "
                        f"({', '.join(tables)}): read them with events([{name!r}])")
        return next(iter(tables.values()))

    def events(self, name=None, pandas=False, structured=False):
        """The records of an event as columns.

        name: "group:event" gives that event's table: {column: ndarray or Categorical}, or a
        DataFrame (pandas=True; strings as pandas.Categorical), or a numpy structured array
        (structured=True, a copy; a string column holds the codes, its dtype's metadata
        ["categories"] the strings). A group, a list of names, or None (every event) gives
        {event name: table}. A name whose call sites have different fields has one table per
        layout: "name", "name#2", ... (read it as a list: events(["group:event"])).
        """
        tables = self._tables(name)[0]
        single = isinstance(name, str) and ":" in name
        if single:
            tables = {name: self._single(name, tables)}
        if pandas:
            dtypes = {}
            tables = {k: _frame(v, dtypes) for k, v in tables.items()}
        elif structured:
            tables = {k: _structured(v) for k, v in tables.items()}
        if single:
            return tables[name]
        return tables

    def to_pandas(self, name=None):
        """A DataFrame: of one event ("group:event"), or of several (a group, a list, None for
        all) in one frame in the merged time order, with an `event` column (a
        pandas.Categorical of the events' names) after seq and the union of their field
        columns. Strings are pandas.Categorical columns (NaN where an event lacks the field).
        Integers stay exact: a column some events lack is a nullable integer column (pandas
        "Int32", "UInt64", ...) with <NA> there, and integers that no one integer type holds
        (int64 with uint64) are Python ints (None where absent). A column of floats some
        events lack holds NaN there; one of bools, None."""
        import pandas as pd

        if isinstance(name, str) and ":" in name:
            return _frame(self._single(name, self._tables(name)[0]), {})
        tables, orders, event_codes, event_names = self._tables(name, row_order=True)
        rows = sum(len(o) for o in orders.values())
        codes = np.empty(rows, dtype=_code_dtype(len(event_names)))
        for k, order in orders.items():
            codes[order] = event_codes[k]
        columns = ["time_ns", "pid", "tid", "seq"]
        for table in tables.values():
            columns += [c for c in table if c not in columns]
        data = {}
        dtypes = {}
        for column in columns:
            # Each table's values go to its rows' places in the merged order.
            parts = [(orders[k], t[column]) for k, t in tables.items() if column in t]
            data[column] = _merged_column(parts, rows, dtypes)
            if column == "seq":
                data["event"] = pd.Categorical.from_codes(
                    codes, dtype=pd.CategoricalDtype(event_names))
        return pd.DataFrame(data, copy=False)

    def pairs(self, begin, end, key, by=None, pandas=False):
        """Begin/end pairs matched by the value of field `key` (the analysis layer's interval
        matcher, as `nanotrace latency` uses): columns kind (a Categorical of "pair",
        "unmatched_begin", "unmatched_end"), begin_ns, end_ns, latency_ns, begin_tid, end_tid, key, by (when
        given: that field of the begin record; absent for an unmatched end: -1 codes, or None
        for numbers) and lost_adjacent (records were lost during the pair, or next to the
        unmatched record). Strings and enums are Categoricals."""
        columns = _wrap(self._trace.pairs(begin, end, key, by or ""))
        if by:
            no_begin = columns["kind"] == "unmatched_end"
            if no_begin.any():
                if isinstance(columns["by"], Categorical):
                    columns["by"].codes[no_begin] = -1
                else:  # numbers: None there
                    columns["by"] = columns["by"].astype(object)
                    columns["by"][no_begin] = None
        if pandas:
            return _frame(columns, {})
        return columns

    def latency(self, begin, end, key, by=None, top=0):
        """The latency report of `nanotrace latency --json` as a dict: counts, exact
        percentiles, log2 histogram, per-`by` groups, the `top` slowest pairs."""
        return self._trace.latency(begin, end, key, by or "", top)

    def stats(self):
        """`nanotrace stats --json` as a dict: records, rates, and losses (total and per
        thread: overwritten, dropped, corrupt blocks)."""
        return self._trace.stats()

    def control(self):
        """A Control of this trace's live process."""
        return Control(self.source)

    def close(self):
        """Releases the trace (its mapping and file) now rather than when collected; the
        arrays already read stay valid."""
        self._trace = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __repr__(self):
        p = self.process
        kind = "file" if self.is_file else "segment"
        return f"<nanotrace.Trace {kind} pid {p['pid']} {p['path']!r}>"


class Control:
    """A live traced process's groups and trigger (the Controller behind `nanotrace
    enable`, `trigger arm` ...). Each request waits for the process to answer."""

    def __init__(self, source):
        self._control = _nanotrace.attach(str(source))

    @property
    def process(self):
        return self._control.process

    def groups(self):
        """{group: enabled}, as read now."""
        return self._control.groups()

    def enable(self, *groups):
        for g in groups:
            self._control.set_group_enabled(g, True)

    def disable(self, *groups):
        for g in groups:
            self._control.set_group_enabled(g, False)

    def arm(self, expression, after_events=0, after_ns=0):
        """Arms the trigger ("io:complete lat_us>1000"): after the match, keep recording
        after_events events or after_ns nanoseconds, then freeze the rings."""
        self._control.arm(expression, after_events, after_ns)

    def disarm(self):
        self._control.disarm()

    def resume(self):
        """Unfreezes rings a trigger froze (the trigger stays armed)."""
        self._control.resume()

    def trigger(self):
        """The trigger's state ("none", "armed", "fired", "frozen") and what matched."""
        return self._control.trigger()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _code_dtype(categories):
    """The codes' dtype pandas gives that many categories."""
    for dtype in (np.int8, np.int16, np.int32):
        if categories < np.iinfo(dtype).max:
            return dtype
    return np.int64


def _merged_column(parts, rows, dtypes):
    """One column of a frame of several events: parts [(rows' positions, values)]."""
    import pandas as pd

    complete = sum(len(o) for o, _ in parts) == rows
    if all(isinstance(a, Categorical) for _, a in parts):
        # One categories array when the tables share it (a field name's strings), else their
        # union; -1 (NaN) where an event lacks the field.
        categories = parts[0][1].categories
        remaps = None
        if any(a.categories is not categories for _, a in parts):
            union = {}
            remaps = [np.array([union.setdefault(v, len(union)) for v in a.categories.tolist()],
                               dtype=np.int64) for _, a in parts]
            categories = np.empty(len(union), dtype=object)
            categories[:] = list(union)
        codes = np.full(rows, -1, dtype=_code_dtype(len(categories)))
        for n, (order, values) in enumerate(parts):
            codes[order] = values.codes if remaps is None else remaps[n][values.codes]
        return Categorical(codes, categories).to_pandas(dtypes)
    parts = [(o, a.decode() if isinstance(a, Categorical) else a) for o, a in parts]
    kinds = {a.dtype.kind for _, a in parts}
    dtypes_ = {a.dtype for _, a in parts}
    # One dtype, or integers of several widths that one integer dtype holds.
    one_dtype = len(dtypes_) == 1 or (kinds <= set("iu") and
                                      np.result_type(*dtypes_).kind in "iu")
    if complete and one_dtype:
        out = np.empty(rows, dtype=np.result_type(*dtypes_))
    elif one_dtype and kinds <= set("iu"):
        # Where a value is absent, a mask rather than NaN: a float64 cannot hold every
        # 64-bit integer.
        values_out = np.zeros(rows, dtype=np.result_type(*dtypes_))
        absent = np.ones(rows, dtype=bool)
        for order, values in parts:
            values_out[order] = values
            absent[order] = False
        return pd.arrays.IntegerArray(values_out, absent)
    elif kinds <= set("iu"):  # int64 with uint64: no integer dtype holds both
        out = np.full(rows, None, dtype=object)
        parts = [(order, values.astype(object)) for order, values in parts]
    elif kinds <= set("iuf"):
        out = np.full(rows, np.nan)
    else:
        out = np.full(rows, None, dtype=object)
    for order, values in parts:
        out[order] = values
    return out


def _structured(columns):
    """A structured array of the columns (a copy); a Categorical's field holds its codes, its
    dtype's metadata["categories"] the categories."""
    names = list(columns)
    arrays = [columns[n] for n in names]
    fields = [(n, np.dtype(a.codes.dtype, metadata={"categories": a.categories})
               if isinstance(a, Categorical) else a.dtype) for n, a in zip(names, arrays)]
    out = np.empty(len(arrays[0]), dtype=fields)
    for n, a in zip(names, arrays):
        out[n] = a.codes if isinstance(a, Categorical) else a
    return out


def open(source):
    """Opens a trace: a trace file path, a pid (int or str), "name:NAME" or a segment path."""
    return Trace(source)


def control(source):
    """Attaches to a live process (pid, "name:NAME" or segment path) to control it."""
    return Control(source)
