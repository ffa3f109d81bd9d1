// A test's prerequisite that the machine may lack (root, tracefs, a loop device, an installed
// program): without it the test is skipped with the reason, so that a developer's run shows
// what it did not check. On CI (CI=true, as root) every prerequisite is there by design, so a
// missing one fails the test instead of letting a skip pass for a check.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace nanotrace::testing {

// True where a missing prerequisite is a failure: CI=true, as root.
inline bool prerequisites_required() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::strcmp(ci, "true") == 0 && ::geteuid() == 0;
}

}  // namespace nanotrace::testing

// Skips the test (with REASON) when CONDITION is false, or fails it on CI as root. Use it in
// the test body or in SetUp(), like GTEST_SKIP().
#define NANOTRACE_REQUIRE(condition, reason)                         \
  do {                                                               \
    if (!(condition)) {                                              \
      if (::nanotrace::testing::prerequisites_required()) {          \
        GTEST_FAIL() << "missing on CI (CI=true, root): " << reason; \
      }                                                              \
      GTEST_SKIP() << reason;                                        \
    }                                                                \
  } while (0)
