// libFuzzer target for the readers: the input is written to a file and opened with
// Trace::open_path, then every table is listed and every record read (merged, and as columns).
// Built twice, with the same code: FUZZ_SEGMENT=0 seeded with real trace files (the trace file
// parser; merged files of several nodes among them), and FUZZ_SEGMENT=1 seeded with a real
// segment (the segment parser). Any crash, out-of-bounds access (ASan) or leak fails the run.
// FUZZ_LIVE=1 (with FUZZ_SEGMENT=1), seeded with segments whose records pair, reads the
// segment only as the live view's follower does. A fourth build, FUZZ_REPAIR_CHECKSUMS=1, seeded
// with real files holding kernel events, recomputes every chunk's checksums before the read: a
// mutated payload would otherwise fail its CRC and never reach the decoders behind it (the kernel's
// ftrace sub-buffers, a THREAD or LOSS chunk's fields), which is where a damaged file that passes
// its checks goes.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/file_format.hpp"
#if FUZZ_LIVE
#include "live/process_follower.hpp"
#endif
#include "nanotrace/columns.hpp"
#include "nanotrace/reader.hpp"

namespace {

const std::string& input_path() {
  static const std::string path =
      "/tmp/nanotrace-fuzz-" + std::to_string(getpid()) + (FUZZ_SEGMENT ? ".seg" : ".ntr");
  return path;
}

// Gives every chunk whose header frames a payload inside the input its right checksums and
// sequence number, so that the reader checks and decodes the mutated payload.
void repair_checksums(std::string& bytes) {
  namespace file = nanotrace::file;
  if (bytes.size() < sizeof(file::FileHeader)) return;
  file::FileHeader h;
  std::memcpy(&h, bytes.data(), sizeof(h));
  h.header_crc = file::crc32c(0, &h, offsetof(file::FileHeader, header_crc));
  std::memcpy(bytes.data(), &h, sizeof(h));
  uint64_t index = 0;
  for (size_t at = sizeof(h); bytes.size() - at >= sizeof(file::ChunkHeader);) {
    file::ChunkHeader c;
    std::memcpy(&c, bytes.data() + at, sizeof(c));
    const size_t payload = at + sizeof(c);
    if (c.magic != file::kChunkMagic || c.stored_size > bytes.size() - payload) return;
    c.index = index++;
    c.payload_crc = file::crc32c(0, bytes.data() + payload, c.stored_size);
    c.header_crc = file::crc32c(0, &c, offsetof(file::ChunkHeader, header_crc));
    std::memcpy(bytes.data() + at, &c, sizeof(c));
    at = payload + c.stored_size;
  }
}

#if FUZZ_LIVE
// `top` and the fleet agent follow a segment's rings as a live process's: two passes (the
// rings' past, then one that counts), and the operations left open described.
void follow(const std::string& path) {
  auto trace = nanotrace::Trace::open_path(path);
  if (!trace.ok()) return;
  nanotrace::live::ProcessFollower follower(std::move(*trace), {}, 64);
  nanotrace::live::Totals totals;
  follower.pass(&totals, false);
  follower.pass(&totals, true);
  for (nanotrace::live::ProcessFollower::Rule& rule : follower.rules()) {
    for (const nanotrace::live::OpenOperation* op : rule.open->oldest(8)) {
      nanotrace::live::LiveWaiter waiter;
      follower.describe(rule, *op, &waiter);
    }
  }
}
#endif

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = input_path();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
#if FUZZ_REPAIR_CHECKSUMS
  std::string repaired(reinterpret_cast<const char*>(data), size);
  repair_checksums(repaired);
  data = reinterpret_cast<const uint8_t*>(repaired.data());
#endif
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  ::close(fd);
#if FUZZ_LIVE
  follow(path);
  return 0;
#endif
  auto trace = nanotrace::Trace::open_path(path);
  if (!trace.ok()) return 0;
  nanotrace::Trace& t = **trace;
  for (const nanotrace::EventInfo& e : t.events()) (void)e.full_name();
  (void)t.groups();
  (void)t.threads();
  for (const nanotrace::NodeInfo& node : t.nodes()) {
    (void)node.hostname.size();
    if (node.has_origin) (void)t.ticks_to_realtime_ns(node.origin_ticks);
  }
  auto source = t.read_all_with_kernel();
  nanotrace::Record r;
  uint64_t n = 0;
  while (source->next(&r) && n < 1000000) {
    for (uint32_t i = 0; i < r.field_count; ++i) (void)nanotrace::format_value(r.values[i]);
    ++n;
  }
  (void)source->threads();
  // The columnar read walks the same spans its own way.
  auto columns = nanotrace::read_columns(t);
  if (columns.ok()) {
    for (const nanotrace::EventTable& table : columns->tables) {
      for (const nanotrace::FieldColumn& f : table.fields) {
        for (size_t i = 0; i < table.rows(); ++i) (void)nanotrace::format_value(f.value_at(i));
      }
    }
  }
  return 0;
}
