#!/usr/bin/env bash
# Installs the build into a temporary prefix, then builds consumers against it as a new user
# would: with find_package(nanotrace) and nothing but target_link_libraries(app
# nanotrace::nanotrace) (no CMAKE_CXX_STANDARD: the target carries C++20), with
# -Wall -Wextra -Werror; with the static runtime; and with pkg-config. Each consumer must
# run against the shared runtime it was linked with and leave a segment that the installed
# `nanotrace` reads back. A reading consumer links nanotrace::reader.
set -euo pipefail
build=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(find "$prefix" -name libnanotrace.so -printf '%h\n' | head -1)
test -n "$libdir"
nanotrace="$prefix/bin/nanotrace"
test -x "$nanotrace"
# The network commands run in the installed nanotrace-net (tools/nanotrace/network_commands.hpp).
test -x "$prefix/libexec/nanotrace/nanotrace-net" || { echo "no nanotrace-net installed"; exit 1; }
printf 'token = t\n' >"$work/creds"
chmod 600 "$work/creds"
if out=$("$nanotrace" fleet status --broker nats://127.0.0.1:1 --credentials "$work/creds" \
  --timeout-ms 100 2>&1); then
  echo "fleet status with no broker succeeded"; exit 1
fi
echo "$out" | grep -q "cannot connect to nats://127.0.0.1:1" ||
  { echo "the installed nanotrace did not run nanotrace-net: $out"; exit 1; }

mkdir "$work/consumer"
cat >"$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
find_package(nanotrace REQUIRED)
add_compile_options(-Wall -Wextra -Werror)
add_executable(app main.cc)
target_link_libraries(app nanotrace::nanotrace)
add_executable(app_static main.cc)
target_link_libraries(app_static nanotrace::nanotrace_static)
add_executable(reader reader.cc)
target_link_libraries(reader nanotrace::reader)
CMAKE
cat >"$work/consumer/main.cc" <<'CXX'
#include <nanotrace/control.hpp>
#include <nanotrace/nanotrace.hpp>

#include <cstdio>

int main() {
  for (int i = 0; i < 3; ++i) NANOTRACE(app, tick, "i={}", i);
  std::puts(nanotrace::segment_path().c_str());
  return 0;
}
CXX
cat >"$work/consumer/reader.cc" <<'CXX'
#include <nanotrace/reader.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 1;
  auto trace = nanotrace::Trace::open(argv[1]);
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", trace.status().message().c_str());
    return 1;
  }
  auto records = (*trace)->read_all();
  nanotrace::Record r;
  int n = 0;
  while (records->next(&r)) ++n;
  std::printf("%d\n", n);
  return 0;
}
CXX

# check_segment PROGRAM: runs it with NANOTRACE_KEEP=1; its segment must hold 3 app:tick.
check_segment() {
  local seg
  seg=$(NANOTRACE_KEEP=1 "$@")
  test -f "$seg"
  local n
  n=$("$nanotrace" dump "$seg" --json | grep -c '"app:tick"')
  rm -f "$seg"
  if [ "$n" != 3 ]; then
    echo "install test: $* wrote $n app:tick records, expected 3" >&2
    exit 1
  fi
}

cmake -S "$work/consumer" -B "$work/consumer/b" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
if ! cmake --build "$work/consumer/b" >"$work/build.log" 2>&1; then
  cat "$work/build.log" >&2
  exit 1
fi
readelf -d "$work/consumer/b/app" | grep -q 'NEEDED.*libnanotrace.so'
check_segment "$work/consumer/b/app"
check_segment "$work/consumer/b/app_static"
seg=$(NANOTRACE_KEEP=1 "$work/consumer/b/app")
test "$("$work/consumer/b/reader" "$seg")" = 3
rm -f "$seg"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
g++ -Wall -Wextra -Werror "$work/consumer/main.cc" -o "$work/pc_app" \
  $(pkg-config --cflags --libs nanotrace) -Wl,-rpath,"$libdir"
check_segment "$work/pc_app"
g++ -Wall -Wextra -Werror "$work/consumer/main.cc" -o "$work/pc_app_static" \
  $(pkg-config --cflags --libs nanotrace-static)
check_segment "$work/pc_app_static"
g++ -Wall -Wextra -Werror "$work/consumer/reader.cc" -o "$work/pc_reader" \
  $(pkg-config --cflags --libs nanotrace-reader)
seg=$(NANOTRACE_KEEP=1 "$work/pc_app")
test "$("$work/pc_reader" "$seg")" = 3
rm -f "$seg"

# The Python module (when the build has it), where the Debian python3 looks for that prefix.
if [ -d "$build/python/nanotrace" ]; then
  pydir=$(find "$prefix" -type d -path '*/dist-packages/nanotrace' | head -1)
  test -n "$pydir"
  seg=$(NANOTRACE_KEEP=1 "$work/consumer/b/app")
  n=$(cd "$work" && PYTHONPATH=$(dirname "$pydir") /usr/bin/python3 -c \
    "import nanotrace, sys; print(len(nanotrace.open(sys.argv[1]).events('app:tick')['time_ns']))" \
    "$seg")
  rm -f "$seg"
  test "$n" = 3
  echo "install test: the installed Python module read the segment"
fi
echo "install test: find_package and pkg-config consumers (shared, static, reader) ran"
