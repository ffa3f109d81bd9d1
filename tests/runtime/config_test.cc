// Unit tests of runtime configuration parsing.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "runtime/runtime.hpp"

namespace nanotrace::runtime {
namespace {

TEST(ConfigTest, GroupSpecs) {
  EXPECT_TRUE(group_enabled_by_spec("all", "io"));
  EXPECT_TRUE(group_enabled_by_spec("io,sched", "sched"));
  EXPECT_FALSE(group_enabled_by_spec("io,sched", "debug"));
  EXPECT_FALSE(group_enabled_by_spec("all,-debug", "debug"));
  EXPECT_TRUE(group_enabled_by_spec("all,-debug", "io"));
  EXPECT_FALSE(group_enabled_by_spec("none", "io"));
  EXPECT_FALSE(group_enabled_by_spec("", "io"));
}

TEST(ConfigTest, EnvironmentAndOptions) {
  setenv("NANOTRACE_MODE", "discard", 1);
  setenv("NANOTRACE_BUFFER", "100K", 1);
  setenv("NANOTRACE_GROUPS", "io", 1);
  Config c = config_from_environment();
  EXPECT_EQ(c.mode, Mode::kDiscard);
  EXPECT_EQ(c.ring_size, 128u << 10);  // rounded up to a power of two
  EXPECT_EQ(c.groups, "io");
  setenv("NANOTRACE_MODE", "sideways", 1);  // ignored with a warning
  setenv("NANOTRACE_BUFFER", "12Q", 1);
  Config d = config_from_environment();
  EXPECT_EQ(d.mode, Mode::kOverwrite);
  EXPECT_EQ(d.ring_size, 1u << 20);
  unsetenv("NANOTRACE_MODE");
  unsetenv("NANOTRACE_BUFFER");
  unsetenv("NANOTRACE_GROUPS");

  // A block's longest life: a time; 0, inf or nonsense keep the default (2^46 ticks).
  for (const char* bad : {"0", "inf", "soon"}) {
    setenv("NANOTRACE_BLOCK_MAX_AGE", bad, 1);
    EXPECT_EQ(config_from_environment().block_max_age_ns, 0u) << bad;
  }
  setenv("NANOTRACE_BLOCK_MAX_AGE", "50ms", 1);
  EXPECT_EQ(config_from_environment().block_max_age_ns, 50'000'000u);
  unsetenv("NANOTRACE_BLOCK_MAX_AGE");

  Options o;
  o.buffer_bytes = 0;
  EXPECT_FALSE(apply_options(o, &d).ok());
  o.buffer_bytes = 3u << 20;
  o.mode = Mode::kBlock;
  EXPECT_TRUE(apply_options(o, &d).ok());
  EXPECT_EQ(d.ring_size, 4u << 20);
  EXPECT_EQ(d.mode, Mode::kBlock);
}

}  // namespace
}  // namespace nanotrace::runtime
