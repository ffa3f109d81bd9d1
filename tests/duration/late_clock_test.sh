#!/bin/bash
# Duration triggers on a machine that has been up for days: a record's first word holds only
# the low 48 bits of its clock value, and CLOCK_MONOTONIC passes 2^48 ns after 78 hours (a
# 2 GHz TSC after 39). The duration runtime and record tests run in a time namespace whose
# monotonic and boot clocks are 80 hours ahead, with nanotrace on that clock
# (NANOTRACE_CLOCK=monotonic):
# a slow pair, a stuck operation and the relative threshold must behave as on a fresh machine.
# (Comparing a 48-bit stamp with the full clock made every open operation look stuck at once.)
#
# Usage: late_clock_test.sh BIN_DIR   (root: unshare --time)
set -u
BIN=$1
fail() { echo "FAIL: $*"; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (a time namespace)"
AHEAD=$((80 * 3600))
# The namespace's clock, in seconds: it must be past 2^48 ns (281,475 s) for the test to mean
# anything.
late=$(unshare --time --monotonic $AHEAD --boottime $AHEAD --fork cat /proc/uptime 2>/dev/null | cut -d. -f1)
[ -n "$late" ] || skip "this kernel or unshare has no time namespaces"
[ "$late" -gt 281475 ] || fail "the namespace's clock reads $late s, not past 2^48 ns"
unshare --time --monotonic $AHEAD --boottime $AHEAD --fork env NANOTRACE_CLOCK=monotonic \
  "$BIN/duration_runtime_test" --gtest_brief=1 || fail "duration tests on a clock past 2^48 ns"
echo "ok: duration triggers on a clock past 2^48 ns ($late s)"
