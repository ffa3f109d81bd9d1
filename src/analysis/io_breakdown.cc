// analyze_breakdown: one pass over the trace merged with its kernel events (time order),
// following each I/O through the stages by the keys each event carries (node = io_uring
// user_data, sector, device and sector of the block request).
#include <algorithm>
#include <map>
#include <numeric>
#include <unordered_map>

#include "nanotrace/breakdown.hpp"

namespace nanotrace {
namespace {

constexpr int kStages = 6;
const char* const kStageNames[kStages - 1] = {
    "user submit -> io_uring submit", "io_uring submit -> block issue",
    "block issue -> block complete", "block complete -> io_uring complete",
    "io_uring complete -> user complete"};

struct Io {
  uint64_t ticks[kStages] = {};  // 0: not seen
  uint64_t ns[kStages] = {};
  uint64_t sector = 0;
};

// Field index by name in an event, -1 if absent.
int field_index(const EventInfo& e, const char* name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

uint64_t field(const Record& r, int i) {
  return i >= 0 && static_cast<uint32_t>(i) < r.field_count ? r.values[i].bits : 0;
}

enum class Kind { kNone, kUserSubmit, kUserComplete, kUringSubmit, kUringComplete, kIssue, kDone };

struct Binding {
  Kind kind = Kind::kNone;
  int a = -1, b = -1, c = -1;  // field indices: node/user_data, offset/dev, sector, nr_sector
  int d = -1;
};

BreakdownStage summarize(std::string name, std::vector<uint64_t> v) {
  BreakdownStage s;
  s.name = std::move(name);
  s.count = v.size();
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()) + 0.999999);
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
  };
  s.p50_ns = at(0.50);
  s.p90_ns = at(0.90);
  s.p99_ns = at(0.99);
  s.max_ns = v.back();
  s.mean_ns =
      static_cast<double>(std::accumulate(v.begin(), v.end(), 0.0)) / static_cast<double>(v.size());
  return s;
}

}  // namespace

Result<IoBreakdown> analyze_breakdown(Trace& trace) { return analyze_breakdown(trace, nullptr); }

Result<IoBreakdown> analyze_breakdown(Trace& trace, std::vector<std::vector<uint64_t>>* latencies) {
  if (trace.kernel_events().empty()) {
    return Status::NotFound("no kernel events in this trace (record with --kernel io_uring,block)");
  }
  std::vector<Binding> user(trace.events().size() + 1), kern(trace.kernel_events().size());
  bool has_user = false;
  for (const EventInfo& e : trace.events()) {
    if (e.group != "iograph" || e.id >= user.size()) continue;
    if (e.name == "node_submit" && field_index(e, "offset") >= 0) {
      user[e.id] = {Kind::kUserSubmit, field_index(e, "node"), field_index(e, "offset")};
      has_user = true;
    } else if (e.name == "node_complete") {
      user[e.id] = {Kind::kUserComplete, field_index(e, "node")};
    }
  }
  if (!has_user) {
    return Status::NotFound("no iograph:node_submit events with an offset field in this trace");
  }
  for (const EventInfo& e : trace.kernel_events()) {
    const std::string n = e.full_name();
    if (n == "io_uring:io_uring_submit_req" || n == "io_uring:io_uring_submit_sqe") {
      kern[e.id] = {Kind::kUringSubmit, field_index(e, "user_data")};
    } else if (n == "io_uring:io_uring_complete") {
      kern[e.id] = {Kind::kUringComplete, field_index(e, "user_data")};
    } else if (n == "block:block_rq_issue") {
      kern[e.id] = {Kind::kIssue, field_index(e, "dev"), field_index(e, "sector"),
                    field_index(e, "nr_sector")};
    } else if (n == "block:block_rq_complete") {
      kern[e.id] = {Kind::kDone, field_index(e, "dev"), field_index(e, "sector")};
    }
  }
  const uint64_t start = trace.kernel_start_ticks();
  std::vector<Io> ios;
  std::unordered_map<uint64_t, size_t> by_node;    // open I/Os by node (= user_data)
  std::multimap<uint64_t, size_t> awaiting_block;  // by start sector, after io_uring submit
  std::map<std::pair<uint64_t, uint64_t>, std::vector<size_t>> in_block;  // (dev, sector)
  std::vector<size_t> finished;
  auto stamp = [&](size_t i, int stage, const Record& r) {
    if (ios[i].ticks[stage] == 0) {
      ios[i].ticks[stage] = r.ticks;
      ios[i].ns[stage] = r.time_ns;
    }
  };
  auto records = trace.read_all_with_kernel();
  Record r;
  while (records->next(&r)) {
    const Binding& b = r.event->is_kernel ? kern[r.event->id] : user[r.event->id];
    switch (b.kind) {
      case Kind::kNone:
        break;
      case Kind::kUserSubmit: {
        if (r.ticks < start) break;  // before kernel capture: nothing to join
        ios.push_back({});
        stamp(ios.size() - 1, 0, r);
        ios.back().sector = field(r, b.b) / 512;
        by_node[field(r, b.a)] = ios.size() - 1;
        break;
      }
      case Kind::kUringSubmit: {
        auto it = by_node.find(field(r, b.a));
        if (it == by_node.end() || ios[it->second].ticks[1] != 0) break;
        stamp(it->second, 1, r);
        awaiting_block.emplace(ios[it->second].sector, it->second);
        break;
      }
      case Kind::kIssue: {
        const uint64_t dev = field(r, b.a), sector = field(r, b.b);
        const uint64_t end = sector + std::max<uint64_t>(field(r, b.c), 1);
        auto it = awaiting_block.lower_bound(sector);
        while (it != awaiting_block.end() && it->first < end) {
          stamp(it->second, 2, r);
          in_block[{dev, sector}].push_back(it->second);
          it = awaiting_block.erase(it);
        }
        break;
      }
      case Kind::kDone: {
        auto it = in_block.find({field(r, b.a), field(r, b.b)});
        if (it == in_block.end()) break;
        for (size_t i : it->second) stamp(i, 3, r);
        in_block.erase(it);
        break;
      }
      case Kind::kUringComplete: {
        auto it = by_node.find(field(r, b.a));
        if (it != by_node.end()) stamp(it->second, 4, r);
        break;
      }
      case Kind::kUserComplete: {
        auto it = by_node.find(field(r, b.a));
        if (it == by_node.end()) break;
        stamp(it->second, 5, r);
        finished.push_back(it->second);
        by_node.erase(it);
        break;
      }
    }
  }
  IoBreakdown out;
  std::vector<std::vector<uint64_t>> spans(kStages);
  for (size_t i : finished) {
    const Io& io = ios[i];
    ++out.ios;
    if (io.ticks[1] == 0 || io.ticks[4] == 0) ++out.no_uring;
    if (io.ticks[2] == 0 || io.ticks[3] == 0) ++out.no_block;
    if (std::find(std::begin(io.ticks), std::end(io.ticks), 0) != std::end(io.ticks)) continue;
    ++out.joined;
    bool ordered = true;
    for (int s = 1; s < kStages; ++s) ordered = ordered && io.ticks[s - 1] < io.ticks[s];
    if (ordered) ++out.ordered;
    for (int s = 1; s < kStages; ++s) {
      spans[s - 1].push_back(io.ns[s] > io.ns[s - 1] ? io.ns[s] - io.ns[s - 1] : 0);
    }
    spans[kStages - 1].push_back(io.ns[5] > io.ns[0] ? io.ns[5] - io.ns[0] : 0);
  }
  if (latencies != nullptr) *latencies = spans;
  for (int s = 0; s < kStages - 1; ++s) {
    out.stages.push_back(summarize(kStageNames[s], std::move(spans[s])));
  }
  out.stages.push_back(summarize("total (user submit -> user complete)", std::move(spans[5])));
  return out;
}

}  // namespace nanotrace
