// The operations in flight of one pair rule in one process, for a live view: begins whose end
// has not been seen yet, by key, with what is needed to show them later (the begin record's
// bytes, its thread), oldest first.
//
// A live reader reads each thread's ring in turn, so an end can be read before the begin it
// closes (the begin's thread was read just before that begin was published). An end without
// an open begin is therefore kept for one more pass: a begin of its key that comes earlier in
// time then pairs with it instead of staying open forever.
//
// Memory is bounded: at most `capacity` operations are kept; past it the oldest is dropped
// and counted (a key that never closes cannot grow the table without end).
//
// Thread safety: none; a table belongs to one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "analysis/flat_key_map.hpp"

namespace nanotrace::live {

// A key: the 8 bytes of a one-field scalar key, or the bytes of anything else.
struct OpKey {
  bool is_text = false;
  uint64_t bits = 0;
  std::string_view text;
};

struct OpenOperation {
  uint64_t begin_ticks = 0;
  // Where its details are during the pass that opened it (filled in at the end of the pass,
  // for those still open: most operations end within the pass they began in).
  uint32_t pass_thread = 0;
  uint64_t raw_at = 0;
  uint32_t raw_len = 0;
  uint32_t tid = 0;
  uint16_t event = 0;      // the begin record's event id
  uint64_t loss_mark = 0;  // the process's loss count when it began
  std::string thread;      // the thread's name
  std::string raw;         // the begin record's bytes (word0 and payload)
};

class OpenOperations {
 public:
  explicit OpenOperations(uint32_t capacity) : capacity_(capacity < 1 ? 1 : capacity) {}

  // A begin at begin_ticks. Returns the end ticks of the end read before it that it pairs
  // with (see above), or nullopt once it is open: then *slot is the operation to fill in
  // (its fields other than begin_ticks; valid until the next call).
  std::optional<uint64_t> begin(const OpKey& key, uint64_t begin_ticks, OpenOperation** slot);
  // An end at end_ticks. Returns the begin ticks of the operation it closes, or nullopt if
  // none is open (the end is kept for the next pass).
  std::optional<uint64_t> end(const OpKey& key, uint64_t end_ticks);

  // begin() in its three steps, for a reader that pairs a pass's own begins and ends itself
  // and opens only the begins left over: the end read before this begin that it pairs with,
  // if any (see above); then the operation open under the key is replaced, if any; then the
  // begin opens (past capacity the oldest is dropped; *slot as for begin()).
  std::optional<uint64_t> pair_with_kept(const OpKey& key, uint64_t begin_ticks) {
    // Most begins come after every end kept: no lookup.
    if (begin_ticks > kept_latest_[0] && begin_ticks > kept_latest_[1]) return std::nullopt;
    return take_kept(key, begin_ticks);
  }
  void replace(const OpKey& key);
  void open(const OpKey& key, uint64_t begin_ticks, OpenOperation** slot);
  // A begin replaced by a later one of its key before it was opened.
  void count_replaced() { ++replaced_; }
  // A pass over the rings ends: ends kept from the pass before that found no begin become
  // unmatched for good.
  void end_pass();

  // Calls f(operation) for each operation opened since the last call that is still open,
  // then forgets them.
  template <class F>
  void take_fresh(F&& f) {
    for (const auto& [index, serial] : fresh_) {
      if (slots_[index].serial == serial) f(slots_[index].op);
    }
    fresh_.clear();
  }

  size_t size() const { return live_; }
  // The oldest open operations, at most n, oldest first (by the order they began).
  std::vector<const OpenOperation*> oldest(size_t n);
  // Counts since the table was made:
  uint64_t dropped() const { return dropped_; }    // past capacity
  uint64_t replaced() const { return replaced_; }  // a begin of a key already open
  uint64_t unmatched_ends() const { return unmatched_ends_; }

 private:
  struct Slot {
    OpenOperation op;
    uint64_t serial = 0;  // 0: free
    bool is_text = false;
    uint64_t bits = 0;
    std::string text;
  };
  struct Kept {
    uint64_t end_ticks = 0;
  };
  std::optional<uint64_t> take_kept(const OpKey& key, uint64_t begin_ticks);
  uint32_t* find(const OpKey& key);
  void erase(uint32_t index);
  uint32_t allocate();
  void drop_oldest();
  void compact();

  uint32_t capacity_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  analysis::FlatKeyMap<uint32_t> by_bits_;
  std::unordered_map<std::string, uint32_t> by_text_;
  // (slot, serial) in the order operations began; stale entries are skipped and compacted.
  std::deque<std::pair<uint32_t, uint64_t>> order_;
  std::vector<std::pair<uint32_t, uint64_t>> fresh_;  // (slot, serial) opened since take_fresh
  uint64_t next_serial_ = 1;
  size_t live_ = 0;
  // Ends without a begin, this pass's and the last one's, and the latest end of each: a begin
  // after it pairs with none of them, and most begins are (no lookup for those).
  analysis::FlatKeyMap<Kept> kept_bits_[2];
  std::unordered_map<std::string, Kept> kept_text_[2];
  uint64_t kept_latest_[2] = {0, 0};
  uint64_t dropped_ = 0, replaced_ = 0, unmatched_ends_ = 0;
};

}  // namespace nanotrace::live
