// Unit tests of detail::utf8_cut, the writer's UTF-8-safe cut of long string fields: a cut
// never ends inside a character, and keeps as many bytes as it can.
#include "nanotrace/detail/utf8_cut.hpp"

#include <gtest/gtest.h>

#include <string>

#include "base/utf8.hpp"
#include "nanotrace/abi.hpp"

namespace nanotrace {
namespace {

using detail::utf8_cut;

constexpr std::size_t cut(const char* s, std::size_t n, std::size_t max) {
  return utf8_cut(s, n, max);
}
static_assert(cut("abc", 3, 63) == 3);
static_assert(cut("abcdef", 6, 4) == 4);
static_assert(cut("ab\xe2\x82\xac", 5, 3) == 2);  // inside the euro sign
static_assert(cut("ab\xe2\x82\xac", 5, 4) == 2);
static_assert(cut("ab\xe2\x82\xac", 5, 5) == 5);
static_assert(cut("ab\xe2\x82\xac"
                  "d",
                  6, 5) == 5);                      // just after it
static_assert(cut("\xf0\x9f\x98\x80", 4, 3) == 0);  // inside an emoji, from its start
static_assert(cut("a\xc3\xa9", 3, 2) == 1);
static_assert(cut("\x80\x80\x80\x80\x80", 5, 4) == 4);  // ill-formed: cut where asked
static_assert(cut("a\xe2\x82"
                  "b",
                  4, 3) == 3);  // a truncated character stays as is

TEST(Utf8CutTest, LongStringsStayValidAndKeepTheMostBytes) {
  const std::string pieces[] = {"a", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "z"};
  uint64_t x = 88172645463325252ull;
  for (int round = 0; round < 20000; ++round) {
    std::string s;
    while (s.size() < abi::kMaxStringBytes + 8) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      s += pieces[x % 5];
    }
    std::size_t max = abi::kMaxStringBytes - (round % 8);
    std::size_t n = utf8_cut(s.data(), s.size(), max);
    ASSERT_LE(n, max);
    EXPECT_TRUE(utf8::is_valid(s.substr(0, n))) << s << " cut at " << n;
    // No longer prefix within max is valid: at most three bytes of one character dropped.
    for (std::size_t k = n + 1; k <= max; ++k) EXPECT_FALSE(utf8::is_valid(s.substr(0, k)));
    EXPECT_GE(n + 3, max);
  }
}

}  // namespace
}  // namespace nanotrace
