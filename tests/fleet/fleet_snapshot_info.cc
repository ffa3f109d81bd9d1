// Prints what a fleet test checks in snapshot files, one JSON line per file: its process,
// the CLOCK_REALTIME span of its records, its trigger facts, its NODE chunk (the node's name,
// clock pairs, clock sync and trigger origin), and every test:io record with lat_us >= 10000
// (the slow ones).
#include <cstdio>
#include <nanotrace/reader.hpp>
#include <nlohmann/json.hpp>

int main(int argc, char** argv) {
  using nlohmann::json;
  int status = 0;
  for (int i = 1; i < argc; ++i) {
    auto trace = nanotrace::Trace::open(argv[i]);
    if (!trace.ok()) {
      std::fprintf(stderr, "%s: %s\n", argv[i], trace.status().message().c_str());
      status = 1;
      continue;
    }
    nanotrace::Trace& t = **trace;
    const nanotrace::TriggerInfo& trig = t.process().trigger;
    json out = {
        {"file", argv[i]},
        {"pid", t.process().pid},
        {"name", t.process().user_name},
        {"trigger_state", nanotrace::trigger_state_name(trig.state)},
        {"trigger_event", trig.event},
        {"trigger_tid", trig.tid},
        {"trigger_seq", trig.seq},
        {"trigger_realtime_ns", trig.ticks ? t.ticks_to_realtime_ns(trig.ticks) : 0},
        {"frozen_realtime_ns", trig.frozen_ticks ? t.ticks_to_realtime_ns(trig.frozen_ticks) : 0}};
    json nodes = json::array();
    for (const nanotrace::NodeInfo& n : t.nodes()) {
      nodes.push_back({{"hostname", n.hostname},
                       {"clock_pairs", n.clock_pairs.size()},
                       {"sync_source", n.sync_source},
                       {"synchronised", n.synchronised},
                       {"sync_bound_ns", n.sync_bound_ns == nanotrace::kUnknownErrorBound
                                             ? json(nullptr)
                                             : json(n.sync_bound_ns)},
                       {"has_origin", n.has_origin},
                       {"origin_pid", n.origin_pid},
                       {"origin_tid", n.origin_tid},
                       {"origin_seq", n.origin_seq},
                       {"origin_event", n.origin_event}});
    }
    out["nodes"] = nodes;
    uint64_t first = 0, last = 0, records = 0;
    json slow = json::array();
    auto source = t.read_all();
    nanotrace::Record r;
    while (source->next(&r)) {
      uint64_t rt = t.ticks_to_realtime_ns(r.ticks);
      if (records++ == 0) first = rt;
      last = rt;
      if (r.event->full_name() == "test:io" && r.field_count == 2 && r.values[1].bits >= 10000) {
        slow.push_back({{"tid", source->threads()[r.thread].info.tid},
                        {"seq", r.seq},
                        {"realtime_ns", rt},
                        {"lat_us", r.values[1].bits}});
      }
    }
    out["records"] = records;
    out["first_realtime_ns"] = first;
    out["last_realtime_ns"] = last;
    out["slow"] = slow;
    std::printf("%s\n", out.dump().c_str());
  }
  return status;
}
