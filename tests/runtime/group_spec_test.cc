// Unit tests of the group-list grammar shared by NANOTRACE_GROUPS, enable/disable, record
// --groups and iograph perf --trace.
#include "base/group_spec.hpp"

#include <gtest/gtest.h>

namespace nanotrace {
namespace {

const std::vector<std::string> kKnown = {"io", "sched", "debug"};

TEST(GroupSpecTest, ItemsApplyLeftToRight) {
  EXPECT_TRUE(group_spec_enables("all", "io"));
  EXPECT_TRUE(group_spec_enables("*", "debug"));
  EXPECT_TRUE(group_spec_enables("io,sched", "sched"));
  EXPECT_FALSE(group_spec_enables("io,sched", "debug"));
  EXPECT_FALSE(group_spec_enables("all,-debug", "debug"));
  EXPECT_TRUE(group_spec_enables("all,-debug", "io"));
  EXPECT_TRUE(group_spec_enables("all,-debug,debug", "debug"));
  EXPECT_FALSE(group_spec_enables("io,none", "io"));
  EXPECT_TRUE(group_spec_enables("none,io", "io"));
  EXPECT_FALSE(group_spec_enables("-all", "io"));
  EXPECT_FALSE(group_spec_enables("", "io"));
  EXPECT_TRUE(group_spec_enables(" io , - sched ", "io"));
  EXPECT_FALSE(group_spec_enables("all, -sched", "sched"));
  // A name that is a prefix of another selects only itself.
  EXPECT_FALSE(group_spec_enables("i", "io"));
}

TEST(GroupSpecTest, ValidationNamesTheUnknownGroupAndTheKnownOnes) {
  for (const char* good : {"all", "*", "none", "io", "io,sched", "all,-debug", "-io", " io "}) {
    EXPECT_TRUE(validate_group_spec(good, kKnown).ok()) << good;
  }
  Status s = validate_group_spec("io,nosuch", kKnown);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no group named 'nosuch' (groups: io, sched, debug)");
  // Negated, first of several, or the only one: the same text.
  EXPECT_EQ(validate_group_spec("all,-nosuch", kKnown).message(), s.message());
  EXPECT_EQ(validate_group_spec("nosuch,bad", kKnown).message(), s.message());
  EXPECT_EQ(validate_group_spec("nosuch", {}).message(),
            "no group named 'nosuch' (groups: none declared)");
}

TEST(GroupSpecTest, EmptyListsAndItemsAreRejected) {
  for (const char* empty : {"", " ", "-"}) {
    Status s = validate_group_spec(empty, kKnown);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << empty;
  }
  EXPECT_EQ(validate_group_spec("", kKnown).message(),
            "empty group list (expected e.g. all, io,sched or all,-debug)");
  EXPECT_EQ(validate_group_spec("io,,sched", kKnown).message(),
            "empty item in group list 'io,,sched' (expected e.g. all, io,sched or all,-debug)");
  EXPECT_FALSE(validate_group_spec("io,", kKnown).ok());
}

TEST(GroupSpecTest, SelectionKeepsTheOrderOfTheKnownGroups) {
  auto all_but_debug = groups_selected_by_spec("all,-debug", kKnown);
  ASSERT_TRUE(all_but_debug.ok());
  EXPECT_EQ(*all_but_debug, (std::vector<std::string>{"io", "sched"}));
  auto two = groups_selected_by_spec("debug,io", kKnown);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(*two, (std::vector<std::string>{"io", "debug"}));
  auto none = groups_selected_by_spec("none", kKnown);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto bad = groups_selected_by_spec("io,nosuch", kKnown);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "no group named 'nosuch' (groups: io, sched, debug)");
}

}  // namespace
}  // namespace nanotrace
