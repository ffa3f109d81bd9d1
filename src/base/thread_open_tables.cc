// Each writer thread's own table of the operations it began (see thread_open_tables.hpp).
#include "base/thread_open_tables.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

namespace nanotrace::pairing {
namespace {

// How many times a reader looks again at an entry its owner rewrote meanwhile.
constexpr int kRereads = 64;

}  // namespace

ThreadOpenTables::ThreadOpenTables(uint32_t threads) {
  threads = std::min(threads, kThreads);
  void* p = mmap(nullptr, size_t{threads} * sizeof(Table), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return;
  tables_ = static_cast<Table*>(p);
  threads_ = threads;
}

ThreadOpenTables::~ThreadOpenTables() {
  if (tables_ != nullptr) munmap(tables_, bytes());
}

void ThreadOpenTables::clear() {
  // The tables in use only, zeroed in place: given back instead, each would fault its pages
  // in again on the next begin and end (a resume and the next slow pair: +1-2 us to the
  // freeze), and one never used still costs no memory.
  //
  // A table in use stays marked so: its thread marks it on its first begin only (a count of
  // 0), and a thread inside a begin meanwhile, which read its count before the clear, stores
  // it after it, not 0. Cleared whole, that table was then left out of every scan and every
  // other thread's end for as long as the trigger stayed armed: its stuck operations never named.
  const uint32_t n = used();
  for (uint32_t t = 0; t < n; ++t) {
    Table& table = tables_[t];
    if (table.in_use.load(std::memory_order_relaxed) == 0) continue;
    table.begun.store(0, std::memory_order_relaxed);
    table.crossed.store(0, std::memory_order_relaxed);
    std::memset(static_cast<void*>(table.entries), 0, sizeof(table.entries));
    std::memset(static_cast<void*>(table.closed), 0, sizeof(table.closed));
  }
}

void ThreadOpenTables::release_pages() {
  if (tables_ != nullptr) madvise(tables_, bytes(), MADV_DONTNEED);
}

void ThreadOpenTables::note_in_use(uint32_t t) {
  tables_[t].in_use.store(1, std::memory_order_release);
  uint32_t used = used_.load(std::memory_order_relaxed);
  while (used < t + 1 && !used_.compare_exchange_weak(used, t + 1, std::memory_order_acq_rel)) {
  }
}

bool ThreadOpenTables::read(const Table& table, uint32_t i, OpenOp* op, uint64_t* closed) {
  const Entry& e = table.entries[i];
  for (int attempt = 0; attempt < kRereads; ++attempt) {
    const uint64_t word = e.word.load(std::memory_order_acquire);
    if (word <= 1) return false;
    *op = {e.key.load(std::memory_order_relaxed), word, e.where.load(std::memory_order_relaxed),
           e.tid.load(std::memory_order_relaxed)};
    *closed = table.closed[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    // Begin words are unique: the same one means the same operation throughout (the owner
    // clears the word before it rewrites an entry).
    if (e.word.load(std::memory_order_relaxed) == word) return *closed != word;
  }
  return false;  // rewritten on every look: whatever was there is gone
}

bool ThreadOpenTables::end_other(uint32_t t, uint64_t key, OpenOp* begun) {
  const uint32_t n = used();
  const uint32_t i = entry_of(key);
  for (uint32_t u = 0; u < n; ++u) {
    if (u == t) continue;
    Table& table = tables_[u];
    if (table.in_use.load(std::memory_order_acquire) == 0) continue;
    for (int attempt = 0; attempt < kRereads; ++attempt) {
      OpenOp op;
      uint64_t closed;
      if (!read(table, i, &op, &closed) || op.key != key) break;
      // The begin word closed: an owner that rewrote the entry meanwhile wrote another word,
      // which this leaves open.
      if (!table.closed[i].compare_exchange_strong(closed, op.begin_word,
                                                   std::memory_order_acq_rel)) {
        continue;  // another thread closed it, or one before it: look again
      }
      table.crossed.fetch_add(1, std::memory_order_relaxed);
      *begun = op;
      return true;
    }
  }
  return false;
}

bool ThreadOpenTables::get(size_t index, OpenOp* op) const {
  if (index >= size_t{threads_} * kEntries) return false;
  uint64_t closed;
  return read(tables_[index / kEntries], static_cast<uint32_t>(index % kEntries), op, &closed);
}

bool ThreadOpenTables::mark_reported(size_t index, const OpenOp& op) {
  if (index >= size_t{threads_} * kEntries) return false;
  Entry& e = tables_[index / kEntries].entries[index % kEntries];
  uint64_t where = op.where;
  // A where names one record (its thread's slot and number): unchanged means the same
  // operation.
  return e.where.compare_exchange_strong(where, op.where | OpenOp::kReported,
                                         std::memory_order_acq_rel);
}

}  // namespace nanotrace::pairing
