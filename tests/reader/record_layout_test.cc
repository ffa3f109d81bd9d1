// The one record-sizing and decoding rule (nanotrace/detail/record_layout.hpp) against the
// writer's own encoding (detail/fields.hpp): records the runtime's store_field lays out are
// sized and decoded back exactly; the fast sizing shapes (fixed, one string, several strings)
// agree with the field-by-field decode on every layout and on hostile bytes; malformed
// records (a string length over 63, a record cut short, an unknown or guard event id) are
// refused by the reader's RecordSizer and decode_record alike.
#include "nanotrace/detail/record_layout.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "nanotrace/detail/fields.hpp"
#include "reader/record_walk.hpp"

namespace {

using nanotrace::abi::FieldType;
using nanotrace::abi::RecordLayout;

// A record written as the runtime writes one: word0 (event id 1), then each field.
template <class... A>
std::vector<uint8_t> encode(const A&... args) {
  std::vector<uint64_t> words(1 + nanotrace::abi::kMaxRecordBytes / 8, 0);
  words[0] = (uint64_t{12345} << 16) | 1;
  uint64_t* p = words.data() + 1;
  ((p = nanotrace::detail::store_field(p, args)), ...);
  const auto bytes =
      static_cast<size_t>(reinterpret_cast<uint8_t*>(p) - reinterpret_cast<uint8_t*>(words.data()));
  std::vector<uint8_t> out(bytes);
  std::memcpy(out.data(), words.data(), bytes);
  return out;
}

template <class... A>
RecordLayout layout_of() {
  const FieldType types[] = {nanotrace::detail::field_type_of<A>()..., FieldType::kNone};
  return RecordLayout(types, sizeof...(A));
}

struct Decoded {
  std::vector<uint64_t> scalars;
  std::vector<std::string> strings;
};

uint32_t decode(const RecordLayout& layout, const std::vector<uint8_t>& rec, Decoded* out,
                uint32_t limit) {
  return layout.decode(
      rec.data(), 0, limit, [&](uint32_t, uint64_t bits) { out->scalars.push_back(bits); },
      [&](uint32_t, std::string_view text) { out->strings.emplace_back(text); });
}

TEST(RecordLayoutTest, SizesAndDecodesWhatTheWriterWrote) {
  const std::string longest(100, 'z');  // kept: 63 bytes
  auto rec = encode(uint64_t{7}, "nvme0n1", int32_t{-3}, "", longest, 2.5, true);
  auto layout = layout_of<uint64_t, const char*, int32_t, const char*, std::string, double, bool>();
  ASSERT_TRUE(layout.valid());
  EXPECT_EQ(layout.fixed_size(), 0u);
  EXPECT_EQ(layout.field_count(), 7u);
  const auto n = static_cast<uint32_t>(rec.size());
  EXPECT_EQ(n, 8u + 8 + 8 + 8 + 8 + 64 + 8 + 8);
  EXPECT_EQ(layout.size(rec.data(), 0, n), n);
  Decoded d;
  EXPECT_EQ(decode(layout, rec, &d, n), n);
  EXPECT_EQ(d.scalars, (std::vector<uint64_t>{7, static_cast<uint64_t>(int64_t{-3}),
                                              0x4004000000000000ull, 1}));
  EXPECT_EQ(d.strings, (std::vector<std::string>{"nvme0n1", "", longest.substr(0, 63)}));
  std::vector<std::string> texts;
  EXPECT_EQ(layout.strings(rec.data(), 0, n, [&](std::string_view t) { texts.emplace_back(t); }),
            n);
  EXPECT_EQ(texts, d.strings);

  // The three sizing shapes.
  auto fixed = encode(uint32_t{1}, int8_t{-1});
  auto fixed_layout = layout_of<uint32_t, int8_t>();
  EXPECT_EQ(fixed_layout.fixed_size(), 24u);
  EXPECT_EQ(fixed_layout.size(fixed.data(), 0, 24), 24u);
  auto one = encode(uint64_t{1}, "abcdefgh", uint64_t{2});  // 8 bytes of text: a 16-byte slot
  auto one_layout = layout_of<uint64_t, const char*, uint64_t>();
  EXPECT_EQ(one.size(), 8u + 8 + 16 + 8);
  EXPECT_EQ(one_layout.size(one.data(), 0, static_cast<uint32_t>(one.size())), one.size());
}

TEST(RecordLayoutTest, RefusesMalformedRecords) {
  auto rec = encode(uint64_t{7}, "abc", "defg", uint16_t{9});
  auto layout = layout_of<uint64_t, const char*, const char*, uint16_t>();
  const auto n = static_cast<uint32_t>(rec.size());
  ASSERT_EQ(layout.size(rec.data(), 0, n), n);
  // Cut short anywhere: refused by both the sizing and the decode.
  for (uint32_t limit = 8; limit < n; ++limit) {
    Decoded d;
    EXPECT_EQ(layout.size(rec.data(), 0, limit), 0u) << limit;
    EXPECT_EQ(decode(layout, rec, &d, limit), 0u) << limit;
  }
  // A string length over kMaxStringBytes.
  rec[16] = nanotrace::abi::kMaxStringBytes + 1;
  Decoded d;
  EXPECT_EQ(layout.size(rec.data(), 0, n + 64), 0u);
  EXPECT_EQ(decode(layout, rec, &d, n), 0u);
  // No event: every record is malformed.
  EXPECT_EQ(RecordLayout().size(rec.data(), 0, n), 0u);
}

// The fast shapes are the field-by-field rule: on random layouts and random bytes (a fixed
// seed), size() and decode() always agree, malformed or not.
TEST(RecordLayoutTest, SizingShapesAgreeWithTheDecodeOnHostileBytes) {
  std::mt19937_64 rng(25);
  std::vector<uint8_t> buf(2048);
  uint64_t malformed = 0, valid = 0;
  for (int round = 0; round < 5000; ++round) {
    FieldType types[nanotrace::abi::kMaxFields];
    const auto count = static_cast<uint32_t>(rng() % (nanotrace::abi::kMaxFields + 1));
    for (uint32_t f = 0; f < count; ++f) {
      types[f] = rng() % 3 == 0 ? FieldType::kString : FieldType::kU64;
    }
    RecordLayout layout(types, count);
    for (size_t i = 0; i < 700; ++i)
      buf[i] = static_cast<uint8_t>(rng() % 80);  // lengths both sides of 63
    const auto offset = static_cast<uint32_t>(rng() % 64);
    const auto limit = static_cast<uint32_t>(offset + 8 + rng() % 600);
    const uint32_t size = layout.size(buf.data(), offset, limit);
    const uint32_t decoded = layout.decode(
        buf.data(), offset, limit, [](uint32_t, uint64_t) {}, [](uint32_t, std::string_view) {});
    ASSERT_EQ(size, decoded) << "round " << round;
    (size == 0 ? malformed : valid) += 1;
  }
  EXPECT_GT(malformed, 250u);  // both outcomes were exercised
  EXPECT_GT(valid, 250u);
}

// The reader's RecordSizer takes each event's layout and refuses ids that name no event.
TEST(RecordLayoutTest, RecordSizerRefusesUnknownAndGuardIds) {
  std::vector<nanotrace::EventInfo> events(2);
  events[0].id = 1;
  events[0].fields = {{"n", FieldType::kU64, {}}, {"s", FieldType::kString, {}}};
  const FieldType types[] = {FieldType::kU64, FieldType::kString};
  events[0].layout = RecordLayout(types, 2);
  events[1].id = 2;
  events[1].is_guard = true;
  nanotrace::reader::RecordSizer sizer(events);
  auto rec = encode(uint64_t{1}, "xy");
  const auto n = static_cast<uint32_t>(rec.size());
  EXPECT_EQ(sizer.size(rec.data(), 0, n), n);
  for (uint16_t id : {0, 2, 3, 999}) {
    std::memcpy(rec.data(), &id, 2);
    EXPECT_EQ(sizer.size(rec.data(), 0, n), 0u) << id;
  }
}

}  // namespace
