// Unit tests of trigger constants: integers compare exactly as 64-bit values against signed
// and unsigned fields, decimals as doubles, and constants out of range for the field are
// refused when the expression is bound to the event.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "nanotrace/trigger.hpp"

namespace nanotrace {
namespace {

FieldValue integer(abi::FieldType type, uint64_t bits) {
  FieldValue v;
  v.type = type;
  v.bits = bits;
  return v;
}

FieldValue real(double d) {
  FieldValue v;
  v.type = abi::FieldType::kF64;
  std::memcpy(&v.bits, &d, 8);
  return v;
}

// Parses and binds "t:e x<op>constant" against one field of this type.
Result<std::pair<Trigger, std::vector<uint32_t>>> bound(const std::string& condition,
                                                        abi::FieldType type) {
  auto t = Trigger::parse("t:e " + condition);
  if (!t.ok()) return t.status();
  auto index = t->bind({"x"}, {type});
  if (!index.ok()) return index.status();
  return std::make_pair(std::move(*t), std::move(*index));
}

bool matches(const std::string& condition, const FieldValue& v) {
  auto b = bound(condition, v.type);
  EXPECT_TRUE(b.ok()) << condition << ": " << b.status().message();
  return b.ok() && b->first.matches(b->second, &v);
}

TEST(TriggerConstantTest, IntegersAboveTwoToThe53AreExact) {
  auto u64 = abi::FieldType::kU64;
  EXPECT_TRUE(matches("x==9007199254740993", integer(u64, 9007199254740993ull)));
  EXPECT_FALSE(matches("x==9007199254740993", integer(u64, 9007199254740992ull)));
  EXPECT_FALSE(matches("x==9007199254740993", integer(u64, 9007199254740994ull)));
  EXPECT_TRUE(matches("x==18446744073709551614", integer(u64, 18446744073709551614ull)));
  EXPECT_FALSE(matches("x==18446744073709551614", integer(u64, 18446744073709551598ull)));
  EXPECT_FALSE(matches("x==18446744073709551614", integer(u64, 18446744073709551615ull)));
  EXPECT_TRUE(matches("x>18446744073709551614", integer(u64, 18446744073709551615ull)));
  EXPECT_FALSE(matches("x>18446744073709551614", integer(u64, 18446744073709551614ull)));
  EXPECT_TRUE(matches("x==0xffffffffffffffff", integer(u64, ~uint64_t{0})));
  EXPECT_TRUE(matches("x>=0", integer(u64, 0)));

  auto i64 = abi::FieldType::kI64;
  auto bits = [](int64_t v) { return static_cast<uint64_t>(v); };
  EXPECT_TRUE(matches("x==9007199254740993", integer(i64, bits(9007199254740993))));
  EXPECT_FALSE(matches("x==9007199254740993", integer(i64, bits(9007199254740992))));
  EXPECT_TRUE(matches("x==-9007199254740993", integer(i64, bits(-9007199254740993))));
  EXPECT_FALSE(matches("x==-9007199254740993", integer(i64, bits(-9007199254740992))));
  EXPECT_TRUE(matches("x==-9223372036854775808", integer(i64, bits(INT64_MIN))));
  EXPECT_TRUE(matches("x==9223372036854775807", integer(i64, bits(INT64_MAX))));
  EXPECT_FALSE(matches("x<9223372036854775807", integer(i64, bits(INT64_MAX))));
  EXPECT_TRUE(matches("x<-5", integer(i64, bits(-6))));
  EXPECT_FALSE(matches("x<-5", integer(i64, bits(-5))));
  EXPECT_TRUE(matches("x>-1", integer(abi::FieldType::kI32, bits(0))));
  EXPECT_TRUE(matches("x==true", integer(abi::FieldType::kBool, 1)));
}

TEST(TriggerConstantTest, FloatsCompareAsDoubles) {
  EXPECT_TRUE(matches("x>2.5", real(2.75)));
  EXPECT_FALSE(matches("x>2.5", real(2.5)));
  EXPECT_TRUE(matches("x==2", real(2.0)));
  EXPECT_TRUE(matches("x<-1e300", real(-1e301)));
  EXPECT_TRUE(matches("x>=1.5", integer(abi::FieldType::kU32, 2)));
  EXPECT_FALSE(matches("x>=1.5", integer(abi::FieldType::kU32, 1)));
}

void expect_refused(const std::string& condition, abi::FieldType type, const std::string& why) {
  auto b = bound(condition, type);
  ASSERT_FALSE(b.ok()) << condition << " was accepted";
  EXPECT_NE(b.status().message().find(why), std::string::npos) << b.status().message();
  EXPECT_EQ(b.status().message().find('\n'), std::string::npos);
}

TEST(TriggerConstantTest, OutOfRangeConstantsAreRefused) {
  auto u64 = abi::FieldType::kU64;
  auto i64 = abi::FieldType::kI64;
  expect_refused("x==18446744073709551616", u64, "out of range");
  expect_refused("x==0x10000000000000000", u64, "out of range");
  expect_refused("x>99999999999999999999999", i64, "out of range");
  expect_refused("x>-9223372036854775809", i64, "out of range");
  expect_refused("x==9223372036854775808", i64, "out of range for field 'x'");
  expect_refused("x>-1", u64, "unsigned");
  expect_refused("x<-5", abi::FieldType::kU8, "unsigned");
  expect_refused("x>1e999", abi::FieldType::kF64, "out of range");
  // Accepted: in range for the field's type, or compared as text with a string field.
  EXPECT_TRUE(bound("x==99999999999999999999999", abi::FieldType::kString).ok());
  EXPECT_TRUE(bound("x==9223372036854775808", u64).ok());
  EXPECT_TRUE(bound("x>-0", u64).ok());
  EXPECT_TRUE(bound("x>-9223372036854775808", i64).ok());
  EXPECT_TRUE(bound("x>-5.5", abi::FieldType::kF64).ok());
}

// A number is the whole value as written: strtod stops at a NUL byte, which an expression
// from a fleet message can hold, and the rest must not be ignored.
TEST(TriggerConstantTest, ANumberIsTheWholeText) {
  auto t = Trigger::parse(std::string("t:e x<1\0junk", 13));
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->conditions[0].is_number);
  EXPECT_FALSE(t->bind({"x"}, {abi::FieldType::kU64}).ok());
}

// A window beyond 64 bits of nanoseconds is refused, not wrapped to a short one.
TEST(TriggerConstantTest, WindowsThatDoNotFitAreRefused) {
  uint64_t events = 0, ns = 0;
  EXPECT_TRUE(Trigger::parse_window("18446744073s", &events, &ns));
  EXPECT_EQ(ns, 18446744073000000000ull);
  EXPECT_FALSE(Trigger::parse_window("18446744074s", &events, &ns));
  EXPECT_FALSE(Trigger::parse_window("20000000000s", &events, &ns));
  EXPECT_FALSE(Trigger::parse_window("999999999999999999ms", &events, &ns));
  EXPECT_TRUE(Trigger::parse_window("999999999999999999ns", &events, &ns));
  EXPECT_EQ(ns, 999999999999999999ull);
  EXPECT_TRUE(Trigger::parse_window("999999999999999999", &events, &ns));
  EXPECT_EQ(events, 999999999999999999ull);
  EXPECT_EQ(ns, 0u);
}

}  // namespace
}  // namespace nanotrace
