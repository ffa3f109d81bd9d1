// Parsing stored ftrace formats with libtraceevent, and turning a raw event's bytes into
// Record fields with every offset bounded by the event's size.
#include "reader/kernel_tables.hpp"

#include <event-parse.h>

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

KernelTables::~KernelTables() {
  if (tep_) tep_free(tep_);
}

Result<std::shared_ptr<KernelTables>> KernelTables::build(file::KernelMeta meta) {
  std::shared_ptr<KernelTables> t(new KernelTables());
  t->meta_ = std::move(meta);
  t->tep_ = tep_alloc();
  if (!t->tep_) return Status::IoError("libtraceevent: out of memory");
  tep_set_file_bigendian(t->tep_, TEP_LITTLE_ENDIAN);
  tep_set_local_bigendian(t->tep_, TEP_LITTLE_ENDIAN);
  tep_set_long_size(t->tep_, static_cast<int>(t->meta_.long_size));
  tep_set_page_size(t->tep_, static_cast<int>(t->meta_.page_size));
  // libtraceevent parses in place: it wants writable, NUL-terminated text.
  std::string header = t->meta_.header_page;
  if (tep_parse_header_page(t->tep_, header.data(), header.size(),
                            static_cast<int>(t->meta_.long_size)) != 0) {
    return Status::Corrupt("kernel meta: the stored header_page does not parse");
  }
  if (tep_get_header_page_size(t->tep_) != static_cast<int>(t->meta_.long_size)) {
    return Status::Corrupt("kernel meta: header_page commit size differs from the long size");
  }
  for (const file::KernelEventFormat& f : t->meta_.events) {
    std::string text = f.format;
    tep_event* e = nullptr;
    if (tep_parse_format(t->tep_, &e, text.data(), text.size(), f.system.c_str()) != 0 || !e ||
        !e->name || e->id < 0 || t->by_type_.count(static_cast<uint32_t>(e->id))) {
      continue;  // left out: its records are counted as unknown
    }
    EventInfo info;
    info.id = static_cast<uint16_t>(t->events_.size());
    info.group = f.system;
    info.name = e->name;
    info.is_kernel = true;
    Event dec;
    for (tep_format_field* field = e->format.fields; field; field = field->next) {
      if (dec.fields.size() >= abi::kMaxFields) break;
      if (!field->name || field->offset < 0 || field->size < 0) continue;
      Field fd;
      fd.name = field->name;
      fd.offset = field->offset;
      fd.size = field->size;
      fd.flags = field->flags;
      fd.is_char =
          field->type && std::strstr(field->type, "char") != nullptr &&
          (field->flags & (TEP_FIELD_IS_ARRAY | TEP_FIELD_IS_DYNAMIC | TEP_FIELD_IS_STRING));
      FieldInfo fi;
      fi.name = fd.name;
      const bool scalar_size = fd.size == 1 || fd.size == 2 || fd.size == 4 || fd.size == 8;
      if (fd.is_char || !scalar_size ||
          (field->flags & (TEP_FIELD_IS_ARRAY | TEP_FIELD_IS_DYNAMIC))) {
        fi.type = abi::FieldType::kString;
      } else if (field->flags & TEP_FIELD_IS_POINTER) {
        fi.type = abi::FieldType::kPointer;
      } else {
        fi.type = scalar_type(fd.size, field->flags & TEP_FIELD_IS_SIGNED);
      }
      info.format += (info.format.empty() ? "" : " ") + fd.name + "={}";
      info.fields.push_back(std::move(fi));
      dec.fields.push_back(std::move(fd));
    }
    if (t->pid_offset_ < 0) {
      tep_format_field* pid = tep_find_common_field(e, "common_pid");
      if (pid && pid->size == 4 && pid->offset >= 0) t->pid_offset_ = pid->offset;
    }
    t->by_type_[static_cast<uint32_t>(e->id)] = static_cast<uint32_t>(t->events_.size());
    t->events_.push_back(std::move(info));
    t->decoders_.push_back(std::move(dec));
  }
  if (t->events_.empty()) return Status::Corrupt("kernel meta: no stored event format parses");
  return t;
}

bool KernelTables::decode(const uint8_t* data, uint32_t size, Record* r,
                          std::array<std::string, abi::kMaxFields>* scratch) const {
  if (size < 8) return false;
  uint16_t type;
  std::memcpy(&type, data, 2);  // common_type: the first field of every event
  auto it = by_type_.find(type);
  if (it == by_type_.end()) return false;
  const EventInfo& info = events_[it->second];
  const Event& dec = decoders_[it->second];
  r->event = &info;
  r->task = 0;
  if (pid_offset_ >= 0 && static_cast<uint32_t>(pid_offset_) + 4 <= size) {
    int32_t pid;
    std::memcpy(&pid, data + pid_offset_, 4);
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
    if (f.flags & TEP_FIELD_IS_DYNAMIC) {
      if (f.size != 4) continue;
      uint32_t loc;
      std::memcpy(&loc, p, 4);
      uint64_t at = loc & 0xffff;
      n = loc >> 16;
      if (f.flags & TEP_FIELD_IS_RELATIVE) at += end;
      if (at + n > size) continue;
      p = data + at;
    } else if (v.type != abi::FieldType::kString) {
      v.bits = read_scalar(p, f.size,
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
