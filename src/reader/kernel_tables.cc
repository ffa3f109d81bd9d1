// Parsing stored ftrace formats (ftrace_format.hpp), and turning a raw event's bytes into
// Record fields with every offset bounded by the event's size.
#include "reader/kernel_tables.hpp"

#include <cstring>

namespace nanotrace::reader {
namespace {

abi::FieldType scalar_type(int size, bool is_signed) {
  switch (size) {
    case 1:
      return is_signed ? abi::FieldType::kI8 : abi::FieldType::kU8;
    case 2:
      return is_signed ? abi::FieldType::kI16 : abi::FieldType::kU16;
    case 4:
      return is_signed ? abi::FieldType::kI32 : abi::FieldType::kU32;
    default:
      return is_signed ? abi::FieldType::kI64 : abi::FieldType::kU64;
  }
}

uint64_t read_scalar(const uint8_t* p, int size, bool is_signed) {
  switch (size) {
    case 1: {
      uint8_t v;
      std::memcpy(&v, p, 1);
      return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int8_t>(v))) : v;
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int16_t>(v))) : v;
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, 4);
      return is_signed ? static_cast<uint64_t>(static_cast<int64_t>(static_cast<int32_t>(v))) : v;
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

std::string_view bounded_text(const uint8_t* p, uint32_t n) {
  const void* nul = std::memchr(p, 0, n);
  return {reinterpret_cast<const char*>(p),
          nul ? static_cast<size_t>(static_cast<const uint8_t*>(nul) - p) : n};
}

}  // namespace

KernelTables::~KernelTables() = default;

int KernelTables::index_of(uint32_t node) const {
  for (size_t k = 0; k < nodes_.size(); ++k) {
    if (nodes_[k]->node == node) return static_cast<int>(k);
  }
  return -1;
}

// One node's header_page and formats parsed: the events it can decode, in format order.
Status KernelTables::parse_node(Node* n, std::vector<std::pair<EventInfo, Event>>* parsed) {
  auto commit_size = parse_header_page_commit_size(n->meta.header_page);
  if (!commit_size.ok()) {
    return Status::Corrupt("kernel meta: the stored header_page does not parse");
  }
  if (*commit_size != n->meta.long_size) {
    return Status::Corrupt("kernel meta: header_page commit size differs from the long size");
  }
  for (const file::KernelEventFormat& f : n->meta.events) {
    auto format = parse_ftrace_format(f.format);
    if (!format.ok() || n->by_type.count(format->id)) continue;  // its records count as unknown
    parsed->push_back(event_of(f.system, *format));
    n->by_type[format->id] = static_cast<uint32_t>(parsed->size() - 1);
    if (n->pid_offset < 0) n->pid_offset = common_pid_offset(*format);
  }
  if (parsed->empty()) return Status::Corrupt("kernel meta: no stored event format parses");
  return Status::Ok();
}

// The EventInfo an ftrace format describes, and how to decode its fields.
std::pair<EventInfo, KernelTables::Event> KernelTables::event_of(const std::string& system,
                                                                 const FtraceFormat& format) {
  EventInfo info;
  info.group = system;
  info.name = format.name;
  info.is_kernel = true;
  Event dec;
  for (const FtraceField& field : format.fields) {
    if (dec.fields.size() >= abi::kMaxFields) break;
    Field fd;
    fd.name = field.name;
    fd.offset = field.offset;
    fd.size = field.size;
    fd.is_dynamic = field.is_dynamic;
    fd.is_relative = field.is_relative;
    fd.is_char = field.is_text();
    FieldInfo fi;
    fi.name = fd.name;
    const bool scalar_size = fd.size == 1 || fd.size == 2 || fd.size == 4 || fd.size == 8;
    if (fd.is_char || !scalar_size || field.is_array || field.is_dynamic) {
      fi.type = abi::FieldType::kString;
    } else if (field.is_pointer) {
      fi.type = abi::FieldType::kPointer;
    } else {
      fi.type = scalar_type(static_cast<int>(fd.size), field.is_signed);
    }
    info.format += (info.format.empty() ? "" : " ") + fd.name + "={}";
    info.fields.push_back(std::move(fi));
    dec.fields.push_back(std::move(fd));
  }
  return {std::move(info), std::move(dec)};
}

// Where a format's common_pid is, or -1.
int KernelTables::common_pid_offset(const FtraceFormat& format) {
  for (const FtraceField& f : format.common_fields) {
    if (f.name == "common_pid" && f.size == 4) return static_cast<int>(f.offset);
  }
  return -1;
}

uint32_t KernelTables::entry_for(EventInfo info) {
  for (const EventInfo& e : events_) {
    if (e.group != info.group || e.name != info.name || e.format != info.format ||
        e.fields.size() != info.fields.size()) {
      continue;
    }
    bool same = true;
    for (size_t i = 0; i < e.fields.size() && same; ++i) {
      same = e.fields[i].name == info.fields[i].name && e.fields[i].type == info.fields[i].type;
    }
    if (same) return e.id;
  }
  info.id = static_cast<uint16_t>(events_.size());
  events_.push_back(std::move(info));
  return events_.back().id;
}

Result<std::shared_ptr<KernelTables>> KernelTables::build(std::vector<NodeMeta> nodes,
                                                          std::string* left_out) {
  std::shared_ptr<KernelTables> t(new KernelTables());
  for (NodeMeta& m : nodes) {
    auto n = std::make_unique<Node>();
    n->node = m.node;
    n->meta = std::move(m.meta);
    std::vector<std::pair<EventInfo, Event>> parsed;
    Status s = parse_node(n.get(), &parsed);
    // Event ids are 16 bits: a node that would pass them is left out.
    if (s.ok() && t->events_.size() + parsed.size() > 0xffff) {
      s = Status::Corrupt("kernel meta: more kernel event formats than ids");
    }
    if (!s.ok()) {
      *left_out += (left_out->empty() ? "" : "; ") + s.message() + ": kernel events ignored" +
                   (m.node == 0 ? "" : " (node " + std::to_string(m.node) + ")");
      continue;
    }
    for (auto& [info, dec] : parsed) {
      dec.entry = t->entry_for(std::move(info));
      n->decoders.push_back(std::move(dec));
    }
    t->nodes_.push_back(std::move(n));
  }
  if (t->nodes_.empty()) return Status::Corrupt("kernel meta: no node's event formats parse");
  return t;
}

bool KernelTables::decode(size_t k, const uint8_t* data, uint32_t size, Record* r,
                          std::array<std::string, abi::kMaxFields>* scratch) const {
  if (size < 8) return false;
  const Node& n = *nodes_[k];
  uint16_t type;
  std::memcpy(&type, data, 2);  // common_type: the first field of every event
  auto it = n.by_type.find(type);
  if (it == n.by_type.end()) return false;
  const Event& dec = n.decoders[it->second];
  const EventInfo& info = events_[dec.entry];
  r->event = &info;
  r->task = 0;
  if (n.pid_offset >= 0 && static_cast<uint32_t>(n.pid_offset) + 4 <= size) {
    int32_t pid;
    std::memcpy(&pid, data + n.pid_offset, 4);
    r->task = pid > 0 ? static_cast<uint32_t>(pid) : 0;
  }
  r->field_count = static_cast<uint32_t>(dec.fields.size());
  for (uint32_t i = 0; i < r->field_count; ++i) {
    const Field& f = dec.fields[i];
    FieldValue& v = r->values[i];
    v = FieldValue{};
    v.type = info.fields[i].type;
    const uint64_t end = static_cast<uint64_t>(f.offset) + static_cast<uint64_t>(f.size);
    if (end > size) continue;  // shown empty (0 or "")
    const uint8_t* p = data + f.offset;
    uint32_t n = static_cast<uint32_t>(f.size);
    if (f.is_dynamic) {
      if (f.size != 4) continue;
      uint32_t loc;
      std::memcpy(&loc, p, 4);
      uint64_t at = loc & 0xffff;
      n = loc >> 16;
      if (f.is_relative) at += end;
      if (at + n > size) continue;
      p = data + at;
    } else if (v.type != abi::FieldType::kString) {
      v.bits = read_scalar(p, static_cast<int>(f.size),
                           v.type == abi::FieldType::kI8 || v.type == abi::FieldType::kI16 ||
                               v.type == abi::FieldType::kI32 || v.type == abi::FieldType::kI64);
      continue;
    }
    if (f.is_char) {
      v.text = bounded_text(p, n);
      continue;
    }
    std::string& hex = (*scratch)[i];
    hex.clear();
    static const char kDigits[] = "0123456789abcdef";
    for (uint32_t b = 0; b < n && b < 64; ++b) {
      hex.push_back(kDigits[p[b] >> 4]);
      hex.push_back(kDigits[p[b] & 15]);
    }
    if (n > 64) hex += "...";
    v.text = hex;
  }
  return true;
}

}  // namespace nanotrace::reader
