// Merging per-thread record streams into one stream ordered by time: a k-way merge over
// the streams' next records (a min-heap keyed by clock value, then thread), so memory is one
// block buffer per thread whatever the trace size. Records of one thread keep their order.
// Internal header: used for live rings (LiveThreadStream) and trace files (FileThreadStream).
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::reader {

// A stream of any kind, for merges of different kinds (user threads and kernel CPUs).
class AnyStream {
 public:
  virtual ~AnyStream() = default;
  virtual bool next(Record* record) = 0;
  virtual const ThreadStats& stats() const = 0;
};

template <class Stream>
class AnyStreamOf final : public AnyStream {
 public:
  explicit AnyStreamOf(std::unique_ptr<Stream> s) : s_(std::move(s)) {}
  bool next(Record* record) override { return s_->next(record); }
  const ThreadStats& stats() const override { return s_->stats(); }

 private:
  std::unique_ptr<Stream> s_;
};

// Stream: bool next(Record*); const ThreadStats& stats() const.
template <class Stream>
class MergedSource : public RecordSource {
 public:
  explicit MergedSource(std::vector<std::unique_ptr<Stream>> streams)
      : streams_(std::move(streams)) {
    pending_.resize(streams_.size());
    for (uint32_t i = 0; i < streams_.size(); ++i) advance(i);
    stats_.resize(streams_.size());
  }

  bool next(Record* out) override {
    if (last_ >= 0) advance(static_cast<uint32_t>(last_));
    last_ = -1;
    if (heap_.empty()) {
      refresh_stats();
      return false;
    }
    std::pop_heap(heap_.begin(), heap_.end(), Later());
    uint32_t i = heap_.back().stream;
    heap_.pop_back();
    // Only the used part of the record: a full Record is over 500 bytes.
    const Record& p = pending_[i];
    out->ticks = p.ticks;
    out->time_ns = p.time_ns;
    out->seq = p.seq;
    out->thread = p.thread;
    out->pid = p.pid;
    out->event = p.event;
    out->cpu = p.cpu;
    out->task = p.task;
    out->field_count = p.field_count;
    std::copy_n(p.values, p.field_count, out->values);
    last_ = static_cast<int>(i);
    return true;
  }

  const std::vector<ThreadStats>& threads() const override {
    const_cast<MergedSource*>(this)->refresh_stats();
    return stats_;
  }

 private:
  struct Entry {
    uint64_t ticks;
    uint32_t stream;
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      return a.ticks != b.ticks ? a.ticks > b.ticks : a.stream > b.stream;
    }
  };

  // The record handed out last stays valid until here: its stream's buffer is reused now.
  void advance(uint32_t i) {
    if (streams_[i]->next(&pending_[i])) {
      heap_.push_back({pending_[i].ticks, i});
      std::push_heap(heap_.begin(), heap_.end(), Later());
    }
  }

  void refresh_stats() {
    for (size_t i = 0; i < streams_.size(); ++i) stats_[i] = streams_[i]->stats();
  }

  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<Record> pending_;
  std::vector<Entry> heap_;
  std::vector<ThreadStats> stats_;
  int last_ = -1;
};

}  // namespace nanotrace::reader
