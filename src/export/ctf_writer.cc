// CTF 1.8 export: the metadata file plus one stream file per thread, read by babeltrace2
// and Trace Compass. Threads are exported one after the other from their raw record spans
// (Trace::read_spans): no decoding and no merge, since CTF streams are per thread. Each span
// is copied into the open packet and its records are rewritten in place (ctf.hpp): the clock
// stamp becomes the record's time in ns since the segment start (the conversion `nanotrace
// dump` uses, clamped so it never goes back within a stream).
//
// Loss: a packet's events_discarded is the thread's ThreadStats::lost() as of its last
// span, so babeltrace2's "discarded events" messages fall between the right packets and add
// up, per stream, to exactly nanotrace's loss count.
// A trace of several processes (`nanotrace run`) becomes one CTF trace per process, each in its
// own subdirectory with its own metadata (procname and vpid in the env, as LTTng's per-process
// traces have), all on one clock: babeltrace2 given the top directory merges them by time and
// names each event's process, and Trace Compass opens them as an experiment. Kernel events
// (a file recorded with --kernel) are one more CTF trace on the same clock, in kernel/
// (ctf_kernel.cc); the user-space trace then has its subdirectory even for one process.
// Streams are independent, so up to one worker per CPU (at most 8) exports them side by side.
// Memory: one packet buffer (packet_bytes, at least one block) per worker, whatever the
// trace size.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <thread>

#include "base/output_file.hpp"
#include "base/utf8.hpp"
#include "export/ctf.hpp"
#include "export/ctf_directories.hpp"
#include "export/output.hpp"
#include "export/writers.hpp"
#include "reader/record_walk.hpp"

namespace nanotrace::exporter {
namespace {

using ctf::kPacketPrefix;
// A packet without events ends with its context, before the padding that aligns events.
constexpr uint32_t kPrefixPad = kPacketPrefix - ctf::kPacketHeaderBytes - ctf::kPacketContextBytes;

// What the exporter needs of one event id's records: their layout (the reader's sizing rule,
// abi::RecordLayout), and the padding after the last field, which the packet's content_size
// must leave out when the record ends a packet.
struct EventPlan {
  abi::RecordLayout layout;  // invalid: not an event
  bool strings = false;
  bool ends_in_string = false;  // the tail is then the last string's slot padding
  uint32_t tail = 0;            // the last field a scalar: 8 - its declared bytes
  std::vector<uint8_t> pad;     // per field: 8 - declared bytes (scalars)
};
// Threads exporting streams side by side (at most one per CPU).
constexpr size_t kMaxWorkers = 8;

// What every worker shares: read-only tables, and the output directories.
struct Shared {
  Trace& trace;
  std::vector<EventPlan> plans;                // by event id
  std::vector<std::array<uint8_t, 16>> uuids;  // by process: its CTF trace's uuid
  ctf::ExportClock clock;
  uint64_t packet_bytes = 0;
  ctf::OutputDirectories dirs;
};

// Writes whole streams, one at a time, through one packet buffer.
class StreamWriter {
 public:
  explicit StreamWriter(Shared& shared) : shared_(shared), trace_(shared.trace) {}
  ~StreamWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  // Exports the thread at index. A thread without records writes nothing. A trace file's
  // streams hand out their blocks unwalked (UncheckedSpanSource): each record is then checked
  // as it is rewritten, by the walk's rules (the same layouts), so its bytes are read once.
  Status export_thread(uint32_t index, SpanSource& source) {
    auto* unchecked = dynamic_cast<reader::UncheckedSpanSource*>(&source);
    if (unchecked != nullptr && unchecked->unchecked_sizer() == nullptr) unchecked = nullptr;
    RecordSpan span;
    bool open = false;
    while (unchecked ? unchecked->next_unchecked(&span) : source.next(&span)) {
      if (!open && !starts_with_record(span)) {  // an unchecked block without records
        if (unchecked) unchecked->finish_unchecked(0, false);
        continue;
      }
      if (!open) {
        Status st = open_stream(index, source.stats().info);
        if (!st.ok()) return st;
        open = true;
      }
      if (len_ + span.bytes > shared_.packet_bytes) {
        Status st = flush_packet(lost_at_span_);
        if (!st.ok()) return st;
      }
      if (len_ == 0) len_ = kPacketPrefix;
      uint8_t* at = buf_.get() + len_;
      std::memcpy(at, span.data, span.bytes);
      Rewritten done = rewrite(at, span.bytes, span.base_ticks);
      len_ += done.bytes;
      if (done.stop == Stop::kText) {
        // From the first record whose text is not valid UTF-8 on, records are repaired one
        // by one (they grow: each ill-formed subsequence becomes a 3-byte U+FFFD).
        Status st = add_repaired(span.data, span.bytes, span.base_ticks, &done);
        if (!st.ok()) return st;
      }
      records_ += done.records;
      if (unchecked) {
        unchecked->finish_unchecked(done.records, done.stop == Stop::kMalformed);
      } else if (done.stop == Stop::kMalformed) {
        return layout_error();  // cannot happen: the walk checked it with the same layouts
      }
      lost_at_span_ = source.stats().lost();
    }
    if (!open) return Status::Ok();
    ++streams_;
    return finish_stream(source.stats().lost());
  }

  // A thread whose records were all lost: packets that carry only its loss count.
  Status export_loss_only(uint32_t index, const ThreadInfo& thread, uint64_t lost) {
    Status st = open_stream(index, thread);
    return st.ok() ? finish_stream(lost) : st;
  }

  uint64_t records() const { return records_; }
  uint64_t bytes() const { return bytes_; }
  uint32_t streams() const { return streams_; }
  bool has_buffer() const { return buf_ != nullptr; }

 private:
  // Where rewriting a span's records stopped.
  enum class Stop : uint8_t {
    kEnd,        // the span's end, or an end marker or fewer than 8 bytes left: the block's end
    kText,       // a record with a string that is not valid UTF-8 (the rest is repaired)
    kMalformed,  // a record that does not fit its event's layout: the rest is unusable
  };
  struct Rewritten {
    uint32_t bytes = 0;  // of the span, rewritten in place
    uint32_t records = 0;
    Stop stop = Stop::kEnd;
  };

  static bool starts_with_record(const RecordSpan& span) {
    uint64_t word0 = 0;
    if (span.bytes >= 8) std::memcpy(&word0, span.data, 8);
    return word0 != 0;
  }

  // Rewrites the records of one span in place, by the walk's rules (record_walk.hpp): records
  // end at the span's end, at an end marker (a zero first word) or where fewer than 8 bytes
  // are left; a record whose event has no layout or that does not fit it is malformed.
  Rewritten rewrite(uint8_t* p, uint32_t bytes, uint64_t base_ticks) {
    const std::vector<EventPlan>& plans = shared_.plans;
    Rewritten out;
    uint32_t at = 0;
    while (at + 8 <= bytes) {
      uint64_t word0;
      std::memcpy(&word0, p + at, 8);
      if (word0 == 0) break;
      auto id = static_cast<uint16_t>(word0 & 0xffff);
      const EventPlan* plan = id < plans.size() ? &plans[id] : &plans[0];
      uint32_t size = plan->layout.fixed_size();
      uint32_t tail = plan->tail;
      if (size == 0) {
        bool text_ok = true;
        size = text_record_size(*plan, p, at, bytes, &tail, &text_ok);
        if (size != 0 && !text_ok) {
          out.stop = Stop::kText;
          break;
        }
      } else if (size > bytes - at) {
        size = 0;
      }
      if (size == 0) {
        out.stop = Stop::kMalformed;
        break;
      }
      stamp(p + at, word0, base_ticks);
      tail_pad_ = tail;
      at += size;
      ++out.records;
    }
    out.bytes = at;
    return out;
  }

  // Size of a record with strings (0 if malformed); *tail: the padding after its last field;
  // *text_ok: false if a string is not valid UTF-8.
  static uint32_t text_record_size(const EventPlan& plan, const uint8_t* p, uint32_t at,
                                   uint32_t bytes, uint32_t* tail, bool* text_ok) {
    uint32_t last = 0;
    const uint32_t size = plan.layout.strings(p, at, bytes, [&](std::string_view text) {
      *text_ok = *text_ok && utf8::is_valid(text);
      last = static_cast<uint32_t>(text.size());
    });
    if (plan.ends_in_string) *tail = abi::string_slot_bytes(last) - 1 - last;
    return size;
  }

  // Rewrites a record's clock stamp into ns since the segment start.
  void stamp(uint8_t* p, uint64_t word0, uint64_t base_ticks) {
    uint64_t ns =
        trace_.ticks_to_ns(abi::expand_ticks(base_ticks, word0 >> 16)) + shared_.clock.lead_ns;
    if (ns < last_ns_) ns = last_ns_;
    if (packet_empty_) {
      begin_ns_ = ns;
      packet_empty_ = false;
    }
    last_ns_ = ns;
    word0 = (ns << 16) | (word0 & 0xffff);
    std::memcpy(p, &word0, 8);
  }

  // Appends the records of span bytes p[done->bytes, bytes) to the packet with every string
  // made valid UTF-8 (utf8::valid): its length byte grows with it (at most 3 *
  // kMaxStringBytes, within the u8 CTF declares). Stops where rewrite() would, and adds to
  // *done the records it appends and how it stopped.
  Status add_repaired(const uint8_t* p, uint32_t bytes, uint64_t base_ticks, Rewritten* done) {
    const std::vector<EventPlan>& plans = shared_.plans;
    uint8_t record[ctf::kMaxRepairedRecordBytes];
    std::string text;
    done->stop = Stop::kEnd;
    for (uint32_t at = done->bytes; at + 8 <= bytes;) {
      uint64_t word0;
      std::memcpy(&word0, p + at, 8);
      if (word0 == 0) break;
      auto id = static_cast<uint16_t>(word0 & 0xffff);
      const EventPlan& plan = id < plans.size() ? plans[id] : plans[0];
      // The repaired copy: word0, then each slot as it is or its string repaired.
      std::memcpy(record, p + at, 8);
      uint8_t* out = record + 8;
      uint32_t tail = 0;
      const uint32_t size = plan.layout.decode(
          p, at, bytes,
          [&](uint32_t f, uint64_t bits) {
            std::memcpy(out, &bits, 8);
            out += 8;
            tail = plan.pad[f];
          },
          [&](uint32_t, std::string_view in) {
            text.clear();
            utf8::append_valid(text, in);
            uint32_t slot = abi::string_slot_bytes(static_cast<uint32_t>(text.size()));
            std::memset(out, 0, slot);
            *out = static_cast<uint8_t>(text.size());
            std::memcpy(out + 1, text.data(), text.size());
            out += slot;
            tail = slot - 1 - static_cast<uint32_t>(text.size());
          });
      if (size == 0) {
        done->stop = Stop::kMalformed;
        break;
      }
      auto repaired = static_cast<size_t>(out - record);
      if (len_ + repaired > shared_.packet_bytes) {
        Status st = flush_packet(lost_at_span_);
        if (!st.ok()) return st;
      }
      if (len_ == 0) len_ = kPacketPrefix;
      uint8_t* dst = buf_.get() + len_;
      std::memcpy(dst, record, repaired);
      stamp(dst, word0, base_ticks);
      tail_pad_ = tail;
      len_ += repaired;
      at += size;
      ++done->records;
    }
    return Status::Ok();
  }

  Status layout_error() const {
    return Status::Corrupt(fmt::format("thread {}: a record changed layout while exported", tid_));
  }

  Status open_stream(uint32_t index, const ThreadInfo& thread) {
    const uint32_t tid = thread.tid;
    process_ = thread.process < shared_.uuids.size() ? thread.process : 0;
    auto dir = shared_.dirs.for_process(process_);
    if (!dir.ok()) return dir.status();
    if (!buf_) buf_ = std::make_unique<uint8_t[]>(shared_.packet_bytes);
    path_ = fmt::format("{}/stream-{}-{}", *dir, index, tid);
    auto fd = create_output_file(path_, trace_.source_fd());
    if (!fd.ok()) return fd.status();
    fd_ = *fd;
    index_ = index;
    tid_ = tid;
    seq_num_ = discarded_ = last_ns_ = lost_at_span_ = 0;
    len_ = 0;
    packet_empty_ = true;
    return Status::Ok();
  }

  // Writes the open packet (if any) and a last empty packet if loss grew after it.
  Status finish_stream(uint64_t lost) {
    Status st = len_ > 0 ? flush_packet(lost) : Status::Ok();
    if (st.ok() && lost > discarded_) {
      len_ = kPacketPrefix;
      begin_ns_ = last_ns_;
      st = flush_packet(lost);
    }
    if (::close(fd_) != 0 && st.ok()) st = Status::FromErrno("cannot write " + path_, errno);
    fd_ = -1;
    return st;
  }

  Status flush_packet(uint64_t lost) {
    if (lost > 0 && seq_num_ == 0) {
      // babeltrace2 gives no count for a loss reported by a stream's first packet, so an
      // empty packet with events_discarded = 0 goes first.
      uint8_t empty[kPacketPrefix];
      fill_prefix(empty, begin_ns_, begin_ns_, kPacketPrefix, kPrefixPad);
      Status st = write_packet(empty, kPacketPrefix);
      if (!st.ok()) return st;
    }
    if (lost > discarded_) discarded_ = lost;
    uint64_t end_ns = packet_empty_ ? begin_ns_ : last_ns_;
    fill_prefix(buf_.get(), begin_ns_, end_ns, len_, packet_empty_ ? kPrefixPad : tail_pad_);
    Status st = write_packet(buf_.get(), len_);
    len_ = 0;
    packet_empty_ = true;
    return st;
  }

  void fill_prefix(uint8_t* p, uint64_t begin_ns, uint64_t end_ns, size_t len,
                   uint32_t tail) const {
    uint32_t stream_id = 0;
    uint64_t instance = index_;
    uint64_t bits = uint64_t{len} * 8;
    // The reader stops when it reaches content_size exactly, and it is left at the end of the
    // last field, not of its slot.
    uint64_t content_bits = bits - uint64_t{tail} * 8;
    std::memcpy(p, &ctf::kMagic, 4);
    std::memcpy(p + 4, shared_.uuids[process_].data(), 16);
    std::memcpy(p + 20, &stream_id, 4);
    std::memcpy(p + 24, &instance, 8);
    uint64_t context[6] = {begin_ns, end_ns, content_bits, bits, seq_num_, discarded_};
    std::memcpy(p + ctf::kPacketHeaderBytes, context, sizeof(context));
    std::memcpy(p + ctf::kPacketHeaderBytes + sizeof(context), &tid_, 4);
    std::memset(p + ctf::kPacketHeaderBytes + ctf::kPacketContextBytes, 0, kPrefixPad);
  }

  Status write_packet(const uint8_t* p, size_t len) {
    int err = write_all(fd_, p, len);
    if (err != 0) return Status::FromErrno("cannot write " + path_, err);
    bytes_ += len;
    ++seq_num_;
    return Status::Ok();
  }

  Shared& shared_;
  const Trace& trace_;
  std::unique_ptr<uint8_t[]> buf_;  // the packet being filled
  uint64_t records_ = 0;
  uint64_t bytes_ = 0;
  uint32_t streams_ = 0;
  // The stream being written.
  int fd_ = -1;
  std::string path_;
  uint32_t index_ = 0;
  uint32_t tid_ = 0;
  uint32_t process_ = 0;  // its process's index (which CTF trace it belongs to)
  size_t len_ = 0;        // bytes in the open packet, 0: none open
  bool packet_empty_ = true;
  uint64_t begin_ns_ = 0;
  uint64_t last_ns_ = 0;
  uint32_t tail_pad_ = 0;  // padding after the last field of the packet's last record
  uint64_t seq_num_ = 0;
  uint64_t discarded_ = 0;     // events_discarded written so far
  uint64_t lost_at_span_ = 0;  // the thread's loss count when the last span was added
};

std::vector<EventPlan> build_plans(const Trace& trace) {
  const std::vector<EventInfo>& events = trace.events();
  std::vector<EventPlan> plans(events.size() + 1);
  for (const EventInfo& e : events) {
    if (e.is_guard || e.id == 0 || e.id > events.size()) continue;
    EventPlan& plan = plans[e.id];
    plan.layout = e.layout;
    for (const FieldInfo& f : e.fields) {
      bool is_string = f.type == abi::FieldType::kString;
      plan.pad.push_back(is_string ? 0 : 8 - ctf::declared_bytes(f.type));
      plan.strings |= is_string;
      plan.ends_in_string = is_string;
      plan.tail = plan.pad.back();
    }
  }
  return plans;
}

// The packet buffer: one block (a span is at most one), or a repaired record, at least.
uint64_t packet_bytes(const Trace& trace, const ExportOptions& options) {
  uint32_t block_size = trace.process().block_size;
  for (const ProcessInfo& p : trace.processes()) block_size = std::max(block_size, p.block_size);
  return std::max<uint64_t>({options.packet_bytes ? options.packet_bytes : 1u << 20,
                             kPacketPrefix + block_size,
                             kPacketPrefix + ctf::kMaxRepairedRecordBytes});
}

// Exports every stream, up to one worker per CPU taking them one at a time.
Status write_streams(Shared& shared, std::vector<std::unique_ptr<SpanSource>>& sources,
                     std::vector<std::unique_ptr<StreamWriter>>* writers) {
  size_t workers = std::min<size_t>(
      {sources.size(), kMaxWorkers, std::max(1u, std::thread::hardware_concurrency())});
  for (size_t w = 0; w < std::max<size_t>(workers, 1); ++w) {
    writers->push_back(std::make_unique<StreamWriter>(shared));
  }
  std::atomic<uint32_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<Status> errors(writers->size());
  auto work = [&](size_t w) {
    for (uint32_t i; !failed.load() && (i = next.fetch_add(1)) < sources.size();) {
      Status st = (*writers)[w]->export_thread(i, *sources[i]);
      if (!st.ok()) {
        errors[w] = st;
        failed = true;
      }
    }
  };
  std::vector<std::thread> threads;
  for (size_t w = 1; w < workers; ++w) threads.emplace_back(work, w);
  work(0);
  for (std::thread& t : threads) t.join();
  for (const Status& st : errors) {
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

// Kernel events: a CTF trace of their own, in kernel/.
Status write_kernel(Shared& shared, ExportSummary* summary) {
  Status st = shared.dirs.ensure_top();
  if (!st.ok()) return st;
  auto k = ctf::export_kernel(shared.trace, shared.dirs.top() + "/kernel", shared.packet_bytes,
                              shared.clock);
  if (!k.ok()) return k.status();
  summary->records += k->records;
  summary->threads += k->streams;
  summary->lost += k->lost;
  summary->corrupt_blocks += k->corrupt_blocks;
  summary->bytes_written += k->bytes;
  summary->buffer_bytes += k->buffer_bytes;
  return Status::Ok();
}

// One metadata file per CTF trace: the top directory's, or each process's that has streams.
Status write_metadata(Shared& shared, bool per_process, ExportSummary* summary) {
  const Trace& trace = shared.trace;
  const std::vector<ProcessInfo>& processes = trace.processes();
  for (uint32_t p = 0; p < shared.uuids.size(); ++p) {
    std::string dir = per_process ? shared.dirs.made_for(p) : shared.dirs.top();
    if (dir.empty()) continue;
    std::string text = ctf::metadata(trace, p < processes.size() ? processes[p] : trace.process(),
                                     shared.uuids[p].data(), shared.clock);
    Status st = write_text_file(dir + "/metadata", text, trace.source_fd());
    if (!st.ok()) return st;
    summary->bytes_written += text.size();
    if (!per_process) break;
  }
  return Status::Ok();
}

}  // namespace

Result<ExportSummary> export_ctf(Trace& trace, const ExportOptions& options) {
  const std::vector<ProcessInfo>& processes = trace.processes();
  // Kernel events are a CTF trace of their own, in a subdirectory: babeltrace2 does not look
  // inside a directory that is itself a trace, so the user-space trace gets one too.
  const bool kernel = trace.kernel_cpu_count() > 0;
  const bool per_process = processes.size() > 1 || kernel;
  Shared shared{trace,
                build_plans(trace),
                {},
                ctf::export_clock(trace),
                packet_bytes(trace, options),
                ctf::OutputDirectories(trace, options.output, per_process)};
  for (const ProcessInfo& p : processes) ctf::make_uuid(p, shared.uuids.emplace_back().data());
  if (shared.uuids.empty()) ctf::make_uuid(trace.process(), shared.uuids.emplace_back().data());

  std::vector<std::unique_ptr<SpanSource>> sources = trace.read_spans();
  std::vector<std::unique_ptr<StreamWriter>> writers;
  Status st = write_streams(shared, sources, &writers);
  if (!st.ok()) return st;
  ExportSummary summary;
  for (const auto& w : writers) {
    summary.records += w->records();
    summary.threads += w->streams();
  }
  if (kernel && !(st = write_kernel(shared, &summary)).ok()) return st;
  if (summary.records == 0) {
    return Status::NotFound(fmt::format("the trace of process {} ({}) holds no records",
                                        trace.process().pid, trace.process().path));
  }
  for (uint32_t i = 0; i < sources.size(); ++i) {
    const ThreadStats& stats = sources[i]->stats();
    summary.lost += stats.lost();
    summary.corrupt_blocks += stats.corrupt_blocks;
    if (stats.records == 0 && stats.lost() > 0) {
      st = writers[0]->export_loss_only(i, stats.info, stats.lost());
      if (!st.ok()) return st;
    }
  }
  if (!(st = write_metadata(shared, per_process, &summary)).ok()) return st;
  for (const auto& w : writers) {
    summary.bytes_written += w->bytes();
    summary.buffer_bytes += w->has_buffer() ? shared.packet_bytes : 0;
  }
  return summary;
}

}  // namespace nanotrace::exporter
