// Each writer thread's own small table of the operations it began, in front of the shared
// OpenTable (trigger_pairing.hpp). Most operations end on the thread that began them; such a
// pair is opened and closed here with plain stores, where the shared table takes a
// compare-and-swap for each and sweeps its lines through the cache (perf: the pairing's
// largest part at 2 M pairs/s).
//
// Only the owning thread writes its table's entries. Another thread that ends an operation
// found here closes it with a compare-and-swap on the entry's `closed` word (the begin word
// it closed), so the owner never needs a locked instruction, and the control thread reads
// every table to age the operations (each entry read twice, like a sequence lock). When an
// entry is taken by another open operation, the begin goes to the shared table; when a
// thread's operations often end on other threads, its begins go to the shared table from
// then on, where those threads find them without looking here.
//
// What the shared table does and this does not: a begin of a key open elsewhere (in the
// shared table, or another thread's table) does not replace it; the older one stays open
// until it ends, ages or the trigger starts afresh. And an end racing with another end of
// the same key on another thread may pair the one begin twice (the shared table counts one
// of them unmatched). Memory: kEntries entries a thread, for the first kThreads threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "base/trigger_pairing.hpp"

namespace nanotrace::pairing {

class ThreadOpenTables {
 public:
  static constexpr uint32_t kEntries = 256;  // per thread: 10 KiB, a third of a 32 KiB L1
  static constexpr uint32_t kThreads = 1024;

  enum class Begin {
    kInserted,
    kReplaced,  // this thread's operation of the same key ended unmatched (in *dropped)
    kNotHere,   // the key's entry holds another open operation, or the table is off: the
                // caller opens it in the shared table
  };

  // threads: tables (at most kThreads; threads numbered from 0). The memory is mapped here
  // (zero pages until a thread uses its table) and given back by the destructor.
  explicit ThreadOpenTables(uint32_t threads);
  ~ThreadOpenTables();
  ThreadOpenTables(const ThreadOpenTables&) = delete;
  ThreadOpenTables& operator=(const ThreadOpenTables&) = delete;

  bool ok() const { return tables_ != nullptr; }
  uint32_t threads() const { return threads_; }
  // Tables that may hold operations: those below the highest one used.
  uint32_t used() const { return used_.load(std::memory_order_acquire); }
  size_t capacity() const { return size_t{used()} * kEntries; }

  // Thread `t` opens op in its own table (op.begin_word > 1). REQUIRES: the caller is thread t.
  Begin begin(uint32_t t, const OpenOp& op, OpenOp* dropped);
  // Thread `t` closes `key` in its own table: true if it was open there (then in *begun).
  // REQUIRES: the caller is thread t.
  bool end_own(uint32_t t, uint64_t key, OpenOp* begun);
  // Closes `key` in another thread's table than `t`'s (t may be >= threads()): true if one
  // was open (then in *begun). A probe of each table used: for ends the shared table did not
  // pair.
  bool end_other(uint32_t t, uint64_t key, OpenOp* begun);

  // Calls visit(index, op) for each operation open, each a consistent copy; index:
  // t * kEntries + entry. Runs beside the others.
  template <class Visit>
  void for_each(Visit&& visit) const;
  bool get(size_t index, OpenOp* op) const;
  // Marks the operation at `index` reported, if it is still `op`. True if marked.
  bool mark_reported(size_t index, const OpenOp& op);
  // Empties every table (a resume). A thread may still be in a begin of the round before
  // (its record's pairing straddles the freeze): its stores after the clear may leave that one
  // operation open, but never hide its table from the scans.
  void clear();
  // Gives the pages back; any later use finds empty tables.
  void release_pages();

 private:
  struct Entry {
    std::atomic<uint64_t> word;  // the begin word, or 0: free
    std::atomic<uint64_t> key;
    std::atomic<uint64_t> where;
    std::atomic<uint64_t> tid;
  };
  friend struct ThreadOpenTablesTesting;  // tests: a begin's count stored across a clear
  struct alignas(64) Table {
    std::atomic<uint32_t> in_use;   // set once by the owner, kept by clear()
    std::atomic<uint64_t> begun;    // the owner's begins here
    std::atomic<uint64_t> crossed;  // of them, closed by other threads
    alignas(64) Entry entries[kEntries];
    // Per entry: the begin word of the last operation another thread closed there. The entry
    // is open while its word is neither 0 nor this.
    std::atomic<uint64_t> closed[kEntries];
  };

  // A table whose operations ended on other threads this often (one in eight, after a few)
  // sends its thread's begins to the shared table, where the threads that end them look
  // first.
  static bool crossing_often(uint64_t crossed, uint64_t begun) {
    return crossed >= 4 && crossed * 8 > begun;
  }
  static uint32_t entry_of(uint64_t key) {
    // Consecutive keys take consecutive entries; the higher bits are folded in so that
    // aligned pointers spread. Added, not xor'ed: a run of up to ~250 consecutive keys then
    // never shares an entry (with xor, one boundary in 128 of the low byte turned a run
    // across it into collisions: bursts of begins sent to the shared table).
    return static_cast<uint32_t>(key + (key >> 8) + (key >> 16) + (key >> 32)) & (kEntries - 1);
  }
  // A consistent copy of the entry, if an operation is open there.
  static bool read(const Table& table, uint32_t i, OpenOp* op, uint64_t* closed);
  void note_in_use(uint32_t t);
  size_t bytes() const { return size_t{threads_} * sizeof(Table); }

  Table* tables_ = nullptr;
  uint32_t threads_ = 0;
  std::atomic<uint32_t> used_{0};
};

// The writer's part, inline: it runs on every begin and end record of the trigger's events.
inline ThreadOpenTables::Begin ThreadOpenTables::begin(uint32_t t, const OpenOp& op,
                                                       OpenOp* dropped) {
  Table& table = tables_[t];
  // Every begin of this thread counts, those that go to the shared table too: a table full of
  // operations waiting for other threads must not turn itself off by taking no more.
  const uint64_t begun = table.begun.load(std::memory_order_relaxed);
  table.begun.store(begun + 1, std::memory_order_relaxed);
  if (begun == 0) note_in_use(t);  // its first begin (after a clear: already marked)
  if (crossing_often(table.crossed.load(std::memory_order_relaxed), begun)) return Begin::kNotHere;
  const uint32_t i = entry_of(op.key);
  Entry& e = table.entries[i];
  // Ours: only this thread writes the entry, so it is read without a second look.
  const uint64_t word = e.word.load(std::memory_order_relaxed);
  Begin result = Begin::kInserted;
  if (word > 1 && table.closed[i].load(std::memory_order_acquire) != word) {
    if (e.key.load(std::memory_order_relaxed) != op.key) return Begin::kNotHere;
    *dropped = {op.key, word, e.where.load(std::memory_order_relaxed),
                e.tid.load(std::memory_order_relaxed)};
    result = Begin::kReplaced;
  }
  if (word != 0) {
    // Readers that see the fields change see the word change first.
    e.word.store(0, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
  }
  e.key.store(op.key, std::memory_order_relaxed);
  e.where.store(op.where, std::memory_order_relaxed);
  e.tid.store(op.tid, std::memory_order_relaxed);
  e.word.store(op.begin_word, std::memory_order_release);
  return result;
}

inline bool ThreadOpenTables::end_own(uint32_t t, uint64_t key, OpenOp* begun) {
  Table& table = tables_[t];
  const uint32_t i = entry_of(key);
  Entry& e = table.entries[i];
  const uint64_t word = e.word.load(std::memory_order_relaxed);
  if (word <= 1 || e.key.load(std::memory_order_relaxed) != key) return false;
  if (table.closed[i].load(std::memory_order_acquire) == word) return false;  // ended elsewhere
  *begun = {key, word, e.where.load(std::memory_order_relaxed),
            e.tid.load(std::memory_order_relaxed)};
  e.word.store(0, std::memory_order_release);
  return true;
}

template <class Visit>
void ThreadOpenTables::for_each(Visit&& visit) const {
  const uint32_t n = used();
  for (uint32_t t = 0; t < n; ++t) {
    const Table& table = tables_[t];
    if (table.in_use.load(std::memory_order_acquire) == 0) continue;
    for (uint32_t i = 0; i < kEntries; ++i) {
      OpenOp op;
      uint64_t closed;
      if (read(table, i, &op, &closed)) visit(size_t{t} * kEntries + i, op);
    }
  }
}

}  // namespace nanotrace::pairing
