// Unit tests of the compile-time side of tracepoints and of in-process recording: format
// parsing, field type mapping, tick expansion, and a round trip through this process's own
// segment.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "nanotrace/control.hpp"
#include "nanotrace/nanotrace.hpp"
#include "nanotrace/reader.hpp"

namespace nanotrace {
namespace {

using abi::FieldType;

TEST(FormatTest, CountsNamedPlaceholders) {
  static_assert(detail::count_fields("") == 0);
  static_assert(detail::count_fields("req={} len={}") == 2);
  static_assert(detail::count_fields("submit req={}, path={}") == 2);
  static_assert(detail::count_fields("{}") == -1);     // unnamed
  static_assert(detail::count_fields("x= {}") == -1);  // space before placeholder
  static_assert(detail::count_fields("a={") == -1);    // unmatched
  static_assert(detail::count_fields("a=}") == -1);
  static_assert(detail::count_fields("1a={}") == -1);  // name starts with a digit
  EXPECT_TRUE(detail::valid_identifier("io"));
  EXPECT_FALSE(detail::valid_identifier("9io"));
  EXPECT_FALSE(detail::valid_identifier("a_name_that_is_far_too_long_for_a_group"));
}

TEST(FieldTypeTest, MapsCppTypes) {
  enum class Small : uint8_t { kA };
  static_assert(detail::field_type_of<int>() == FieldType::kI32);
  static_assert(detail::field_type_of<long>() == FieldType::kI64);
  static_assert(detail::field_type_of<unsigned char>() == FieldType::kU8);
  static_assert(detail::field_type_of<uint64_t>() == FieldType::kU64);
  static_assert(detail::field_type_of<float>() == FieldType::kF32);
  static_assert(detail::field_type_of<double>() == FieldType::kF64);
  static_assert(detail::field_type_of<bool>() == FieldType::kBool);
  static_assert(detail::field_type_of<Small>() == FieldType::kU8);
  static_assert(detail::field_type_of<const char*>() == FieldType::kString);
  static_assert(detail::field_type_of<std::string>() == FieldType::kString);
  static_assert(detail::field_type_of<std::string_view>() == FieldType::kString);
  static_assert(detail::field_type_of<char[6]>() == FieldType::kString);
  static_assert(detail::field_type_of<void*>() == FieldType::kPointer);
  SUCCEED();
}

TEST(TicksTest, ExpandsAroundTheBlockBase) {
  uint64_t base = (uint64_t{5} << 48) + 1000;
  EXPECT_EQ(abi::expand_ticks(base, 1500), base + 500);
  EXPECT_EQ(abi::expand_ticks(base, 900), base - 100);  // slightly earlier: migration
  // Across a 48-bit wrap.
  uint64_t near_wrap = (uint64_t{5} << 48) + abi::kTsc48Mask - 10;
  EXPECT_EQ(abi::expand_ticks(near_wrap, 20), near_wrap + 31);
}

// Calls check on every record of `event` in this process's own segment; returns how many.
template <class Check>
int check_records_of(const std::string& event, Check check) {
  auto trace = Trace::open_pid(getpid());
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  if (!trace.ok()) return 0;
  auto source = (*trace)->read_all();
  Record r;
  int n = 0;
  while (source->next(&r)) {
    if (r.event->full_name() != event) continue;
    ++n;
    check(r);
  }
  return n;
}

TEST(RecordTest, RoundTripsEveryFieldTypeThroughOwnSegment) {
  std::string long_text(100, 'x');
  enum class Color : int16_t { kRed = -3 };
  int local = 0;
  NANOTRACE(unit, types, "i8={} u16={} i32={} u64={} f={} d={} b={} s={} sv={} long={} e={} p={}",
            int8_t{-8}, uint16_t{65535}, -123456, uint64_t{1} << 63, 1.5f, -2.25, true, "hello",
            std::string_view("view"), long_text, Color::kRed, &local);
  const int found = check_records_of("unit:types", [&](const Record& r) {
    ASSERT_EQ(r.field_count, 12u);
    EXPECT_EQ(r.values[0].as_int(), -8);
    EXPECT_EQ(r.values[1].bits, 65535u);
    EXPECT_EQ(r.values[2].as_int(), -123456);
    EXPECT_EQ(r.values[3].bits, uint64_t{1} << 63);
    EXPECT_DOUBLE_EQ(r.values[4].as_double(), 1.5);
    EXPECT_DOUBLE_EQ(r.values[5].as_double(), -2.25);
    EXPECT_EQ(r.values[6].bits, 1u);
    EXPECT_EQ(r.values[7].text, "hello");
    EXPECT_EQ(r.values[8].text, "view");
    EXPECT_EQ(r.values[9].text, std::string(abi::kMaxStringBytes, 'x'));  // truncated
    EXPECT_EQ(r.values[10].as_int(), -3);
    EXPECT_EQ(r.values[11].bits, reinterpret_cast<uintptr_t>(&local));
    EXPECT_EQ(r.event->fields[7].name, "s");
    EXPECT_EQ(r.event->fields[9].type, FieldType::kString);
    EXPECT_EQ(format_fields(r).substr(0, 22), "i8=-8 u16=65535 i32=-1");
  });
  EXPECT_GE(found, 1);
}

// Char arrays are read up to their end at most: an unterminated buffer keeps its bytes and
// nothing beyond (the byte after it here is not NUL), an empty literal stays empty, and a
// long buffer is cut as any long string is, never inside a character.
TEST(RecordTest, CharArrayFieldsStopAtTheirEnd) {
  struct {
    char unterminated[5];
    char after[3];
  } packed = {{'a', 'b', 'c', 'd', 'e'}, {'X', 'Y', 'Z'}};
  char long_buffer[100] = {};
  std::string utf8_text(abi::kMaxStringBytes - 1, 'y');
  utf8_text += "\xc3\xa9";  // a two-byte character across the cut
  std::memcpy(long_buffer, utf8_text.data(), utf8_text.size());
  NANOTRACE(unit, arrays, "unterminated={} empty={} long={}", packed.unterminated, "", long_buffer);
  const int found = check_records_of("unit:arrays", [&](const Record& r) {
    ASSERT_EQ(r.field_count, 3u);
    EXPECT_EQ(r.values[0].text, "abcde");
    EXPECT_EQ(r.values[1].text, "");
    EXPECT_EQ(r.values[2].text, std::string(abi::kMaxStringBytes - 1, 'y'));
  });
  EXPECT_GE(found, 1);
}

TEST(RecordTest, DisabledGroupRecordsNothingAndGuardFollows) {
  auto emit = [](int v) { NANOTRACE(gated, ev, "v={}", v); };
  auto count = [] {
    auto trace = Trace::open_pid(getpid());
    EXPECT_TRUE(trace.ok());
    auto source = (*trace)->read_all();
    Record r;
    int n = 0;
    while (source->next(&r)) n += r.event->full_name() == "gated:ev";
    return n;
  };
  emit(1);
  bool guard_on = NANOTRACE_ENABLED(gated);
  EXPECT_TRUE(guard_on);
  ASSERT_TRUE(set_group_enabled("gated", false).ok());
  emit(2);
  EXPECT_FALSE(NANOTRACE_ENABLED(gated));
  EXPECT_EQ(count(), 1);
  ASSERT_TRUE(set_group_enabled("gated", true).ok());
  emit(3);
  EXPECT_EQ(count(), 2);
  EXPECT_EQ(set_group_enabled("no_such_group", true).code(), StatusCode::kNotFound);
}

TEST(RecordTest, EventsAreListedBeforeTheyFire) {
  if (getpid() == 0) {  // never true, but the compiler cannot drop the call site
    NANOTRACE(unit, never_fired, "x={}", 1);
  }
  auto trace = Trace::open_pid(getpid());
  ASSERT_TRUE(trace.ok());
  bool listed = false;
  for (const EventInfo& e : (*trace)->events()) {
    if (e.full_name() == "unit:never_fired") {
      listed = true;
      EXPECT_EQ(e.fields.size(), 1u);
      EXPECT_NE(e.file.find("fields_test.cc"), std::string::npos);
      EXPECT_GT(e.line, 0u);
    }
  }
  EXPECT_TRUE(listed);
}

}  // namespace
}  // namespace nanotrace
