// ExtentPrefetcher: one worker thread, a queue of slots, one mutex. The worker reads an extent
// into the slot's own buffers with the lock released; the stream swaps the bytes out once the
// slot is done, so no buffer is ever shared between the two threads.
#include "reader/extent_prefetch.hpp"

#include <exception>
#include <system_error>
#include <utility>

namespace nanotrace::reader {

bool ExtentSlot::try_join(std::shared_ptr<ExtentPrefetcher> prefetcher) {
  if (prefetcher_ != nullptr) return true;
  if (prefetcher == nullptr || !prefetcher->reserve()) return false;
  prefetcher_ = std::move(prefetcher);
  return true;
}

void ExtentSlot::load(const TraceFile& file, const Extent& e) {
  file_ = &file;
  extent_ = e;
  pending_ = true;
  queued_ = prefetcher_->submit(this);
  if (!queued_) run();  // no worker thread to be had
}

Status ExtentSlot::take(ChunkBuffer* raw) {
  if (queued_) prefetcher_->wait(this);
  pending_ = queued_ = false;
  state_ = State::kIdle;  // the worker no longer touches the slot
  if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));  // as if read here
  std::swap(*raw, raw_);
  return std::move(status_);
}

void ExtentSlot::run() {
  try {
    status_ = file_->read_extent(extent_, &raw_, &scratch_);
  } catch (...) {  // std::bad_alloc: the reader's caller gets it, from take()
    failure_ = std::current_exception();
  }
}

void ExtentSlot::leave() {
  if (prefetcher_ == nullptr) return;
  if (queued_) prefetcher_->cancel(this);
  pending_ = queued_ = false;
  state_ = State::kIdle;
  raw_.release();
  scratch_.release();
  prefetcher_->release();
  prefetcher_.reset();
}

ExtentPrefetcher::~ExtentPrefetcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  if (worker_.joinable()) worker_.join();
}

bool ExtentPrefetcher::reserve() {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_slots_ == 0) return false;
  --free_slots_;
  return true;
}

void ExtentPrefetcher::release() {
  std::lock_guard<std::mutex> lock(mu_);
  ++free_slots_;
}

bool ExtentPrefetcher::submit(ExtentSlot* slot) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!worker_.joinable() && !worker_failed_) {
      try {
        worker_ = std::thread([this] { work(); });
      } catch (const std::system_error&) {
        worker_failed_ = true;  // no thread to be had (a limit): every read is done in place
      }
    }
    if (!worker_failed_) {
      slot->state_ = ExtentSlot::State::kQueued;
      queue_.push_back(slot);
    }
  }
  if (worker_failed_) return false;
  work_ready_.notify_one();
  return true;
}

void ExtentPrefetcher::wait(ExtentSlot* slot) {
  std::unique_lock<std::mutex> lock(mu_);
  work_done_.wait(lock, [slot] { return slot->state_ == ExtentSlot::State::kDone; });
}

void ExtentPrefetcher::cancel(ExtentSlot* slot) {
  std::unique_lock<std::mutex> lock(mu_);
  if (slot->state_ == ExtentSlot::State::kQueued) {
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if (*it == slot) {
        queue_.erase(it);
        break;
      }
    }
    slot->state_ = ExtentSlot::State::kIdle;
    return;
  }
  work_done_.wait(lock, [slot] { return slot->state_ != ExtentSlot::State::kRunning; });
}

void ExtentPrefetcher::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    ExtentSlot* slot = queue_.front();
    queue_.pop_front();
    slot->state_ = ExtentSlot::State::kRunning;
    lock.unlock();
    slot->run();
    lock.lock();
    slot->state_ = ExtentSlot::State::kDone;
    work_done_.notify_all();
  }
}

}  // namespace nanotrace::reader
