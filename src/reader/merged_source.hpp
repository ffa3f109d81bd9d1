// Merging per-thread record streams into one stream ordered by time: a k-way merge over
// the streams' next records (a min-heap keyed by clock value, then thread), so memory is one
// block buffer per thread whatever the trace size. Records of one thread keep their order.
// Internal header: used for live rings (LiveThreadStream) and trace files (FileThreadStream).
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "nanotrace/reader.hpp"
#include "reader/time_order_heap.hpp"

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
    for (uint32_t i = 0; i < streams_.size(); ++i) {
      if (streams_[i]->next(&pending_[i])) heap_.add(pending_[i].ticks, i);
    }
    heap_.make();
    stats_.resize(streams_.size());
  }

  bool next(Record* out) override {
    const Record* p = next_ref();
    if (p == nullptr) return false;
    // Only the used part of the record: a full Record is over 500 bytes.
    out->ticks = p->ticks;
    out->time_ns = p->time_ns;
    out->seq = p->seq;
    out->thread = p->thread;
    out->pid = p->pid;
    out->event = p->event;
    out->cpu = p->cpu;
    out->task = p->task;
    out->field_count = p->field_count;
    std::copy_n(p->values, p->field_count, out->values);
    return true;
  }

  const Record* next_ref() override {
    if (handed_out_) replace_top();
    handed_out_ = !heap_.empty();
    if (!handed_out_) {
      refresh_stats();
      return nullptr;
    }
    return &pending_[heap_.top()];
  }

  const std::vector<ThreadStats>& threads() const override {
    const_cast<MergedSource*>(this)->refresh_stats();
    return stats_;
  }

 private:
  // The record handed out last (its stream at the top) stays valid until here: its stream's
  // buffer is reused now.
  void replace_top() {
    const uint32_t i = heap_.top();
    if (streams_[i]->next(&pending_[i])) {
      heap_.replace_top(pending_[i].ticks);
    } else {
      heap_.remove_top();
    }
  }

  void refresh_stats() {
    for (size_t i = 0; i < streams_.size(); ++i) stats_[i] = streams_[i]->stats();
  }

  std::vector<std::unique_ptr<Stream>> streams_;
  std::vector<Record> pending_;
  TimeOrderHeap heap_;
  std::vector<ThreadStats> stats_;
  bool handed_out_ = false;  // the top's record was handed out: advance its stream first
};

}  // namespace nanotrace::reader
