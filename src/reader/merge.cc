// Trace::read_all: the merged record stream of a live segment (one LiveThreadStream per
// thread) or of a trace file (one FileThreadStream per thread generation it holds), and
// Trace::read_spans: the same streams, unmerged, as raw record spans.
#include <memory>
#include <vector>

#include "nanotrace/reader.hpp"
#include "reader/merged_source.hpp"
#include "reader/thread_stream.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace {

std::unique_ptr<RecordSource> Trace::read_all(bool consume) {
  if (file_) {
    std::vector<std::unique_ptr<reader::FileThreadStream>> streams;
    std::vector<ThreadInfo> infos = threads();
    for (uint32_t i = 0; i < infos.size(); ++i) {
      streams.push_back(std::make_unique<reader::FileThreadStream>(*this, file_, i, infos[i]));
    }
    return std::make_unique<reader::MergedSource<reader::FileThreadStream>>(std::move(streams));
  }
  std::vector<std::unique_ptr<reader::LiveThreadStream>> streams;
  for (const ThreadInfo& t : threads()) {
    auto index = static_cast<uint32_t>(streams.size());
    streams.push_back(
        std::make_unique<reader::LiveThreadStream>(*this, t, consume && consumer_, index));
  }
  return std::make_unique<reader::MergedSource<reader::LiveThreadStream>>(std::move(streams));
}

std::vector<std::unique_ptr<SpanSource>> Trace::read_spans() {
  std::vector<std::unique_ptr<SpanSource>> out;
  std::vector<ThreadInfo> infos = threads();
  for (uint32_t i = 0; i < infos.size(); ++i) {
    if (file_) {
      out.push_back(std::make_unique<reader::SpanSourceOf<reader::FileThreadStream>>(
          std::make_unique<reader::FileThreadStream>(*this, file_, i, infos[i])));
    } else {
      out.push_back(std::make_unique<reader::SpanSourceOf<reader::LiveThreadStream>>(
          std::make_unique<reader::LiveThreadStream>(*this, infos[i], false, i)));
    }
  }
  return out;
}

}  // namespace nanotrace
