// libFuzzer target for the readers: the input is written to a file and opened with
// Trace::open_path, then every table is listed and every record read (merged, and as columns).
// Built twice, with the same code: FUZZ_SEGMENT=0 seeded with real trace files (the trace file
// parser; merged files of several nodes among them), and FUZZ_SEGMENT=1 seeded with a real
// segment (the segment parser). Any crash, out-of-bounds access (ASan) or leak fails the run.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "nanotrace/columns.hpp"
#include "nanotrace/reader.hpp"

namespace {

const std::string& input_path() {
  static const std::string path =
      "/tmp/nanotrace-fuzz-" + std::to_string(getpid()) + (FUZZ_SEGMENT ? ".seg" : ".ntr");
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = input_path();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) std::abort();
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::write(fd, data + done, size - done);
    if (n <= 0) std::abort();
    done += static_cast<size_t>(n);
  }
  ::close(fd);
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
