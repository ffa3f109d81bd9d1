// The `nanotrace._nanotrace` extension: Trace (a trace file, or a live or left-behind
// segment, read-only) and Control (a live process's groups and trigger), over the reader,
// the columnar read and the analysis layer. The Python package (nanotrace/__init__.py) builds
// the public API on it: numpy and pandas tables, structured arrays.
//
// Errors come out as nanotrace.Error (a RuntimeError) with the one-line message the CLI prints.
// Long reads release the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "nanotrace/controller.hpp"
#include "nanotrace/reader.hpp"
#include "python/py_analysis.hpp"
#include "python/py_columns.hpp"
#include "python/py_common.hpp"

namespace nanotrace::python {
namespace {

const char* clock_name(abi::ClockKind k) { return k == abi::ClockKind::kTsc ? "tsc" : "monotonic"; }

py::dict trigger_dict(const Trace& trace, const TriggerInfo& t) {
  py::dict d;
  d["state"] = trigger_state_name(t.state);
  d["expression"] = text(t.expression);
  d["after_events"] = t.after_events;
  d["after_ns"] = t.after_ns;
  if (t.state == abi::TriggerState::kFired || t.state == abi::TriggerState::kFrozen) {
    const EventInfo* e = trace.event_by_id(t.event);
    d["event"] = e ? py::object(text(e->full_name())) : py::object(py::none());
    d["time_ns"] = trace.ticks_to_ns(t.ticks);
    d["seq"] = t.seq;
    d["tid"] = t.tid;
  }
  return d;
}

py::dict process_dict(const Trace& trace) {
  const ProcessInfo& p = trace.process();
  py::dict d;
  d["pid"] = p.pid;
  d["path"] = p.path;
  d["alive"] = p.alive;
  d["state"] = process_state_name(p.state);
  d["mode"] = mode_name(p.mode);
  d["clock"] = clock_name(p.clock);
  d["process_name"] = text(p.process_name);
  d["user_name"] = text(p.user_name);
  d["start_realtime_ns"] = p.clock_start.realtime_ns;
  // Where every time_ns counts from: the process's start, or in a trace file with kernel
  // events recorded before it, the first of those.
  d["origin_realtime_ns"] = trace.time_origin().realtime_ns;
  d["ring_size"] = p.ring_size;
  d["block_size"] = p.block_size;
  d["max_threads"] = p.max_threads;
  d["lost_no_slot"] = p.lost_no_slot;
  d["lost_reclaimed"] = p.lost_reclaimed;
  d["crash_signal"] = p.crash_signal;
  d["trigger"] = trigger_dict(trace, p.trigger);
  return d;
}

py::object bound(uint64_t ns) {
  return ns == kUnknownErrorBound ? py::object(py::none()) : py::int_(ns);
}

// The machines of a trace (Trace::nodes(): one in a snapshot or recording, several in a file
// `nanotrace merge` wrote), as `stats --json` lists them.
py::list node_list(const Trace& trace) {
  py::list out;
  for (const NodeInfo& n : trace.nodes()) {
    py::dict d;
    d["index"] = n.index;
    d["hostname"] = text(n.hostname);
    d["machine_id"] = text(n.machine_id);
    d["boot_id"] = text(n.boot_id);
    py::list pids;
    for (uint32_t i = n.first_process; i < n.first_process + n.process_count; ++i) {
      if (i < trace.processes().size()) pids.append(trace.processes()[i].pid);
    }
    d["pids"] = pids;
    d["alignment"] = n.alignment;
    d["error_bound_ns"] = bound(n.error_bound_ns);
    d["sync_source"] = n.sync_source;
    d["sync_bound_ns"] = bound(n.sync_bound_ns);
    if (n.has_origin) {
      py::dict o;
      o["pid"] = n.origin_pid;
      o["tid"] = n.origin_tid;
      o["seq"] = n.origin_seq;
      o["event"] = text(n.origin_event);
      o["time_ns"] = trace.ticks_to_ns(n.origin_ticks);
      d["origin"] = o;
    } else {
      d["origin"] = py::none();
    }
    out.append(d);
  }
  return out;
}

py::list event_list(const Trace& trace) {
  py::list out;
  for (const EventInfo& e : trace.events()) {
    if (e.is_guard) continue;
    py::list fields;
    for (const FieldInfo& f : e.fields) {
      py::dict names;
      for (const ValueName& v : f.value_names) names[py::int_(v.value)] = text(v.name);
      fields.append(py::make_tuple(text(f.name), field_type_name(f.type), names));
    }
    py::dict d;
    d["id"] = e.id;
    d["name"] = text(e.full_name());
    d["group"] = text(e.group);
    d["format"] = text(e.format);
    d["file"] = text(e.file);
    d["line"] = e.line;
    d["fields"] = fields;
    out.append(d);
  }
  return out;
}

py::list thread_list(const Trace& trace) {
  py::list out;
  for (const ThreadInfo& t : trace.threads()) {
    py::dict d;
    d["tid"] = t.tid;
    d["name"] = text(t.name);
    d["slot"] = t.slot;
    d["generation"] = t.generation;
    d["state"] = t.state == abi::SlotState::kExited ? "exited" : "active";
    d["written"] = t.written;
    d["dropped"] = t.dropped;
    out.append(d);
  }
  return out;
}

py::dict group_dict(const std::vector<GroupInfo>& groups) {
  py::dict d;
  for (const GroupInfo& g : groups) d[text(g.name)] = g.enabled;
  return d;
}

std::unique_ptr<Trace> open_trace(const std::string& source) {
  Result<std::unique_ptr<Trace>> r = [&] {
    py::gil_scoped_release unlocked;
    return Trace::open(source);
  }();
  return take(std::move(r));
}

std::unique_ptr<Controller> attach(const std::string& source) {
  return take(Controller::attach(source));
}

}  // namespace

PYBIND11_MODULE(_nanotrace, m) {
  m.doc() = "nanotrace's reader, columnar read, analysis and control (see the nanotrace package)";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);

  py::class_<Trace>(m, "Trace")
      .def_property_readonly("is_file", &Trace::is_file)
      .def_property_readonly("warning", [](const Trace& t) { return text(t.warning()); })
      .def_property_readonly("process", &process_dict)
      .def_property_readonly("nodes", &node_list)
      .def("event_list", &event_list)
      .def("thread_list", &thread_list)
      .def("groups", [](const Trace& t) { return group_dict(t.groups()); })
      .def("refresh", [](Trace& t) { check(t.refresh()); })
      .def("read_tables", &read_tables, py::arg("events"), py::arg("row_order") = false)
      .def("stats", &trace_stats)
      .def("latency", &trace_latency, py::arg("begin"), py::arg("end"), py::arg("key"),
           py::arg("by") = "", py::arg("top") = 0)
      .def("pairs", &trace_pairs, py::arg("begin"), py::arg("end"), py::arg("key"),
           py::arg("by") = "");
  m.def("open_trace", &open_trace, py::arg("source"));
  m.def("diff_json", &runs_diff_json, py::arg("a"), py::arg("b"), py::arg("pairs"),
        py::arg("alpha"), py::arg("min_change"), py::arg("resamples"), py::arg("seed"));

  py::class_<Controller>(m, "Control")
      .def_property_readonly("process", [](Controller& c) { return process_dict(c.trace()); })
      .def("groups", [](const Controller& c) { return group_dict(c.groups()); })
      .def("set_group_enabled", [](Controller& c, const std::string& group,
                                   bool enabled) { check(c.set_group_enabled(group, enabled)); })
      .def(
          "arm",
          [](Controller& c, const std::string& expression, uint64_t after_events,
             uint64_t after_ns) {
            Status s;
            {
              py::gil_scoped_release unlocked;
              s = c.arm(expression, {after_events, after_ns});
            }
            check(s);
          },
          py::arg("expression"), py::arg("after_events") = 0, py::arg("after_ns") = 0)
      .def("disarm",
           [](Controller& c) {
             Status s;
             {
               py::gil_scoped_release unlocked;
               s = c.disarm();
             }
             check(s);
           })
      .def("resume",
           [](Controller& c) {
             Status s;
             {
               py::gil_scoped_release unlocked;
               s = c.resume();
             }
             check(s);
           })
      .def("trigger", [](Controller& c) {
        TriggerInfo t = take(c.trigger());
        return trigger_dict(c.trace(), t);
      });
  m.def("attach", &attach, py::arg("source"));
}

}  // namespace nanotrace::python
