#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds two consumers against it: one with
# find_package(nanotrace) and target nanotrace::nanotrace, one with pkg-config. Both must
# run and leave a readable trace.
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
mkdir "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
set(CMAKE_CXX_STANDARD 20)
find_package(nanotrace REQUIRED)
add_executable(consumer main.cc)
target_link_libraries(consumer PRIVATE nanotrace::nanotrace)
CMAKE
cat >"$work/consumer/main.cc" <<'CXX'
#include <nanotrace/nanotrace.hpp>
#include <nanotrace/reader.hpp>
#include <unistd.h>
int main() {
  for (int i = 0; i < 3; ++i) NANOTRACE(app, tick, "i={}", i);
  auto trace = nanotrace::Trace::open_pid(getpid());
  if (!trace.ok()) return 1;
  auto records = (*trace)->read_all();
  nanotrace::Record r;
  int n = 0;
  while (records->next(&r)) ++n;
  return n == 3 ? 0 : 2;
}
CXX
cmake -S "$work/consumer" -B "$work/consumer/b" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer/b" >/dev/null
"$work/consumer/b/consumer"
g++ -std=c++20 "$work/consumer/main.cc" -o "$work/pc_consumer" \
  $(PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig" pkg-config --cflags --libs nanotrace)
"$work/pc_consumer"
test -x "$work/prefix/bin/nanotrace"
echo "install test: find_package and pkg-config consumers ran"
