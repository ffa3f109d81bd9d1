// CTF 1.8 export of kernel (ftrace) events: a CTF trace of its own beside the user-space
// ones, laid out like an LTTng kernel trace: one stream per CPU whose packet context carries
// cpu_id, LTTng's event and field names (ctf_kernel_names.cc), the thread an event ran in as
// the `_tid` event context, and ftrace's losses per CPU as the packets' events_discarded. It
// declares the same clock as the user-space traces, so babeltrace2 merges all of them by time.
//
// Unlike the user-space streams (raw records copied as they are), kernel records are decoded
// by the reader and re-encoded: every field byte-aligned at its own size, text as
// NUL-terminated UTF-8. CPUs are exported one after the other through one packet buffer.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <vector>

#include "base/node_identity.hpp"
#include "base/output_file.hpp"
#include "base/utf8.hpp"
#include "export/ctf.hpp"
#include "export/output.hpp"

namespace nanotrace::exporter::ctf {
namespace {

// Packet header (as the user-space streams'), then the context: timestamp_begin,
// timestamp_end, content_size, packet_size, packet_seq_num, events_discarded (u64 each),
// cpu_id (u32). Everything is byte-aligned: events follow at once.
constexpr size_t kPrefixBytes = kPacketHeaderBytes + 6 * 8 + 4;

// A kernel field's TSDL type: text is a NUL-terminated string, scalars as the user streams'.
const char* kernel_type(abi::FieldType t) {
  return t == abi::FieldType::kString ? "string" : tsdl_type(t);
}

// Bytes a scalar field takes in an event (0 for text).
uint32_t scalar_bytes(abi::FieldType t) {
  return t == abi::FieldType::kString ? 0 : declared_bytes(t);
}

// The kernel trace's uuid: the first process's, changed so that it differs from every
// per-process trace's and stays the same when the file is exported again.
void kernel_uuid(const Trace& trace, uint8_t uuid[16]) {
  make_uuid(trace.process(), uuid);
  static const char kSalt[] = "nanotrace-kernel";
  for (int i = 0; i < 16; ++i) uuid[i] = static_cast<uint8_t>(uuid[i] ^ kSalt[i] ^ (i * 0x3b));
  uuid[6] = static_cast<uint8_t>((uuid[6] & 0x0f) | 0x40);
  uuid[8] = static_cast<uint8_t>((uuid[8] & 0x3f) | 0x80);
}

// Writes one CPU's stream: packets of up to packet_bytes (one record larger than that gets
// a packet of its own).
class CpuStreamWriter {
 public:
  CpuStreamWriter(const Trace& trace, const uint8_t uuid[16], const ExportClock& clock,
                  uint64_t packet_bytes)
      : trace_(trace), lead_ns_(clock.lead_ns), packet_bytes_(packet_bytes) {
    std::memcpy(uuid_, uuid, 16);
  }
  ~CpuStreamWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  CpuStreamWriter(const CpuStreamWriter&) = delete;
  CpuStreamWriter& operator=(const CpuStreamWriter&) = delete;

  // Exports the CPU that source reads into dir/stream-cpuN. A CPU without records or
  // losses writes nothing (*wrote false).
  Status export_cpu(const std::string& dir, RecordSource& source, bool* wrote) {
    Record r;
    *wrote = false;
    bool any = source.next(&r);
    const ThreadStats& stats = source.threads().at(0);
    const uint64_t lost = stats.lost();  // ftrace's counters: known before the records
    if (!any && lost == 0) return Status::Ok();
    cpu_ = stats.info.slot;
    Status st = open(dir);
    if (!st.ok()) return st;
    *wrote = true;
    for (; any; any = source.next(&r)) {
      encode(r);
      if (packet_.size() > kPrefixBytes && packet_.size() + record_.size() > packet_bytes_) {
        st = flush(0);
        if (!st.ok()) return st;
      }
      if (packet_.empty()) {
        packet_.resize(kPrefixBytes);
        begin_ns_ = last_ns_;
      }
      packet_.insert(packet_.end(), record_.begin(), record_.end());
      ++records_;
    }
    if (!packet_.empty()) st = flush(0);
    // ftrace counts losses per CPU over the whole capture, not where they happened: they
    // are reported after the CPU's last event, by a last empty packet (babeltrace2 gives no
    // count for a loss reported by a stream's first packet, so it never is).
    if (st.ok() && lost > 0) {
      if (seq_ == 0) st = flush(0);
      if (st.ok()) st = flush(lost);
    }
    lost_ += lost;
    corrupt_blocks_ += source.threads().at(0).corrupt_blocks;
    if (::close(fd_) != 0 && st.ok()) st = Status::FromErrno("cannot write " + path_, errno);
    fd_ = -1;
    return st;
  }

  uint64_t records() const { return records_; }
  uint64_t lost() const { return lost_; }
  uint64_t corrupt_blocks() const { return corrupt_blocks_; }
  uint64_t bytes() const { return bytes_; }
  size_t buffer_bytes() const { return packet_.capacity() + record_.capacity(); }

 private:
  Status open(const std::string& dir) {
    path_ = fmt::format("{}/stream-cpu{}", dir, cpu_);
    auto fd = create_output_file(path_, trace_.source_fd());
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
    seq_ = 0;
    last_ns_ = 0;
    packet_.clear();
    return Status::Ok();
  }

  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    record_.insert(record_.end(), p, p + sizeof(T));
  }

  // record_ := the event: header (id, timestamp), context (_tid), then its fields.
  void encode(const Record& r) {
    record_.clear();
    // On the export's clock (r.time_ns stops at the segment start), never going back within
    // a stream.
    const int64_t ns = signed_ns(trace_, r.ticks);
    const uint64_t early = ns < 0 ? static_cast<uint64_t>(-ns) : 0;
    const uint64_t at =
        ns >= 0 ? static_cast<uint64_t>(ns) + lead_ns_ : (early > lead_ns_ ? 0 : lead_ns_ - early);
    last_ns_ = std::max(last_ns_, at);
    put<uint16_t>(r.event->id);
    put<uint64_t>(last_ns_);
    put<int32_t>(static_cast<int32_t>(r.task));
    const std::vector<FieldInfo>& fields = r.event->fields;
    for (uint32_t i = 0; i < fields.size(); ++i) {
      FieldValue v = i < r.field_count ? r.values[i] : FieldValue{};
      if (fields[i].type == abi::FieldType::kString) {
        // Text as the user-space strings are exported: each ill-formed sequence one U+FFFD.
        // It ends at its first NUL (the reader cuts it there already): a CTF string cannot
        // hold one, and the rest of the event would be read from the wrong place.
        text_.clear();
        utf8::append_valid(text_, v.text);
        text_.erase(std::find(text_.begin(), text_.end(), '\0'), text_.end());
        record_.insert(record_.end(), text_.begin(), text_.end());
        record_.push_back(0);
        continue;
      }
      const uint32_t n = scalar_bytes(fields[i].type);
      const auto* p = reinterpret_cast<const uint8_t*>(&v.bits);  // little-endian
      record_.insert(record_.end(), p, p + n);
    }
  }

  Status flush(uint64_t discarded) {
    if (packet_.empty()) {
      packet_.resize(kPrefixBytes);
      begin_ns_ = last_ns_;
    }
    const uint64_t bits = uint64_t{packet_.size()} * 8;
    uint8_t* p = packet_.data();
    const uint32_t stream_id = 0;
    const uint64_t instance = cpu_;
    std::memcpy(p, &kMagic, 4);
    std::memcpy(p + 4, uuid_, 16);
    std::memcpy(p + 20, &stream_id, 4);
    std::memcpy(p + 24, &instance, 8);
    const uint64_t context[6] = {begin_ns_, last_ns_, bits, bits, seq_, discarded};
    std::memcpy(p + kPacketHeaderBytes, context, sizeof(context));
    std::memcpy(p + kPacketHeaderBytes + sizeof(context), &cpu_, 4);
    int err = write_all(fd_, p, packet_.size());
    if (err != 0) return Status::FromErrno("cannot write " + path_, err);
    bytes_ += packet_.size();
    ++seq_;
    packet_.clear();
    return Status::Ok();
  }

  const Trace& trace_;
  const uint64_t lead_ns_;
  uint8_t uuid_[16];
  uint64_t packet_bytes_;
  std::vector<uint8_t> packet_;  // the open packet, prefix first; empty: none open
  std::vector<uint8_t> record_;  // the record being encoded
  std::string text_;
  uint64_t records_ = 0, lost_ = 0, corrupt_blocks_ = 0, bytes_ = 0;
  // The stream being written.
  int fd_ = -1;
  std::string path_;
  uint32_t cpu_ = 0;
  uint64_t seq_ = 0;
  uint64_t begin_ns_ = 0;
  uint64_t last_ns_ = 0;
};

}  // namespace

std::string kernel_metadata(const Trace& trace, const uint8_t uuid[16], const ExportClock& clock) {
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
                 "typealias floating_point {{ exp_dig = 11; mant_dig = 53; align = 8; }} := "
                 "double;\n\n");
  fmt::format_to(out,
                 "trace {{\n  major = 1;\n  minor = 8;\n  uuid = \"{}\";\n  byte_order = le;\n"
                 "  packet.header := struct {{\n    uint32_t magic;\n    uint8_t uuid[16];\n"
                 "    uint32_t stream_id;\n    uint64_t stream_instance_id;\n  }};\n}};\n\n",
                 uuid_text(uuid));
  // domain "kernel" is what tools look for to treat a CTF trace as a kernel trace; the
  // tracer is named for what wrote it, not LTTng.
  fmt::format_to(out,
                 "env {{\n  domain = \"kernel\";\n  tracer_name = \"nanotrace\";\n"
                 "  tracer_major = 0;\n  tracer_minor = 1;\n  hostname = {};\n",
                 tsdl_string(sys::hostname()));
  // The recording kernel's uname under LTTng's names, so that tools which interpret events
  // by kernel version (and people) know which kernel it was; absent in traces recorded before
  // the uname was stored.
  const Trace::KernelSystem k = trace.kernel_system();
  if (!k.sysname.empty()) fmt::format_to(out, "  sysname = {};\n", tsdl_string(k.sysname));
  if (!k.release.empty()) {
    fmt::format_to(out, "  kernel_release = {};\n", tsdl_string(k.release));
  }
  if (!k.version.empty()) {
    fmt::format_to(out, "  kernel_version = {};\n", tsdl_string(k.version));
  }
  fmt::format_to(out, "}};\n\n");
  fmt::format_to(out, "{}", clock_declaration(trace, clock));
  fmt::format_to(out,
                 "typealias integer {{ size = 64; align = 8; signed = false; "
                 "map = clock.nanotrace.value; }} := uint64_clock_t;\n\n"
                 "stream {{\n  id = 0;\n  packet.context := struct {{\n"
                 "    uint64_clock_t timestamp_begin;\n    uint64_clock_t timestamp_end;\n"
                 "    uint64_t content_size;\n    uint64_t packet_size;\n"
                 "    uint64_t packet_seq_num;\n    uint64_t events_discarded;\n"
                 "    uint32_t cpu_id;\n  }};\n"
                 "  event.header := struct {{\n    uint16_t id;\n    uint64_clock_t timestamp;\n"
                 "  }};\n  event.context := struct {{\n    int32_t _tid;\n  }};\n}};\n");
  std::set<std::string> names;
  for (const EventInfo& e : trace.kernel_events()) {
    // Two systems may name an event alike; CTF names must differ.
    std::string name = kernel_event_name(e);
    std::string unique = name;
    for (int n = 2; names.count(unique); ++n) unique = fmt::format("{}_{}", name, n);
    names.insert(unique);
    fmt::format_to(out, "\nevent {{\n  name = {};\n  id = {};\n  stream_id = 0;\n",
                   tsdl_string(unique), e.id);
    fmt::format_to(out, "  fields := struct {{\n");
    std::set<std::string> used;
    for (const FieldInfo& f : e.fields) {
      fmt::format_to(out, "    {} {};\n", kernel_type(f.type),
                     field_identifier(kernel_field_name(e, f.name), &used));
    }
    fmt::format_to(out, "  }};\n}};\n");
  }
  return fmt::to_string(m);
}

Result<KernelExport> export_kernel(Trace& trace, const std::string& dir, uint64_t packet_bytes,
                                   const ExportClock& clock) {
  KernelExport summary;
  const uint32_t cpus = trace.kernel_cpu_count();
  if (cpus == 0) return summary;
  uint8_t uuid[16];
  kernel_uuid(trace, uuid);
  // (Any directory an earlier export left there was removed.)
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return Status::FromErrno("cannot create directory " + dir, errno);
  }
  CpuStreamWriter writer(trace, uuid, clock, packet_bytes);
  for (uint32_t c = 0; c < cpus; ++c) {
    std::unique_ptr<RecordSource> source = trace.read_kernel_cpu(c);
    bool wrote = false;
    Status st = writer.export_cpu(dir, *source, &wrote);
    if (!st.ok()) return st;
    summary.streams += wrote;
  }
  summary.records = writer.records();
  summary.lost = writer.lost();
  summary.corrupt_blocks = writer.corrupt_blocks();
  summary.bytes = writer.bytes();
  summary.buffer_bytes = writer.buffer_bytes();
  if (summary.streams == 0) {
    ::rmdir(dir.c_str());
    return summary;
  }
  const std::string text = kernel_metadata(trace, uuid, clock);
  Status st = write_text_file(dir + "/metadata", text, trace.source_fd());
  if (!st.ok()) return st;
  summary.bytes += text.size();
  return summary;
}

}  // namespace nanotrace::exporter::ctf
