// OpenOperations: the table of operations in flight, its order of age and its bounds.
#include "live/open_operations.hpp"

#include <algorithm>

namespace nanotrace::live {

uint32_t* OpenOperations::find(const OpKey& key) {
  if (!key.is_text) return by_bits_.find(key.bits);
  auto it = by_text_.find(std::string(key.text));
  return it == by_text_.end() ? nullptr : &it->second;
}

void OpenOperations::erase(uint32_t index) {
  Slot& s = slots_[index];
  if (s.is_text) {
    by_text_.erase(s.text);
  } else {
    by_bits_.erase(s.bits);
  }
  s.serial = 0;
  free_.push_back(index);
  --live_;
}

uint32_t OpenOperations::allocate() {
  if (!free_.empty()) {
    uint32_t i = free_.back();
    free_.pop_back();
    return i;
  }
  slots_.emplace_back();
  return static_cast<uint32_t>(slots_.size() - 1);
}

void OpenOperations::drop_oldest() {
  while (!order_.empty()) {
    auto [index, serial] = order_.front();
    order_.pop_front();
    if (slots_[index].serial == serial) {
      erase(index);
      ++dropped_;
      return;
    }
  }
}

// Entries of closed operations stay in order_ until they reach its front; once they are
// most of it, it is rebuilt from the live ones.
void OpenOperations::compact() {
  if (order_.size() < 64 || order_.size() < 4 * live_) return;
  std::deque<std::pair<uint32_t, uint64_t>> kept;
  for (const auto& e : order_) {
    if (slots_[e.first].serial == e.second) kept.push_back(e);
  }
  order_.swap(kept);
}

std::optional<uint64_t> OpenOperations::take_kept(const OpKey& key, uint64_t begin_ticks) {
  for (int age = 0; age < 2; ++age) {
    if (begin_ticks > kept_latest_[age]) continue;
    if (key.is_text) {
      auto& kept = kept_text_[age];
      if (kept.empty()) continue;
      auto it = kept.find(std::string(key.text));
      if (it == kept.end() || it->second.end_ticks < begin_ticks) continue;
      const uint64_t end_ticks = it->second.end_ticks;
      kept.erase(it);
      return end_ticks;
    }
    auto& kept = kept_bits_[age];
    if (kept.empty()) continue;
    Kept* k = kept.find(key.bits);
    if (k == nullptr || k->end_ticks < begin_ticks) continue;
    const uint64_t end_ticks = k->end_ticks;
    kept.erase(key.bits);
    return end_ticks;
  }
  return std::nullopt;
}

std::optional<uint64_t> OpenOperations::begin(const OpKey& key, uint64_t begin_ticks,
                                              OpenOperation** slot) {
  if (auto paired = pair_with_kept(key, begin_ticks)) return paired;
  replace(key);
  open(key, begin_ticks, slot);
  return std::nullopt;
}

void OpenOperations::replace(const OpKey& key) {
  if (uint32_t* existing = find(key)) {
    // The earlier begin of this key never ended: it is replaced, as the interval matcher does.
    ++replaced_;
    erase(*existing);
  }
}

void OpenOperations::open(const OpKey& key, uint64_t begin_ticks, OpenOperation** slot) {
  if (live_ >= capacity_) drop_oldest();
  uint32_t index = allocate();
  Slot& s = slots_[index];
  s.serial = next_serial_++;
  s.is_text = key.is_text;
  s.bits = key.bits;
  if (key.is_text) {
    s.text.assign(key.text);
    by_text_.emplace(s.text, index);
  } else {
    by_bits_.try_emplace(key.bits, index);
  }
  s.op.begin_ticks = begin_ticks;
  order_.emplace_back(index, s.serial);
  fresh_.emplace_back(index, s.serial);
  ++live_;
  compact();
  *slot = &s.op;
}

std::optional<uint64_t> OpenOperations::end(const OpKey& key, uint64_t end_ticks) {
  if (uint32_t* found = find(key)) {
    const uint32_t index = *found;
    const uint64_t begin_ticks = slots_[index].op.begin_ticks;
    erase(index);
    return begin_ticks;
  }
  if (kept_bits_[0].size() + kept_text_[0].size() >= capacity_) {
    ++unmatched_ends_;  // more unpaired ends in one pass than operations kept: not waited for
  } else {
    // One end is kept per key, the latest: an earlier one of the key is unmatched for good
    // (a begin read later pairs with one end at most).
    bool fresh;
    if (key.is_text) {
      auto [it, inserted] = kept_text_[0].try_emplace(std::string(key.text), Kept{end_ticks});
      if (!inserted) it->second = Kept{end_ticks};
      fresh = inserted;
    } else {
      auto [kept, inserted] = kept_bits_[0].find_or_insert(key.bits);
      *kept = Kept{end_ticks};
      fresh = inserted;
    }
    if (!fresh) ++unmatched_ends_;
    kept_latest_[0] = std::max(kept_latest_[0], end_ticks);
  }
  return std::nullopt;
}

void OpenOperations::end_pass() {
  unmatched_ends_ += kept_bits_[1].size() + kept_text_[1].size();
  kept_bits_[1].clear();
  kept_text_[1].clear();
  std::swap(kept_bits_[0], kept_bits_[1]);
  std::swap(kept_text_[0], kept_text_[1]);
  kept_latest_[1] = kept_latest_[0];
  kept_latest_[0] = 0;
}

std::vector<const OpenOperation*> OpenOperations::oldest(size_t n) {
  while (!order_.empty() && slots_[order_.front().first].serial != order_.front().second) {
    order_.pop_front();
  }
  std::vector<const OpenOperation*> out;
  for (const auto& [index, serial] : order_) {
    if (out.size() >= n) break;
    if (slots_[index].serial == serial) out.push_back(&slots_[index].op);
  }
  return out;
}

}  // namespace nanotrace::live
