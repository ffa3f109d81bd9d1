// Trace::read_all: the merged record stream of a live segment (one LiveThreadStream per
// thread) or of a trace file (one FileThreadStream per thread generation it holds), and
// Trace::read_spans: the same streams, unmerged, as raw record spans. With kernel events: the
// same merge with one stream per CPU, or one CPU's stream alone.
#include <algorithm>
#include <memory>
#include <vector>

#include "nanotrace/reader.hpp"
#include "reader/extent_prefetch.hpp"
#include "reader/kernel_stream.hpp"
#include "reader/merged_source.hpp"
#include "reader/thread_stream.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace {
namespace {

// How much of a dead process's ring one read copies (256 KiB stays in L2 while walked), and
// the most the copy buffers of a merged read may take together.
constexpr uint64_t kChunkBytes = 256u << 10;
constexpr uint64_t kMergeBufferBytes = 16u << 20;
// How many of a file's thread streams read their next chunk ahead at once (each holds one
// more chunk: 1 MiB as the recorder writes them).
constexpr uint32_t kReadAheadStreams = 64;

}  // namespace

std::unique_ptr<RecordSource> Trace::read_all(bool consume) {
  if (file_) {
    auto prefetcher = std::make_shared<reader::ExtentPrefetcher>(kReadAheadStreams);
    std::vector<std::unique_ptr<reader::FileThreadStream>> streams;
    std::vector<ThreadInfo> infos = threads();
    for (uint32_t i = 0; i < infos.size(); ++i) {
      streams.push_back(
          std::make_unique<reader::FileThreadStream>(*this, file_, i, infos[i], prefetcher));
    }
    return std::make_unique<reader::MergedSource<reader::FileThreadStream>>(std::move(streams));
  }
  std::vector<std::unique_ptr<reader::LiveThreadStream>> streams;
  std::vector<ThreadInfo> infos = threads();
  // Merged streams are all read at once: their copy buffers share kMergeBufferBytes.
  uint64_t share = kMergeBufferBytes / std::max<size_t>(infos.size(), 1);
  auto chunk = static_cast<uint32_t>(std::clamp<uint64_t>(share, process_.block_size, kChunkBytes));
  for (const ThreadInfo& t : infos) {
    auto index = static_cast<uint32_t>(streams.size());
    streams.push_back(
        std::make_unique<reader::LiveThreadStream>(*this, t, consume && consumer_, index, chunk));
  }
  return std::make_unique<reader::MergedSource<reader::LiveThreadStream>>(std::move(streams));
}

std::unique_ptr<RecordSource> Trace::read_all_with_kernel() {
  if (!file_ || !kernel_) return read_all();
  auto prefetcher = std::make_shared<reader::ExtentPrefetcher>(kReadAheadStreams);
  std::vector<std::unique_ptr<reader::AnyStream>> streams;
  std::vector<ThreadInfo> infos = threads();
  for (uint32_t i = 0; i < infos.size(); ++i) {
    streams.push_back(std::make_unique<reader::AnyStreamOf<reader::FileThreadStream>>(
        std::make_unique<reader::FileThreadStream>(*this, file_, i, infos[i], prefetcher)));
  }
  for (uint32_t c = 0; c < file_->kernel_data.size(); ++c) {
    auto thread = static_cast<uint32_t>(streams.size());
    streams.push_back(std::make_unique<reader::AnyStreamOf<reader::KernelCpuStream>>(
        std::make_unique<reader::KernelCpuStream>(*this, file_, kernel_, c, thread)));
  }
  return std::make_unique<reader::MergedSource<reader::AnyStream>>(std::move(streams));
}

uint32_t Trace::kernel_cpu_count() const {
  return file_ && kernel_ ? static_cast<uint32_t>(file_->kernel_data.size()) : 0;
}

std::unique_ptr<RecordSource> Trace::read_kernel_cpu(uint32_t index) {
  std::vector<std::unique_ptr<reader::KernelCpuStream>> one;
  if (index < kernel_cpu_count()) {
    one.push_back(std::make_unique<reader::KernelCpuStream>(*this, file_, kernel_, index, 0));
  }
  return std::make_unique<reader::MergedSource<reader::KernelCpuStream>>(std::move(one));
}

std::vector<std::unique_ptr<SpanSource>> Trace::read_spans() {
  auto prefetcher = file_ ? std::make_shared<reader::ExtentPrefetcher>(kReadAheadStreams) : nullptr;
  std::vector<std::unique_ptr<SpanSource>> out;
  std::vector<ThreadInfo> infos = threads();
  for (uint32_t i = 0; i < infos.size(); ++i) {
    if (file_) {
      out.push_back(std::make_unique<reader::FileSpanSource>(
          std::make_unique<reader::FileThreadStream>(*this, file_, i, infos[i], prefetcher)));
    } else {
      out.push_back(std::make_unique<reader::SpanSourceOf<reader::LiveThreadStream>>(
          std::make_unique<reader::LiveThreadStream>(*this, infos[i], false, i, kChunkBytes)));
    }
  }
  return out;
}

}  // namespace nanotrace
