// summarize_io: pairs the interposer's records (see nanotrace/io_summary.hpp and
// src/interpose/io_events.hpp for their shapes), and the kernel's io_uring requests of rings
// the interposer did not follow, and aggregates them per file and operation.
#include "nanotrace/io_summary.hpp"

#include <algorithm>
#include <map>
#include <string_view>
#include <unordered_map>

#include "analysis/uring_kernel_requests.hpp"

namespace nanotrace {
namespace {

enum class SummaryKind : uint8_t {
  kOther,
  kBegin,
  kEnd,
  kPath,
  kSqe,
  kCqe,
  kIocb,
  kAioEvent,
  kRingTotals
};

// Where an interposer event keeps the fields the summary reads (-1: absent).
struct Shape {
  SummaryKind kind = SummaryKind::kOther;
  bool transfers = false;  // its result counts bytes (read, write, copy groups)
  int call = -1, op = -1, fd = -1, result = -1, newfd = -1;
  int ring = -1, user_data = -1, res = -1, ctx = -1, obj = -1, bytes = -1, submitted = -1;
  int path[4] = {-1, -1, -1, -1};
};

int field(const EventInfo& e, std::string_view name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Shape shape_of(const EventInfo& e) {
  Shape s;
  if (e.group.rfind("io_", 0) != 0) return s;
  s.call = field(e, "call");
  s.op = field(e, "op");
  s.fd = field(e, "fd");
  s.result = field(e, "result");
  s.transfers = e.group == "io_read" || e.group == "io_write" || e.group == "io_copy";
  if (e.group == "io_open" && e.name == "path") {
    s.kind = SummaryKind::kPath;
    const char* names[4] = {"path", "path2", "path3", "path4"};
    for (int i = 0; i < 4; ++i) s.path[i] = field(e, names[i]);
  } else if (e.group == "io_uring" && e.name == "sqe") {
    s.kind = SummaryKind::kSqe;
  } else if (e.group == "io_uring" && e.name == "cqe") {
    s.kind = SummaryKind::kCqe;
  } else if (e.group == "io_uring" && e.name == "ring_totals") {
    s.kind = SummaryKind::kRingTotals;
  } else if (e.group == "io_aio" && e.name == "iocb") {
    s.kind = SummaryKind::kIocb;
  } else if (e.group == "io_aio" && e.name == "event") {
    s.kind = SummaryKind::kAioEvent;
  } else if (s.call >= 0 && s.op >= 0 && ends_with(e.name, "begin")) {
    s.kind = SummaryKind::kBegin;
  } else if (s.call >= 0 && s.op >= 0 && ends_with(e.name, "end")) {
    s.kind = SummaryKind::kEnd;
  }
  if (s.result < 0 && s.kind == SummaryKind::kEnd) s.result = s.fd;  // open_end: the new fd
  s.newfd = e.group == "io_open" && e.name == "dup_end" ? s.result : -1;
  s.ring = field(e, "ring");
  s.user_data = field(e, "user_data");
  s.res = field(e, "res");
  s.ctx = field(e, "ctx");
  s.obj = field(e, "obj");
  s.bytes = field(e, "bytes");
  s.submitted = field(e, "submitted");
  return s;
}

struct Open {
  uint64_t begin_ns;
  uint32_t row;    // kByResult: an open, whose file is known at its end
  std::string op;  // for kByResult
};
constexpr uint32_t kByResult = ~uint32_t{0};

struct Stats {
  IoSummaryRow row;
  std::vector<uint64_t> latencies;
};

uint64_t percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size()) + 0.999999);
  if (rank == 0) rank = 1;
  if (rank > sorted.size()) rank = sorted.size();
  return sorted[rank - 1];
}

// The integer in field i of r (0 if the event has no such field: i < 0).
int64_t value_of(const Record& r, int i) { return i >= 0 ? r.values[i].as_int() : 0; }

// The summary as it is built: records in, pairs closed into rows of (file, operation).
class IoSummarizer {
 public:
  // shapes: by event id (shape_of).
  IoSummarizer(Trace& trace, std::vector<Shape> shapes)
      : trace_(trace), shapes_(std::move(shapes)), threads_(trace.threads()), kernel_(trace) {}

  // The trace has the kernel's io_uring events: read them too (read_all_with_kernel).
  bool reads_kernel() const { return kernel_.active(); }
  // Takes one record, in time order.
  void add(const Record& r);
  // The summary, once source has been read to the end.
  IoSummary finish(const RecordSource& source);

 private:
  // Calls (a begin and its end, by process image and call number).
  void begin_call(const Record& r, const Shape& sh, uint64_t process);
  void end_call(const Record& r, const Shape& sh, uint64_t process);
  // What an end record changes in which descriptor names which file (close, dup).
  void follow_descriptors(const Record& r, const Shape& sh, uint64_t process, int64_t result);
  // io_uring SQEs and libaio iocbs, and their completions (by process, ring, request id).
  void submit_request(const Record& r, const Shape& sh, uint64_t process);
  void complete_request(const Record& r, const Shape& sh, uint64_t process);
  // The kernel's io_uring requests, kept until it is known which rings the interposer followed.
  void add_kernel_record(const Record& r);
  void close_kernel_requests();
  // Requests the rings' totals count beyond those seen one by one.
  uint64_t unseen_uring_requests() const;
  // The row of (file, op, from_kernel), added if new.
  uint32_t row(const std::string& file, const std::string& op, bool from_kernel = false);
  // What descriptor fd of a process image names.
  std::string file_of(uint64_t process, int64_t fd) const;
  // Counts one finished call or request in row r.
  void close_interval(uint32_t r, uint64_t begin_ns, uint64_t end_ns, int64_t result,
                      bool transfers);

  Trace& trace_;
  const std::vector<Shape> shapes_;
  const std::vector<ThreadInfo> threads_;
  std::vector<Stats> stats_;
  std::map<std::tuple<std::string, std::string, bool>, uint32_t> row_of_;
  // Per process image: what each descriptor names.
  std::map<std::pair<uint64_t, int64_t>, std::string> paths_;
  std::unordered_map<uint64_t, Open> calls_;                           // (process << 48) ^ call
  std::map<std::tuple<uint64_t, uint64_t, uint64_t>, Open> requests_;  // (process, ring, id)
  // Requests of rings entered without the C library, from the kernel's io_uring events; kept
  // until the end, when it is known which rings the interposer followed itself.
  analysis::UringKernelRequests kernel_;
  struct KernelDone {
    uint32_t row;
    uint64_t process, ctx, begin_ns, end_ns;
    int64_t res;
  };
  std::vector<KernelDone> kernel_done_;
  // Requests each ring submitted (io_uring:ring_totals) beyond those seen one by one.
  std::map<std::pair<uint64_t, int64_t>, uint64_t> sqes_seen_, ring_submitted_;
};

uint32_t IoSummarizer::row(const std::string& file, const std::string& op, bool from_kernel) {
  auto [it, added] = row_of_.emplace(std::make_tuple(file, op, from_kernel), 0);
  if (added) {
    it->second = static_cast<uint32_t>(stats_.size());
    stats_.emplace_back();
    stats_.back().row.file = file;
    stats_.back().row.op = op;
    stats_.back().row.from_kernel = from_kernel;
  }
  return it->second;
}

std::string IoSummarizer::file_of(uint64_t process, int64_t fd) const {
  if (fd <= -2) return "registered file " + std::to_string(-2 - fd);
  auto it = paths_.find({process, fd});
  return it != paths_.end() ? it->second : "fd " + std::to_string(fd);
}

void IoSummarizer::close_interval(uint32_t r, uint64_t begin_ns, uint64_t end_ns, int64_t result,
                                  bool transfers) {
  Stats& s = stats_[r];
  ++s.row.calls;
  if (result < 0) {
    ++s.row.errors;
  } else if (transfers) {
    s.row.bytes += static_cast<uint64_t>(result);
  }
  uint64_t ns = end_ns > begin_ns ? end_ns - begin_ns : 0;
  s.row.total_ns += ns;
  s.latencies.push_back(ns);
}

void IoSummarizer::add(const Record& r) {
  if (r.event->is_kernel) {
    add_kernel_record(r);
    return;
  }
  const Shape& sh = r.event->id < shapes_.size() ? shapes_[r.event->id] : shapes_[0];
  if (sh.kind == SummaryKind::kOther) return;
  const uint64_t process = r.thread < threads_.size() ? threads_[r.thread].process : 0;
  switch (sh.kind) {
    case SummaryKind::kPath: {
      std::string p;
      for (int i : sh.path) {
        if (i >= 0) p += std::string(r.values[i].text);
      }
      paths_[{process, value_of(r, sh.fd)}] = p;
      break;
    }
    case SummaryKind::kBegin:
      begin_call(r, sh, process);
      break;
    case SummaryKind::kEnd:
      end_call(r, sh, process);
      break;
    case SummaryKind::kSqe:
    case SummaryKind::kIocb:
      submit_request(r, sh, process);
      break;
    case SummaryKind::kCqe:
    case SummaryKind::kAioEvent:
      complete_request(r, sh, process);
      break;
    case SummaryKind::kRingTotals:
      if (sh.submitted >= 0) {
        ring_submitted_[{process, value_of(r, sh.ring)}] +=
            static_cast<uint64_t>(value_of(r, sh.submitted));
      }
      break;
    default:
      break;
  }
}

void IoSummarizer::begin_call(const Record& r, const Shape& sh, uint64_t process) {
  FieldValue op = display_value(r, static_cast<uint32_t>(sh.op));
  uint64_t key = (process << 48) ^ static_cast<uint64_t>(value_of(r, sh.call));
  if (sh.fd >= 0) {
    calls_[key] = Open{r.time_ns, row(file_of(process, value_of(r, sh.fd)), format_value(op)), {}};
  } else {
    calls_[key] = Open{r.time_ns, kByResult, format_value(op)};
  }
}

void IoSummarizer::end_call(const Record& r, const Shape& sh, uint64_t process) {
  uint64_t key = (process << 48) ^ static_cast<uint64_t>(value_of(r, sh.call));
  auto it = calls_.find(key);
  if (it == calls_.end()) return;
  const int64_t result = value_of(r, sh.result);
  if (it->second.row == kByResult) {
    it->second.row = row(result >= 0 ? file_of(process, result) : "(failed)", it->second.op);
  }
  close_interval(it->second.row, it->second.begin_ns, r.time_ns, result, sh.transfers);
  calls_.erase(it);
  follow_descriptors(r, sh, process, result);
}

void IoSummarizer::follow_descriptors(const Record& r, const Shape& sh, uint64_t process,
                                      int64_t result) {
  if (r.event->group == "io_open" && r.event->name == "close_end" && result == 0) {
    paths_.erase({process, value_of(r, sh.fd)});
  } else if (sh.newfd >= 0 && result >= 0) {
    auto from = paths_.find({process, value_of(r, sh.fd)});
    if (from != paths_.end()) {
      paths_[{process, result}] = from->second;
    } else {
      paths_.erase({process, result});
    }
  }
}

void IoSummarizer::submit_request(const Record& r, const Shape& sh, uint64_t process) {
  const bool uring = sh.kind == SummaryKind::kSqe;
  FieldValue op = display_value(r, static_cast<uint32_t>(sh.op));
  std::string name = std::string(uring ? "uring_" : "aio_") + format_value(op);
  uint64_t ring = static_cast<uint64_t>(value_of(r, uring ? sh.ring : sh.ctx));
  uint64_t id = static_cast<uint64_t>(value_of(r, uring ? sh.user_data : sh.obj));
  requests_[{process, ring, id}] =
      Open{r.time_ns, row(file_of(process, value_of(r, sh.fd)), name), {}};
  if (uring) {
    kernel_.note_interposer_ring(process, value_of(r, sh.ring));
    ++sqes_seen_[{process, value_of(r, sh.ring)}];
  }
}

void IoSummarizer::complete_request(const Record& r, const Shape& sh, uint64_t process) {
  const bool uring = sh.kind == SummaryKind::kCqe;
  uint64_t ring = static_cast<uint64_t>(value_of(r, uring ? sh.ring : sh.ctx));
  uint64_t id = static_cast<uint64_t>(value_of(r, uring ? sh.user_data : sh.obj));
  auto it = requests_.find({process, ring, id});
  if (it == requests_.end()) return;
  const Stats& s = stats_[it->second.row];
  bool transfers =
      s.row.op.find("read") != std::string::npos || s.row.op.find("write") != std::string::npos;
  close_interval(it->second.row, it->second.begin_ns, r.time_ns, value_of(r, sh.res), transfers);
  requests_.erase(it);
}

void IoSummarizer::add_kernel_record(const Record& r) {
  if (const auto* done = kernel_.add(r)) {
    // No io_uring_file_get: a registered file, or an operation on no file.
    const std::string file =
        done->fd >= 0 ? file_of(done->process, done->fd) : "(registered or no file)";
    kernel_done_.push_back({row(file, done->op, true), done->process, done->ctx, done->begin_ns,
                            done->end_ns, done->res});
  }
}

void IoSummarizer::close_kernel_requests() {
  for (const KernelDone& d : kernel_done_) {
    if (kernel_.followed_by_interposer(d.process, d.ctx)) continue;  // counted from its records
    const std::string& op = stats_[d.row].row.op;
    const bool transfers = op == "uring_read" || op == "uring_write";
    close_interval(d.row, d.begin_ns, d.end_ns, d.res, transfers);
  }
}

uint64_t IoSummarizer::unseen_uring_requests() const {
  uint64_t unseen = 0;
  for (const auto& [ring, submitted] : ring_submitted_) {
    auto seen = sqes_seen_.find(ring);
    const uint64_t n = seen == sqes_seen_.end() ? 0 : seen->second;
    if (submitted > n) unseen += submitted - n;
  }
  return unseen;
}

IoSummary IoSummarizer::finish(const RecordSource& source) {
  IoSummary out;
  out.uring_from_kernel = kernel_.active();
  close_kernel_requests();
  if (!kernel_.active()) out.uring_unseen = unseen_uring_requests();
  out.unmatched = calls_.size() + requests_.size() + kernel_.open_requests();
  const size_t user_threads = threads_.size();
  for (size_t i = 0; i < source.threads().size(); ++i) {
    // After the user-space threads, the CPUs of the kernel capture: ftrace's losses.
    if (i < user_threads) {
      out.lost += source.threads()[i].lost();
    } else {
      out.kernel_lost += source.threads()[i].lost();
    }
  }
  out.lost += lost_outside_threads(trace_);
  for (Stats& s : stats_) {
    if (s.row.calls == 0) continue;
    std::sort(s.latencies.begin(), s.latencies.end());
    s.row.p50_ns = percentile(s.latencies, 50);
    s.row.p99_ns = percentile(s.latencies, 99);
    s.row.p999_ns = percentile(s.latencies, 99.9);
    s.row.max_ns = s.latencies.back();
    out.rows.push_back(std::move(s.row));
  }
  std::sort(out.rows.begin(), out.rows.end(), [](const IoSummaryRow& a, const IoSummaryRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.file < b.file;
  });
  return out;
}

}  // namespace

Result<IoSummary> summarize_io(Trace& trace) {
  std::vector<Shape> shapes(trace.events().size() + 1);
  for (const EventInfo& e : trace.events()) shapes[e.id] = shape_of(e);
  if (std::all_of(shapes.begin(), shapes.end(),
                  [](const Shape& s) { return s.kind == SummaryKind::kOther; })) {
    return Status::NotFound(
        "no I/O records of the interposer in this trace (record with "
        "`nanotrace run -- CMD`)");
  }
  IoSummarizer summary(trace, std::move(shapes));
  auto source = summary.reads_kernel() ? trace.read_all_with_kernel() : trace.read_all();
  Record r;
  while (source->next(&r)) summary.add(r);
  return summary.finish(*source);
}

}  // namespace nanotrace
