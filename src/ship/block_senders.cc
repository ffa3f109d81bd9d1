// BlockSenders: a queue of full blocks, a thread per connection, spare blocks recycled.
#include "ship/block_senders.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "ship/trace_rows.hpp"

namespace nanotrace::ship {

BlockSenders::BlockSenders(size_t connections, InsertBlock insert)
    : insert_(std::move(insert)), limit_(std::max<size_t>(connections, 1)) {
  for (size_t i = 0; i < limit_; ++i) threads_.emplace_back([this, i] { run(i); });
}

BlockSenders::~BlockSenders() {
  (void)finish();
  {
    std::lock_guard lock(mu_);
    closing_ = true;
  }
  changed_.notify_all();
  for (std::thread& t : threads_) t.join();
}

Status BlockSenders::send(const TableDef& table, const std::string& into, NativeBlock* block) {
  // A malformed block is the caller's mistake: said at once, before it is taken.
  {
    std::string headers;
    std::vector<std::string_view> pieces;
    if (Status s = block->pieces(&headers, &pieces); !s.ok()) {
      return Status::Invalid(fmt::format("a block of {}: {}", table.name, s.message()));
    }
  }
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return in_flight_ < limit_ || !error_.ok(); });
  if (!error_.ok()) return error_;
  auto full = std::make_unique<NativeBlock>(std::move(*block));
  std::vector<std::unique_ptr<NativeBlock>>& spare = spare_[&table];
  if (spare.empty()) {
    *block = block_for(table);
  } else {
    *block = std::move(*spare.back());
    spare.pop_back();
  }
  queue_.push_back({&table, into, std::move(full)});
  ++in_flight_;
  lock.unlock();
  changed_.notify_all();
  return Status::Ok();
}

Status BlockSenders::finish() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return in_flight_ == 0; });
  return error_;
}

void BlockSenders::run(size_t connection) {
  std::string headers;
  std::vector<std::string_view> pieces;
  for (;;) {
    Job job;
    Status s;
    {
      std::unique_lock lock(mu_);
      changed_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      s = error_;  // after an error, what is queued is dropped
    }
    if (s.ok()) {
      pieces.clear();
      s = job.block->pieces(&headers, &pieces);  // checked in send(): cannot fail here
      if (s.ok()) s = insert_(connection, job.into, pieces);
    }
    job.block->clear();
    std::lock_guard lock(mu_);
    if (!s.ok() && error_.ok()) error_ = s;
    spare_[job.table].push_back(std::move(job.block));
    --in_flight_;
    changed_.notify_all();
  }
}

}  // namespace nanotrace::ship
