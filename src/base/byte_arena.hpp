// ByteArena: a growable byte buffer for a reader that copies many blocks and refers to them
// by offset until it is done with all of them (the live view copies every new block of a
// process in one pass, then reads its threads' records in time order). Unlike a
// std::vector<uint8_t>, bytes appended are not zeroed first: they are about to be copied
// over, and zeroing them doubled the memory traffic of a pass.
//
// Offsets stay valid across growth; pointers do not. Internal header. Thread safety: none.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>

namespace nanotrace {

class ByteArena {
 public:
  size_t size() const { return size_; }
  const uint8_t* data() const { return data_.get(); }

  // n more bytes at the end, uninitialized, for the caller to fill now. The pointer is valid
  // until the next append().
  uint8_t* append(size_t n) {
    if (n > capacity_ - size_) grow(size_ + n);
    uint8_t* p = data_.get() + size_;
    size_ += n;
    return p;
  }
  // Gives back the last n bytes appended (a copy that came up short).
  void shrink_by(size_t n) { size_ -= n < size_ ? n : size_; }
  // Empties it, keeping the memory.
  void clear() { size_ = 0; }

 private:
  void grow(size_t at_least) {
    size_t capacity = capacity_ < 4096 ? 4096 : capacity_;
    while (capacity < at_least) capacity *= 2;
    std::unique_ptr<uint8_t[]> bigger(new uint8_t[capacity]);  // not value-initialized
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace nanotrace
