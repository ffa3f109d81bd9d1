// Trace.events() of the Python module: a trace's records as numpy columns.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::python {

// Reads the records of `events` ("group:event" or "group"; empty: all) into
// ({table name: {column: ndarray}}, {table name: ndarray of each row's position in the merged
// stream} (with row_order; else empty)). Columns: time_ns, pid, tid, seq, event, then one per
// field; pid (one process) and event are read-only columns of one repeated value.
pybind11::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order);

}  // namespace nanotrace::python
