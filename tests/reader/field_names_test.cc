// Enum fields: value names declared with NANOTRACE_ENUM reach the call-site descriptor at
// compile time, and the reader parses them back from the stored field name, dropping a
// malformed list whole (every byte of a segment is untrusted).
#include "reader/field_names.hpp"

#include <gtest/gtest.h>

#include <nanotrace/nanotrace.hpp>

namespace enum_test {
enum class Color : int8_t { kRed = -1, kGreen = 0, kBlue = 7 };
NANOTRACE_ENUM(Color, {Color::kRed, "red"}, {Color::kGreen, "green"}, {Color::kBlue, "blue"});
enum class Plain : uint8_t { kA, kB };  // no names
}  // namespace enum_test

namespace nanotrace {
namespace {

TEST(EnumFieldsTest, DescriptorCarriesTheNamesOfNamedEnumsOnly) {
  using Table = detail::EnumTable<int, enum_test::Color, enum_test::Plain>;
  EXPECT_TRUE(Table::kAny);
  EXPECT_EQ(Table::kFields[0].count, 0u);
  ASSERT_EQ(Table::kFields[1].count, 3u);
  EXPECT_EQ(Table::kFields[1].names[0].value, -1);
  EXPECT_STREQ(Table::kFields[1].names[2].name, "blue");
  EXPECT_EQ(Table::kFields[1].names[2].value, 7);
  EXPECT_EQ(Table::kFields[2].count, 0u);
  EXPECT_FALSE((detail::EnumTable<int, enum_test::Plain>::kAny));
  constexpr detail::Site site = detail::SiteBuilder<detail::TypeList<int, enum_test::Color>>::make(
      "g", "e", "a={} c={}", "f", 1);
  ASSERT_NE(site.enums, nullptr);
  EXPECT_EQ(site.enums[1].count, 3u);
  EXPECT_EQ(site.types[1], abi::FieldType::kI8);
}

TEST(EnumFieldsTest, ReaderParsesValueNames) {
  FieldInfo f = reader::field_info("color:-1=red,0=green,7=dark blue", abi::FieldType::kI8);
  EXPECT_EQ(f.name, "color");
  ASSERT_EQ(f.value_names.size(), 3u);
  EXPECT_EQ(f.value_names[0].value, -1);
  EXPECT_EQ(f.value_names[2].name, "dark blue");
  ASSERT_NE(f.name_of(static_cast<uint64_t>(int64_t{-1})), nullptr);
  EXPECT_EQ(*f.name_of(static_cast<uint64_t>(int64_t{-1})), "red");
  EXPECT_EQ(f.name_of(5), nullptr);  // a value without a name prints as its number

  FieldInfo plain = reader::field_info("len", abi::FieldType::kU32);
  EXPECT_EQ(plain.name, "len");
  EXPECT_TRUE(plain.value_names.empty());
}

TEST(EnumFieldsTest, MalformedValueNamesAreDroppedWhole) {
  for (const char* bad : {"x:", "x:1", "x:1=", "x:=a", "x:a=b", "x:1=a,,2=b", "x:1=a,2",
                          "x:99999999999999999999=a", "x:1x=a"}) {
    FieldInfo f = reader::field_info(bad, abi::FieldType::kU8);
    EXPECT_EQ(f.name, "x") << bad;
    EXPECT_TRUE(f.value_names.empty()) << bad;
  }
  // Names only apply to integers.
  EXPECT_TRUE(reader::field_info("s:1=a", abi::FieldType::kString).value_names.empty());
  EXPECT_TRUE(reader::field_info("d:1=a", abi::FieldType::kF64).value_names.empty());
}

}  // namespace
}  // namespace nanotrace
