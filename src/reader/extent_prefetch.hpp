// Read-ahead for trace files: one background thread reads, checks and decompresses the next
// DATA extent of each thread stream while the reader decodes the current one, so the copy
// out of the page cache, the checksum and zstd run beside the decoding instead of before it.
// Internal header.
//
// A stream owns an ExtentSlot and asks for one extent at a time (load); take() waits for it
// and hands over its bytes. The prefetcher holds at most a fixed budget of extra buffers:
// a stream that gets no share (try_join) reads its extents itself, as before. In a child
// forked meanwhile (Python's multiprocessing), reads are done in place.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>

#include "nanotrace/status.hpp"
#include "reader/trace_file.hpp"

namespace nanotrace::reader {

class ExtentPrefetcher;

// One stream's extent in flight: filled by the prefetcher's thread, handed to the stream.
class ExtentSlot {
 public:
  ExtentSlot() = default;
  ExtentSlot(const ExtentSlot&) = delete;
  ExtentSlot& operator=(const ExtentSlot&) = delete;
  ~ExtentSlot() { leave(); }

  // Takes a share of prefetcher's buffer budget; false (and no read-ahead) if none is left.
  bool try_join(std::shared_ptr<ExtentPrefetcher> prefetcher);
  // Asks for extent e of file (the slot must not be loading already).
  void load(const TraceFile& file, const Extent& e);
  // True if the slot is loading (or has loaded) the extent at `offset`.
  bool holds(uint64_t offset) const { return pending_ && extent_.offset == offset; }
  // Waits for the extent asked for; swaps its bytes into *raw. Its Status is read_extent's.
  Status take(ChunkBuffer* raw);
  // Cancels what is in flight and gives the budget share back.
  void leave();

 private:
  friend class ExtentPrefetcher;
  enum class State { kIdle, kQueued, kRunning, kDone };
  // Reads the extent into raw_ (on the worker, or in place if there is no worker).
  void run();

  std::shared_ptr<ExtentPrefetcher> prefetcher_;
  const TraceFile* file_ = nullptr;
  Extent extent_{};
  bool pending_ = false;        // load() was called and take() not yet
  bool queued_ = false;         // ... and the worker has (or had) the read
  State state_ = State::kIdle;  // guarded by the prefetcher's mutex
  // The worker's from submit() until the state is kDone; the stream's otherwise.
  ChunkBuffer raw_, scratch_;
  Status status_;
  std::exception_ptr failure_;
};

class ExtentPrefetcher {
 public:
  struct Shared;  // its lock, queue and worker (defined in the .cc)

  // budget_slots: how many streams may read ahead at once (each holds one extra chunk).
  explicit ExtentPrefetcher(uint32_t budget_slots);
  ExtentPrefetcher(const ExtentPrefetcher&) = delete;
  ExtentPrefetcher& operator=(const ExtentPrefetcher&) = delete;
  ~ExtentPrefetcher();

 private:
  friend class ExtentSlot;
  // True in a child forked from the process that made it: its worker is not there. Slots
  // then read in place and touch nothing shared.
  bool forked() const;
  bool reserve();
  void release();
  // Queues slot's read; false if no worker thread could be started (then the caller reads).
  bool submit(ExtentSlot* slot);
  // Waits until slot's extent is read.
  void wait(ExtentSlot* slot);
  // Takes slot out of the queue, or waits for the read in progress.
  void cancel(ExtentSlot* slot);
  void work();
  // pthread_atfork handlers: fork waits for every prefetcher's read in progress (see .cc).
  static void before_fork();
  static void after_fork(bool in_child);

  const int owner_pid_;
  // The lock, queue and worker: left alone (leaked) in a forked child, whose copies of the
  // condition variables may have waiters (the worker) it does not have.
  Shared* shared_;
};

}  // namespace nanotrace::reader
