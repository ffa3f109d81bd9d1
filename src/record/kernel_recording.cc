// Kernel events into a trace file (see kernel_recording.hpp).
#include "record/kernel_recording.hpp"

#include <sys/uio.h>

#include <algorithm>

#include "base/kernel_meta.hpp"

namespace nanotrace::rec {

Result<std::unique_ptr<KernelRecording>> KernelRecording::start(
    const std::vector<std::string>& groups, uint32_t buffer_kb, uint32_t pid, bool tsc_clock,
    FileWriter& out, std::string* warning) {
  kernel::CaptureOptions options;
  options.groups = groups;
  options.pid = pid;
  options.buffer_kb = buffer_kb;
  options.clock = tsc_clock ? file::KernelClock::kTsc : file::KernelClock::kMonotonic;
  auto capture = kernel::KernelCapture::start(options);
  if (!capture.ok()) {
    if (capture.status().code() == StatusCode::kInvalidArgument) return capture.status();
    *warning = "kernel events not recorded: " + capture.status().message();
    return std::unique_ptr<KernelRecording>();
  }
  std::unique_ptr<KernelRecording> r(new KernelRecording(std::move(*capture), out));
  if (Status s = r->write_meta(r->capture_->meta()); !s.ok()) return s;
  return r;
}

namespace {

Status write_meta_chunk(const file::KernelMeta& meta, FileWriter& out) {
  std::vector<uint8_t> payload = file::encode_kernel_meta(meta);
  if (payload.size() > file::kMaxChunkBytes) {
    return Status::Invalid("--kernel: the event formats exceed one chunk (select fewer events)");
  }
  return out.write_chunk(file::ChunkType::kKernelMeta, payload.data(),
                         static_cast<uint32_t>(payload.size()));
}

// Sub-buffers one KERNEL_DATA chunk carries at most, as the recording's drain writes them.
constexpr size_t kPagesPerChunk = 256;

}  // namespace

Status KernelRecording::write_meta(const file::KernelMeta& meta) {
  return write_meta_chunk(meta, out_);
}

Status write_kernel_window(const kernel::KernelWindow& window, FileWriter& out) {
  if (Status s = write_meta_chunk(window.meta, out); !s.ok()) return s;
  const size_t chunk = kPagesPerChunk * window.meta.page_size;
  for (const auto& [cpu, pages] : window.cpus) {
    for (size_t at = 0; at < pages.size(); at += chunk) {
      const size_t bytes = std::min(chunk, pages.size() - at);
      struct iovec v = {const_cast<uint8_t*>(pages.data() + at), bytes};
      Status s = out.write_chunk(file::ChunkType::kKernelData, cpu, 0, at, &v, 1);
      if (!s.ok()) return s;
    }
  }
  return Status::Ok();
}

Status KernelRecording::drain(bool final) {
  return capture_->drain(
      [this](uint32_t cpu, uint64_t position, const uint8_t* pages, size_t bytes) {
        struct iovec v = {const_cast<uint8_t*>(pages), bytes};
        return out_.write_chunk(file::ChunkType::kKernelData, cpu, 0, position, &v, 1);
      },
      final);
}

void KernelRecording::follow(uint32_t pid) { capture_->follow(pid); }

Status KernelRecording::refresh_threads() { return capture_->refresh_threads(); }

Status KernelRecording::finish(uint64_t* pages, uint64_t* lost) {
  const file::KernelMeta meta = capture_->meta();
  Status s = write_meta(meta);  // the final loss counters
  *pages = capture_->pages();
  *lost = 0;
  for (const file::KernelCpuLoss& l : meta.losses) *lost += l.overrun + l.dropped;
  capture_.reset();  // the instance goes now
  return s;
}

}  // namespace nanotrace::rec
