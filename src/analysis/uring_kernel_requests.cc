// io_uring requests from the kernel's io_uring events (see uring_kernel_requests.hpp).
#include "analysis/uring_kernel_requests.hpp"

#include <linux/io_uring.h>

#include <cctype>
#include <cstring>

namespace nanotrace::analysis {
namespace {

int field_index(const EventInfo& e, const char* name) {
  for (size_t i = 0; i < e.fields.size(); ++i) {
    if (e.fields[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// The interposer's names (src/interpose/async_calls.cc: async_op_of), else the kernel's.
std::string op_name(uint64_t opcode, std::string_view op_str) {
  switch (opcode) {
    case IORING_OP_READV:
    case IORING_OP_READ_FIXED:
    case IORING_OP_READ:
      return "uring_read";
    case IORING_OP_WRITEV:
    case IORING_OP_WRITE_FIXED:
    case IORING_OP_WRITE:
      return "uring_write";
    case IORING_OP_FSYNC:
      return "uring_fsync";  // the kernel's event does not say whether datasync
    default:
      break;
  }
  if (op_str.empty()) return "uring_op" + std::to_string(opcode);
  std::string out = "uring_";
  for (char c : op_str) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// A request's key for the matcher: its ring and user_data, 16 bytes.
std::string key_text(const std::pair<uint64_t, uint64_t>& key) {
  std::string text(16, '\0');
  std::memcpy(text.data(), &key.first, 8);
  std::memcpy(text.data() + 8, &key.second, 8);
  return text;
}

// The one rule the matcher pairs by: keys are given to match() directly.
std::vector<ResolvedPair> one_rule() {
  ResolvedPair rule;
  rule.rule.begin = "io_uring:io_uring_submit_req";
  rule.rule.end = "io_uring:io_uring_complete";
  rule.rule.key = "ctx,user_data";
  return {rule};
}

}  // namespace

UringKernelRequests::UringKernelRequests(const Trace& trace) : matcher_(one_rule()) {
  const std::vector<EventInfo>& events = trace.kernel_events();
  kinds_.assign(events.size(), Kind::kNone);
  fields_.assign(events.size(), Fields{});
  bool submit = false, complete = false;
  for (const EventInfo& e : events) {
    if (e.id >= kinds_.size() || e.group != "io_uring") continue;
    Fields& f = fields_[e.id];
    f.ctx = field_index(e, "ctx");
    f.user_data = field_index(e, "user_data");
    f.opcode = field_index(e, "opcode");
    f.op_str = field_index(e, "op_str");
    f.fd = field_index(e, "fd");
    f.res = field_index(e, "res");
    Kind k = Kind::kNone;
    if (e.name == "io_uring_submit_req" && f.ctx >= 0 && f.user_data >= 0) {
      k = Kind::kSubmit;
      submit = true;
    } else if (e.name == "io_uring_complete" && f.ctx >= 0 && f.user_data >= 0 && f.res >= 0) {
      k = Kind::kComplete;
      complete = true;
    } else if (e.name == "io_uring_file_get" && f.ctx >= 0 && f.user_data >= 0 && f.fd >= 0) {
      k = Kind::kFileGet;
    } else if (e.name == "io_uring_create" && f.ctx >= 0 && f.fd >= 0) {
      k = Kind::kCreate;
    }
    kinds_[e.id] = k;
  }
  active_ = submit && complete;
  // The threads of the traced processes: the kernel records every process's rings.
  for (size_t i = 0; i < trace.processes().size(); ++i) {
    process_of_tid_[trace.processes()[i].pid] = i;
  }
  for (const ThreadInfo& t : trace.threads()) process_of_tid_[t.tid] = t.process;
}

const UringKernelRequests::Done* UringKernelRequests::add(const Record& r) {
  if (!active_ || r.event->id >= kinds_.size()) return nullptr;
  const Kind kind = kinds_[r.event->id];
  if (kind == Kind::kNone) return nullptr;
  const Fields& f = fields_[r.event->id];
  auto bits = [&](int i) {
    return static_cast<uint32_t>(i) < r.field_count ? r.values[i].bits : 0;
  };
  const uint64_t ctx = bits(f.ctx);
  switch (kind) {
    case Kind::kCreate: {
      auto p = process_of_tid_.find(r.task);
      if (p != process_of_tid_.end()) {
        ring_fd_[ctx] = {p->second, static_cast<int64_t>(static_cast<int32_t>(bits(f.fd)))};
      }
      return nullptr;
    }
    case Kind::kSubmit: {
      auto p = process_of_tid_.find(r.task);
      if (p == process_of_tid_.end()) return nullptr;  // another process's ring
      const Key key{ctx, bits(f.user_data)};
      std::string_view op_str;
      if (f.op_str >= 0 && static_cast<uint32_t>(f.op_str) < r.field_count) {
        op_str = r.values[f.op_str].text;
      }
      open_[key] = Open{p->second, -1, op_name(bits(f.opcode), op_str)};
      const std::string text = key_text(key);
      matcher_.match(0, true, text, r.time_ns, r.thread);
      return nullptr;
    }
    case Kind::kFileGet: {
      auto it = open_.find(Key{ctx, bits(f.user_data)});
      if (it != open_.end() && it->second.fd < 0) {
        it->second.fd = static_cast<int32_t>(bits(f.fd));
      }
      return nullptr;
    }
    case Kind::kComplete: {
      const Key key{ctx, bits(f.user_data)};
      auto it = open_.find(key);
      if (it == open_.end()) return nullptr;  // not a traced process's, or before capture
      const std::string text = key_text(key);
      const IntervalMatch& m = matcher_.match(0, false, text, r.time_ns, r.thread);
      if (m.kind != IntervalMatch::Kind::kEnd) return nullptr;
      done_.process = it->second.process;
      done_.ctx = ctx;
      done_.fd = it->second.fd;
      done_.op = std::move(it->second.op);
      done_.begin_ns = m.interval.begin_ns;
      done_.end_ns = m.interval.end_ns;
      done_.res = static_cast<int32_t>(bits(f.res));
      open_.erase(it);
      return &done_;
    }
    case Kind::kNone:
      break;
  }
  return nullptr;
}

bool UringKernelRequests::followed_by_interposer(uint64_t process, uint64_t ctx) const {
  auto ring = ring_fd_.find(ctx);
  if (ring != ring_fd_.end()) {
    return interposer_rings_.count({ring->second.first, ring->second.second}) != 0;
  }
  auto any = interposer_rings_.lower_bound({process, INT64_MIN});
  return any != interposer_rings_.end() && any->first == process;
}

}  // namespace nanotrace::analysis
