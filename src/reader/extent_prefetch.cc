// ExtentPrefetcher: one worker thread, a queue of slots, one mutex. The worker reads an extent
// into the slot's own buffers with the lock released; the stream swaps the bytes out once the
// slot is done, so no buffer is ever shared between the two threads. A forked child never
// touches the lock, the queue or the worker (none of them is its own); fork waits for the
// worker's read in progress, so that the child finds no lock held by a read it will not see
// finish (the allocator's among them).
#include "reader/extent_prefetch.hpp"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace nanotrace::reader {

struct ExtentPrefetcher::Shared {
  std::mutex mu;
  std::condition_variable work_ready, work_done;
  std::deque<ExtentSlot*> queue;
  uint32_t free_slots;
  bool stopping = false;
  bool worker_failed = false;
  bool reading = false;       // the worker is in ExtentSlot::run, the lock released
  bool fork_pending = false;  // a fork waits for the read: start no other
  std::thread worker;         // started with the first request
};

namespace {

// Every prefetcher of this process, for the fork handlers. Never destroyed: the handlers may
// run during exit.
struct LivePrefetchers {
  std::mutex mu;
  std::vector<ExtentPrefetcher::Shared*> list;
};
LivePrefetchers& live_prefetchers() {
  static auto* live = new LivePrefetchers;
  return *live;
}

}  // namespace

// A worker caught by fork in the middle of a read may hold any lock that read takes: the
// allocator's (glibc's malloc resets its own in the child; ASan's, in GCC 12, does not) or
// zstd's. The child, which reads that extent again in place, would wait for it forever.
// So fork waits for reads in progress and holds every prefetcher's lock across the fork.
void ExtentPrefetcher::before_fork() {
  LivePrefetchers& live = live_prefetchers();
  live.mu.lock();
  for (Shared* sh : live.list) {
    std::unique_lock<std::mutex> lock(sh->mu);
    sh->fork_pending = true;
    sh->work_done.wait(lock, [sh] { return !sh->reading; });
    lock.release();  // unlocked by after_fork, in the parent and in the child
  }
}

void ExtentPrefetcher::after_fork(bool in_child) {
  LivePrefetchers& live = live_prefetchers();
  for (Shared* sh : live.list) {
    sh->fork_pending = false;
    sh->mu.unlock();
    if (!in_child) sh->work_ready.notify_one();
  }
  // The child's copies are the parent's prefetchers: it never uses them (see forked()).
  if (in_child) live.list.clear();
  live.mu.unlock();
}

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
  queued_ = !prefetcher_->forked() && prefetcher_->submit(this);
  if (!queued_) run();  // no worker thread to be had
}

Status ExtentSlot::take(ChunkBuffer* raw) {
  if (queued_ && prefetcher_->forked()) {
    // Queued before a fork: the worker that had it is not in this process.
    status_ = Status::Ok();
    failure_ = nullptr;
    run();
  } else if (queued_) {
    prefetcher_->wait(this);
  }
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
  const bool forked = prefetcher_->forked();
  if (queued_ && !forked) prefetcher_->cancel(this);
  pending_ = queued_ = false;
  state_ = State::kIdle;
  raw_.release();
  scratch_.release();
  if (!forked) prefetcher_->release();
  prefetcher_.reset();
}

ExtentPrefetcher::ExtentPrefetcher(uint32_t budget_slots)
    : owner_pid_(getpid()), shared_(new Shared) {
  shared_->free_slots = budget_slots;
  static const int handlers =
      pthread_atfork([] { before_fork(); }, [] { after_fork(false); }, [] { after_fork(true); });
  (void)handlers;
  LivePrefetchers& live = live_prefetchers();
  std::lock_guard<std::mutex> lock(live.mu);
  live.list.push_back(shared_);
}

bool ExtentPrefetcher::forked() const { return getpid() != owner_pid_; }

ExtentPrefetcher::~ExtentPrefetcher() {
  if (forked()) return;  // shared_ is left as it is (see the header)
  {
    LivePrefetchers& live = live_prefetchers();
    std::lock_guard<std::mutex> lock(live.mu);
    live.list.erase(std::find(live.list.begin(), live.list.end(), shared_));
  }
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    shared_->stopping = true;
  }
  shared_->work_ready.notify_one();
  if (shared_->worker.joinable()) shared_->worker.join();
  delete shared_;
}

bool ExtentPrefetcher::reserve() {
  if (forked()) return false;
  std::lock_guard<std::mutex> lock(shared_->mu);
  if (shared_->free_slots == 0) return false;
  --shared_->free_slots;
  return true;
}

void ExtentPrefetcher::release() {
  std::lock_guard<std::mutex> lock(shared_->mu);
  ++shared_->free_slots;
}

bool ExtentPrefetcher::submit(ExtentSlot* slot) {
  Shared& sh = *shared_;
  {
    std::lock_guard<std::mutex> lock(sh.mu);
    if (!sh.worker.joinable() && !sh.worker_failed) {
      try {
        sh.worker = std::thread([this] { work(); });
      } catch (const std::system_error&) {
        sh.worker_failed = true;  // no thread to be had (a limit): every read is done in place
      }
    }
    if (!sh.worker_failed) {
      slot->state_ = ExtentSlot::State::kQueued;
      sh.queue.push_back(slot);
    }
  }
  if (sh.worker_failed) return false;
  sh.work_ready.notify_one();
  return true;
}

void ExtentPrefetcher::wait(ExtentSlot* slot) {
  std::unique_lock<std::mutex> lock(shared_->mu);
  shared_->work_done.wait(lock, [slot] { return slot->state_ == ExtentSlot::State::kDone; });
}

void ExtentPrefetcher::cancel(ExtentSlot* slot) {
  Shared& sh = *shared_;
  std::unique_lock<std::mutex> lock(sh.mu);
  if (slot->state_ == ExtentSlot::State::kQueued) {
    for (auto it = sh.queue.begin(); it != sh.queue.end(); ++it) {
      if (*it == slot) {
        sh.queue.erase(it);
        break;
      }
    }
    slot->state_ = ExtentSlot::State::kIdle;
    return;
  }
  sh.work_done.wait(lock, [slot] { return slot->state_ != ExtentSlot::State::kRunning; });
}

void ExtentPrefetcher::work() {
  Shared& sh = *shared_;
  std::unique_lock<std::mutex> lock(sh.mu);
  for (;;) {
    sh.work_ready.wait(lock,
                       [&sh] { return sh.stopping || (!sh.queue.empty() && !sh.fork_pending); });
    if (sh.stopping) return;
    ExtentSlot* slot = sh.queue.front();
    sh.queue.pop_front();
    slot->state_ = ExtentSlot::State::kRunning;
    sh.reading = true;
    lock.unlock();
    slot->run();
    lock.lock();
    sh.reading = false;
    slot->state_ = ExtentSlot::State::kDone;
    sh.work_done.notify_all();
  }
}

}  // namespace nanotrace::reader
