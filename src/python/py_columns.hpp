// Trace.events() of the Python module: a trace's records as numpy columns.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "nanotrace/columns.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::python {

// Reads the records of `events` ("group:event" or "group"; empty: all) into
// ({table name: {column: ndarray}}, {table name: ndarray of each row's position in the merged
// stream} (with row_order; else empty)). Columns: time_ns, pid, tid, seq, event, then one per
// field; pid (one process) and event are read-only columns of one repeated value.
pybind11::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order);

// A field's column as an ndarray, as in read_tables (its scalars are moved into the array).
pybind11::array column_array(FieldColumn& column, size_t rows);
// values[index[i]] for each row, as an object array.
pybind11::array repeated_objects(const std::vector<pybind11::object>& values,
                                 const ColumnArray<uint8_t>& index);

}  // namespace nanotrace::python
