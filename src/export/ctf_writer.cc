// CTF 1.8 export: a TSDL metadata file plus one stream file per thread, read by babeltrace2
// and Trace Compass.
//
// Layout choices (see docs/export.md):
// - Every type is byte-aligned (align = 8 bits), as LTTng does on x86, so records are
//   re-encoded by appending bytes with no padding: event header = uint16 id + uint64
//   timestamp (10 bytes), then the fields at their natural width.
// - One clock, "nanotrace", at 1 GHz whose offset is the wall-clock time of the segment's
//   start (clock_start.realtime_ns); a record's timestamp is its time_ns, so babeltrace2 shows
//   the same wall-clock times as nanotrace. Timestamps are clamped to never go back within a
//   stream (a thread migrating between cores may read a slightly earlier TSC).
// - packet.context carries timestamp_begin/end, content_size = packet_size (bits, no
//   padding), packet_seq_num, events_discarded (the running total of the thread's
//   ThreadStats::lost() when the packet is written, so babeltrace2's "discarded events"
//   messages add up to exactly nanotrace's loss count) and the thread id.
// Memory: one packet buffer per thread (packet_bytes each), nothing else per record.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "export/output.hpp"
#include "export/writers.hpp"

namespace nanotrace::exporter {
namespace {

constexpr uint32_t kMagic = 0xC1FC1FC1;
constexpr size_t kPacketHeaderBytes = 4 + 16 + 4 + 8;  // magic, uuid, stream_id, instance
constexpr size_t kPacketContextBytes = 6 * 8 + 4;      // 6 uint64 + tid
constexpr size_t kPacketPrefix = kPacketHeaderBytes + kPacketContextBytes;
constexpr size_t kEventHeaderBytes = 2 + 8;

// How one field is re-encoded: 1, 2, 4, 8 = that many low bytes of FieldValue::bits
// (integers, bools, doubles); kF32 = the double narrowed to float; kStr = NUL-terminated.
enum Code : uint8_t { kF32 = 16, kStr = 17 };

bool is_tsdl_keyword(const std::string& s) {
  static const std::set<std::string> kWords = {
      "align",   "callsite", "const",          "char",   "clock",   "double",   "enum",
      "env",     "event",    "floating_point", "float",  "integer", "int",      "long",
      "short",   "signed",   "stream",         "string", "struct",  "trace",    "typealias",
      "typedef", "unsigned", "variant",        "void",   "_Bool",   "_Complex", "_Imaginary"};
  return kWords.count(s) != 0;
}

// A TSDL identifier for a field name. babeltrace2 strips one leading underscore from CTF 1.8
// field names, so keywords and names starting with '_' get one prepended.
std::string field_identifier(const std::string& name, std::set<std::string>* used) {
  std::string id;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    id += ok ? c : '_';
  }
  if (id.empty() || (id[0] >= '0' && id[0] <= '9')) id = "_" + id;
  if (is_tsdl_keyword(id) || (id[0] == '_' && name[0] == '_')) id = "_" + id;
  std::string unique = id;
  for (int n = 2; used->count(unique); ++n) unique = id + "_" + std::to_string(n);
  used->insert(unique);
  return unique;
}

std::string tsdl_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out + "\"";
}

const char* tsdl_type(abi::FieldType t) {
  using abi::FieldType;
  switch (t) {
    case FieldType::kI8:
      return "int8_t";
    case FieldType::kI16:
      return "int16_t";
    case FieldType::kI32:
      return "int32_t";
    case FieldType::kI64:
      return "int64_t";
    case FieldType::kU8:
    case FieldType::kBool:
      return "uint8_t";
    case FieldType::kU16:
      return "uint16_t";
    case FieldType::kU32:
      return "uint32_t";
    case FieldType::kF32:
      return "float";
    case FieldType::kF64:
      return "double";
    case FieldType::kString:
      return "string";
    case FieldType::kPointer:
      return "xint64_t";
    default:
      return "uint64_t";
  }
}

uint8_t field_code(abi::FieldType t) {
  using abi::FieldType;
  switch (t) {
    case FieldType::kI8:
    case FieldType::kU8:
    case FieldType::kBool:
      return 1;
    case FieldType::kI16:
    case FieldType::kU16:
      return 2;
    case FieldType::kI32:
    case FieldType::kU32:
      return 4;
    case FieldType::kF32:
      return kF32;
    case FieldType::kString:
      return kStr;
    default:
      return 8;
  }
}

struct Stream {
  int fd = -1;
  std::unique_ptr<uint8_t[]> buf;
  size_t len = 0;  // 0: no packet open
  uint64_t begin_ts = 0;
  uint64_t last_ts = 0;
  uint64_t seq_num = 0;
  uint64_t discarded = 0;  // events_discarded written so far
  uint32_t tid = 0;
};

class CtfWriter : public RecordWriter {
 public:
  explicit CtfWriter(const ExportOptions& options) : options_(options) {}
  ~CtfWriter() override {
    for (Stream& s : streams_) {
      if (s.fd >= 0) ::close(s.fd);
    }
  }

  Status begin(const Trace& trace, RecordSource& source) override {
    source_ = &source;
    namespace fs = std::filesystem;
    std::error_code ec;
    dir_ = options_.output;
    if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec)) {
      return Status::IoError("cannot write CTF to " + dir_ + ": it exists and is not a directory");
    }
    fs::create_directories(dir_, ec);
    if (ec) return Status::IoError("cannot create directory " + dir_ + ": " + ec.message());
    for (const auto& entry : fs::directory_iterator(dir_, ec)) {
      std::string name = entry.path().filename().string();
      if (name == "metadata" || name.rfind("stream-", 0) == 0) fs::remove(entry.path(), ec);
    }
    const std::vector<ThreadStats>& threads = source.threads();
    streams_.resize(threads.size());
    for (size_t i = 0; i < threads.size(); ++i) streams_[i].tid = threads[i].info.tid;
    packet_bytes_ = options_.packet_bytes;
    if (packet_bytes_ == 0) {
      uint64_t share = (64u << 20) / std::max<size_t>(1, threads.size());
      packet_bytes_ = static_cast<uint32_t>(std::clamp<uint64_t>(share, 64u << 10, 1u << 20));
    }
    packet_bytes_ = std::max<uint32_t>(packet_bytes_, 4096);
    make_uuid(trace.process());
    // Per event id: the encoding plan and the largest encoded size.
    const std::vector<EventInfo>& events = trace.events();
    plans_.assign(events.size() + 1, {});
    max_size_.assign(events.size() + 1, 0);
    for (const EventInfo& e : events) {
      if (e.is_guard || e.id == 0 || e.id > events.size()) continue;
      size_t size = kEventHeaderBytes;
      for (const FieldInfo& f : e.fields) {
        uint8_t code = field_code(f.type);
        plans_[e.id].push_back(code);
        size += code == kStr ? abi::kMaxStringBytes + 1 : code == kF32 ? 4 : code;
      }
      max_size_[e.id] = size;
    }
    return write_metadata(trace);
  }

  void write(const Record& r) override {
    if (error_ != 0) return;
    Stream& s = streams_[r.thread];
    uint16_t id = r.event->id;
    uint64_t ts = r.time_ns < s.last_ts ? s.last_ts : r.time_ns;
    if (s.len + max_size_[id] > packet_bytes_) flush_packet(r.thread);
    if (s.len == 0) {
      if (!s.buf) {
        s.buf = std::make_unique<uint8_t[]>(packet_bytes_);
        buffer_bytes_ += packet_bytes_;
      }
      s.len = kPacketPrefix;
      s.begin_ts = ts;
    }
    uint8_t* p = s.buf.get() + s.len;
    std::memcpy(p, &id, 2);
    std::memcpy(p + 2, &ts, 8);
    p += kEventHeaderBytes;
    const std::vector<uint8_t>& plan = plans_[id];
    for (uint32_t i = 0; i < r.field_count; ++i) {
      const FieldValue& v = r.values[i];
      switch (plan[i]) {
        case 1:
          *p++ = static_cast<uint8_t>(v.bits);
          break;
        case 2:
          std::memcpy(p, &v.bits, 2);
          p += 2;
          break;
        case 4:
          std::memcpy(p, &v.bits, 4);
          p += 4;
          break;
        case 8:
          std::memcpy(p, &v.bits, 8);
          p += 8;
          break;
        case kF32: {
          auto f = static_cast<float>(v.as_double());
          std::memcpy(p, &f, 4);
          p += 4;
          break;
        }
        default: {
          size_t n = v.text.size();
          const void* nul = std::memchr(v.text.data(), 0, n);
          if (nul) n = static_cast<size_t>(static_cast<const char*>(nul) - v.text.data());
          std::memcpy(p, v.text.data(), n);
          p[n] = 0;
          p += n + 1;
          break;
        }
      }
    }
    s.len = static_cast<size_t>(p - s.buf.get());
    s.last_ts = ts;
  }

  Status finish(RecordSource& source, ExportSummary* summary) override {
    const std::vector<ThreadStats>& threads = source.threads();
    for (uint32_t i = 0; i < streams_.size(); ++i) {
      Stream& s = streams_[i];
      if (s.len > 0) {
        flush_packet(i);
      } else if (threads[i].lost() > s.discarded) {
        // Loss after the last packet, or a thread whose records were all lost: an empty
        // packet carries the final count.
        if (!s.buf) {
          s.buf = std::make_unique<uint8_t[]>(packet_bytes_);
          buffer_bytes_ += packet_bytes_;
        }
        s.len = kPacketPrefix;
        s.begin_ts = s.last_ts;
        flush_packet(i);
      }
    }
    for (Stream& s : streams_) {
      if (s.fd >= 0 && ::close(s.fd) != 0 && error_ == 0) error_ = errno;
      s.fd = -1;
    }
    if (error_ != 0) return Status::FromErrno("cannot write CTF stream in " + dir_, error_);
    uint32_t used = 0;
    for (const Stream& s : streams_) used += s.seq_num > 0;
    summary->threads = used;
    summary->bytes_written = bytes_;
    summary->buffer_bytes = buffer_bytes_;
    return Status::Ok();
  }

 private:
  void make_uuid(const ProcessInfo& p) {
    // Deterministic per segment: exporting the same trace twice gives the same uuid.
    uint64_t a = p.clock_start.realtime_ns ^ (uint64_t{p.pid} << 32);
    uint64_t b = p.clock_start.ticks * 0x9e3779b97f4a7c15ull ^ p.clock_start.monotonic_ns;
    for (uint64_t* x : {&a, &b}) {
      *x ^= *x >> 33;
      *x *= 0xff51afd7ed558ccdull;
      *x ^= *x >> 33;
    }
    std::memcpy(uuid_, &a, 8);
    std::memcpy(uuid_ + 8, &b, 8);
    uuid_[6] = static_cast<uint8_t>((uuid_[6] & 0x0f) | 0x40);
    uuid_[8] = static_cast<uint8_t>((uuid_[8] & 0x3f) | 0x80);
  }

  std::string uuid_text() const {
    std::string s;
    for (int i = 0; i < 16; ++i) {
      if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
      s += fmt::format("{:02x}", uuid_[i]);
    }
    return s;
  }

  Status write_metadata(const Trace& trace) {
    const ProcessInfo& p = trace.process();
    fmt::memory_buffer m;
    auto out = std::back_inserter(m);
    fmt::format_to(out, "/* CTF 1.8 */\n\n");
    for (int bits : {8, 16, 32, 64}) {
      fmt::format_to(out,
                     "typealias integer {{ size = {0}; align = 8; signed = false; }} := "
                     "uint{0}_t;\n"
                     "typealias integer {{ size = {0}; align = 8; signed = true; }} := "
                     "int{0}_t;\n",
                     bits);
    }
    fmt::format_to(out,
                   "typealias integer {{ size = 64; align = 8; signed = false; base = 16; }} := "
                   "xint64_t;\n"
                   "typealias floating_point {{ exp_dig = 8; mant_dig = 24; align = 8; }} := "
                   "float;\n"
                   "typealias floating_point {{ exp_dig = 11; mant_dig = 53; align = 8; }} := "
                   "double;\n\n");
    fmt::format_to(out,
                   "trace {{\n  major = 1;\n  minor = 8;\n  uuid = \"{}\";\n  byte_order = le;\n"
                   "  packet.header := struct {{\n    uint32_t magic;\n    uint8_t uuid[16];\n"
                   "    uint32_t stream_id;\n    uint64_t stream_instance_id;\n  }};\n}};\n\n",
                   uuid_text());
    char host[256] = {};
    if (gethostname(host, sizeof(host) - 1) != 0) host[0] = 0;
    fmt::format_to(out,
                   "env {{\n  tracer_name = \"nanotrace\";\n  tracer_major = 0;\n"
                   "  tracer_minor = 1;\n  hostname = {};\n  procname = {};\n  vpid = {};\n"
                   "  clock_ticks_per_second = {};\n}};\n\n",
                   tsdl_string(host), tsdl_string(p.process_name), p.pid, p.ticks_per_second);
    uint64_t start = p.clock_start.realtime_ns;
    fmt::format_to(out,
                   "clock {{\n  name = nanotrace;\n  uuid = \"{}\";\n"
                   "  description = \"nanotrace time since the segment start, in ns\";\n"
                   "  freq = 1000000000;\n  precision = 1;\n  offset_s = {};\n  offset = {};\n"
                   "  absolute = true;\n}};\n\n",
                   uuid_text(), start / 1000000000, start % 1000000000);
    fmt::format_to(out,
                   "typealias integer {{ size = 64; align = 8; signed = false; "
                   "map = clock.nanotrace.value; }} := uint64_clock_t;\n\n"
                   "stream {{\n  id = 0;\n  packet.context := struct {{\n"
                   "    uint64_clock_t timestamp_begin;\n    uint64_clock_t timestamp_end;\n"
                   "    uint64_t content_size;\n    uint64_t packet_size;\n"
                   "    uint64_t packet_seq_num;\n    uint64_t events_discarded;\n"
                   "    uint32_t tid;\n  }};\n"
                   "  event.header := struct {{\n    uint16_t id;\n"
                   "    uint64_clock_t timestamp;\n  }};\n}};\n");
    for (const EventInfo& e : trace.events()) {
      if (e.is_guard) continue;
      fmt::format_to(out, "\nevent {{\n  name = {};\n  id = {};\n  stream_id = 0;\n",
                     tsdl_string(e.full_name()), e.id);
      std::set<std::string> used;
      fmt::format_to(out, "  fields := struct {{\n");
      for (const FieldInfo& f : e.fields) {
        fmt::format_to(out, "    {} {};\n", tsdl_type(f.type), field_identifier(f.name, &used));
      }
      fmt::format_to(out, "  }};\n}};\n");
    }
    std::string path = dir_ + "/metadata";
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return Status::FromErrno("cannot create " + path, errno);
    int err = write_all(fd, m.data(), m.size());
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) return Status::FromErrno("cannot write " + path, err);
    bytes_ += m.size();
    return Status::Ok();
  }

  void flush_packet(uint32_t index) {
    Stream& s = streams_[index];
    if (s.len == 0 || error_ != 0) {
      s.len = 0;
      return;
    }
    if (s.fd < 0) {
      std::string path = fmt::format("{}/stream-{}-{}", dir_, index, s.tid);
      s.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (s.fd < 0) {
        error_ = errno;
        s.len = 0;
        return;
      }
    }
    uint64_t lost = source_->threads()[index].lost();
    if (lost > 0 && s.seq_num == 0) {
      // babeltrace2 gives no count for a loss reported by a stream's first packet, so an
      // empty packet with events_discarded = 0 goes first.
      uint8_t empty[kPacketPrefix];
      fill_prefix(empty, index, s.begin_ts, s.begin_ts, kPacketPrefix);
      write_packet(s, empty, kPacketPrefix);
    }
    if (lost > s.discarded) s.discarded = lost;
    fill_prefix(s.buf.get(), index, s.begin_ts, s.last_ts, s.len);
    write_packet(s, s.buf.get(), s.len);
    s.len = 0;
  }

  // Writes packet header and context for a packet of len bytes of stream index.
  void fill_prefix(uint8_t* p, uint32_t index, uint64_t begin_ts, uint64_t end_ts, size_t len) {
    const Stream& s = streams_[index];
    uint32_t stream_id = 0;
    uint64_t instance = index;
    uint64_t bits = uint64_t{len} * 8;
    std::memcpy(p, &kMagic, 4);
    std::memcpy(p + 4, uuid_, 16);
    std::memcpy(p + 20, &stream_id, 4);
    std::memcpy(p + 24, &instance, 8);
    uint64_t ctx[6] = {begin_ts, end_ts, bits, bits, s.seq_num, s.discarded};
    std::memcpy(p + kPacketHeaderBytes, ctx, sizeof(ctx));
    std::memcpy(p + kPacketHeaderBytes + sizeof(ctx), &s.tid, 4);
  }

  void write_packet(Stream& s, const uint8_t* p, size_t len) {
    int err = write_all(s.fd, p, len);
    if (err != 0) error_ = err;
    bytes_ += len;
    ++s.seq_num;
  }

  ExportOptions options_;
  RecordSource* source_ = nullptr;
  std::string dir_;
  std::vector<Stream> streams_;
  std::vector<std::vector<uint8_t>> plans_;
  std::vector<size_t> max_size_;
  uint32_t packet_bytes_ = 0;
  uint8_t uuid_[16] = {};
  uint64_t bytes_ = 0;
  uint64_t buffer_bytes_ = 0;
  int error_ = 0;
};

}  // namespace

std::unique_ptr<RecordWriter> make_ctf_writer(const ExportOptions& options) {
  return std::make_unique<CtfWriter>(options);
}

}  // namespace nanotrace::exporter
