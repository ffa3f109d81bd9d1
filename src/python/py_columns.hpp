// Trace.events() of the Python module: a trace's records as numpy columns.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

#include "nanotrace/columns.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace::python {

// Reads the records of `events` ("group:event" or "group"; empty: all) into a tuple of
//   {table name: {column: column}},
//   {table name: ndarray of each row's position in the merged stream} (with row_order; else
//   empty),
//   {table name: its event's code in the event categories},
//   the event categories (an object ndarray of the events' names).
// Columns: time_ns, pid, tid, seq, then one per field. A column is an ndarray, or for
// strings and enums with value names a (codes, categories) tuple (py_categories.hpp): the
// string columns of one field name share their categories. pid (one process) is a read-only
// column of one repeated value.
pybind11::tuple read_tables(Trace& trace, const std::vector<std::string>& events, bool row_order);

// A field's column of `rows` rows, as in read_tables.
pybind11::object column_object(const FieldColumn& column, size_t rows);

}  // namespace nanotrace::python
