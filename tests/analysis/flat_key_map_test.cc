// FlatKeyMap against std::unordered_map under random insertions, lookups and erasures:
// keys that crowd a few slots (erasure must keep every probe run whole, also where it wraps
// around the end of the array), key 0 and the largest key, growth, and clear().
#include "analysis/flat_key_map.hpp"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace nanotrace::analysis {
namespace {

void expect_same(FlatKeyMap<uint64_t>& m, const std::unordered_map<uint64_t, uint64_t>& ref) {
  ASSERT_EQ(m.size(), ref.size());
  size_t seen = 0;
  m.for_each([&](uint64_t key, uint64_t value) {
    ++seen;
    auto it = ref.find(key);
    ASSERT_NE(it, ref.end()) << key;
    EXPECT_EQ(it->second, value) << key;
  });
  EXPECT_EQ(seen, ref.size());
  for (const auto& [key, value] : ref) {
    uint64_t* v = m.find(key);
    ASSERT_NE(v, nullptr) << key;
    EXPECT_EQ(*v, value);
  }
}

TEST(FlatKeyMapTest, MatchesUnorderedMapUnderRandomChurn) {
  std::mt19937_64 rng(42);
  for (uint64_t key_range : {uint64_t{8}, uint64_t{100}, uint64_t{5000}}) {
    FlatKeyMap<uint64_t> m;
    std::unordered_map<uint64_t, uint64_t> ref;
    for (int step = 0; step < 200000; ++step) {
      uint64_t key = rng() % key_range;
      if (key == 1) key = ~uint64_t{0};
      const uint64_t value = rng();
      switch (rng() % 4) {
        case 0:
        case 1: {
          auto [v, inserted] = m.try_emplace(key, value);
          auto [it, ref_inserted] = ref.try_emplace(key, value);
          ASSERT_EQ(inserted, ref_inserted);
          ASSERT_EQ(*v, it->second);
          break;
        }
        case 2: {
          uint64_t got = 7;
          const bool found = m.take(key, &got);
          auto it = ref.find(key);
          ASSERT_EQ(found, it != ref.end());
          if (found) {
            EXPECT_EQ(got, it->second);
            ref.erase(it);
          } else {
            EXPECT_EQ(got, 7u);
          }
          break;
        }
        default: {
          uint64_t* v = m.find(key);
          auto it = ref.find(key);
          ASSERT_EQ(v != nullptr, it != ref.end());
          if (v != nullptr) {
            EXPECT_EQ(*v, it->second);
          }
        }
      }
      if (step % 20000 == 0) expect_same(m, ref);
    }
    expect_same(m, ref);
    m.clear();
    ref.clear();
    expect_same(m, ref);
    EXPECT_EQ(m.find(0), nullptr);
  }
}

TEST(FlatKeyMapTest, ManyKeysThenEveryErasure) {
  FlatKeyMap<uint64_t> m;
  for (uint64_t k = 0; k < 100000; ++k) ASSERT_TRUE(m.try_emplace(k * 4096, k).second);
  EXPECT_EQ(m.size(), 100000u);
  for (uint64_t k = 0; k < 100000; k += 2) ASSERT_TRUE(m.erase(k * 4096));
  for (uint64_t k = 0; k < 100000; ++k) {
    uint64_t* v = m.find(k * 4096);
    if (k % 2 == 0) {
      EXPECT_EQ(v, nullptr);
    } else {
      ASSERT_NE(v, nullptr);
      EXPECT_EQ(*v, k);
    }
  }
  for (uint64_t k = 1; k < 100000; k += 2) ASSERT_TRUE(m.erase(k * 4096));
  EXPECT_TRUE(m.empty());
  EXPECT_FALSE(m.erase(4096));
}

}  // namespace
}  // namespace nanotrace::analysis
