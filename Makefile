# One-command entry points.
#   make / make build  the release build in build/ (no root, no apt: the build packages must be
#                      there, `make deps-build` installs them)
#   make check         after an edit: the release build and every test but the system and fuzz
#                      tests (tests/CMakeLists.txt says which are which)
#   make test          CI: installs what is missing, then every phase below, each timed
#   make demo          installs the DEMO group, builds the demo's programs only, runs scripts/demo.sh
#   make deps          installs the three package groups (Debian 12, as root)
#   make doc-test      runs the how-to guides' commands (scripts/doc-test.py) against build/
# Build trees: build/ (release), build-asan/ (ASan+UBSan), build-tsan/ (ThreadSanitizer); the
# sanitizer builds build only the tests they run (target test-binaries).

# Debian 12 packages in three groups. A new package goes in the first group whose command
# needs it:
#   BUILD: what `cmake -B build && cmake --build build` compiles and links against (compilers,
#          cmake, -dev libraries and headers, including optional parts such as the Python
#          module's). A new library the code uses (libnats-dev, libcurl4-openssl-dev, ...).
#   TEST:  what the tests, the fuzzers, the demo and `make format-check` run: programs and
#          servers a test starts (chromium, fio, nats-server, prometheus, clickhouse-server...).
#   BENCH: what only `make bench` measures against (other tracers, strace).
# DEMO is not a fourth list but what `make demo` needs of the others: the build packages
# without the test, benchmark and Python ones (a demo-only build/ is configured without the
# tests and benchmarks), and the programs scripts/demo.sh runs.
BUILD_PACKAGES := build-essential cmake pkg-config liburing-dev libcli11-dev libfmt-dev \
                  nlohmann-json3-dev libzstd-dev libgtest-dev libgmock-dev libbenchmark-dev \
                  libtracefs-dev libtraceevent-dev python3-dev pybind11-dev \
                  libcurl4-openssl-dev libnats-dev libmicrohttpd-dev libncurses-dev
TEST_PACKAGES := clang clang-format zstd babeltrace2 util-linux procps chromium python3 \
                 python3-numpy python3-pandas python3-pytest fio sqlite3 chrony \
                 clickhouse-server clickhouse-client nats-server prometheus dmsetup tmux
BENCH_PACKAGES := trace-cmd strace python3-bt2 liblttng-ust-dev lttng-tools
DEMO_PACKAGES := $(filter-out libgtest-dev libgmock-dev libbenchmark-dev python3-dev \
                   pybind11-dev,$(BUILD_PACKAGES)) babeltrace2 util-linux
# What scripts/demo.sh runs (the nanotrace tool builds the interposer with it).
DEMO_TARGETS := nanotrace-cli iograph-cli
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
# Unity builds (CMake's UNITY_BUILD: a target's sources compiled a few at a time as one file)
# halve a fresh build: the headers (CLI11, nlohmann-json, fmt) and their inline functions are
# parsed and compiled once per batch instead of once per file. A developer who edits one file
# and rebuilds at once may prefer UNITY=OFF (one file recompiled instead of its batch).
UNITY ?= ON
CONFIGURE_FLAGS = -DCMAKE_UNITY_BUILD=$(UNITY) $(CMAKE_FLAGS)
# What the suite's phases exclude: `make check` the system and fuzz tests, the release phase
# of `make test` the fuzz tests (their own phase), the ASan phase what it does not run.
CHECK_EXCLUDE := system|fuzz
ASAN_EXCLUDE := no-asan|system|fuzz|bench-smoke

.PHONY: all build check test test-release test-system fuzz build-asan test-asan build-tsan \
        test-tsan demo demo-check bench format format-check install clean \
        deps deps-build deps-test deps-bench deps-demo setup doc-test

all: build

# deps-GROUP: installs the group's missing packages (apt-get update first).
deps: deps-build deps-test deps-bench
deps-build: ; @./scripts/install-packages.sh $(BUILD_PACKAGES)
deps-test: ; @./scripts/install-packages.sh $(TEST_PACKAGES)
deps-bench: ; @./scripts/install-packages.sh $(BENCH_PACKAGES)
deps-demo: ; @./scripts/install-packages.sh $(DEMO_PACKAGES)
setup: deps

# The tests and benchmarks are switched on explicitly: `make demo` may have configured build/
# without them.
build:
	cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DNANOTRACE_BUILD_TESTS=ON \
	  -DNANOTRACE_BUILD_BENCH=ON $(CONFIGURE_FLAGS) >/dev/null
	cmake --build build -j$(JOBS)

check: build
	cd build && ctest --output-on-failure -j$(JOBS) -LE '$(CHECK_EXCLUDE)'

# CI: scripts/ci-phases.sh runs the phases in order, prints each one's time at the end and
# stops at the first that fails.
test:
	@./scripts/ci-phases.sh "setup=make deps-build deps-test" \
	  "format=make format-check" "build=make build" "test-release=make test-release" \
	  "fuzz=make fuzz" "build-asan=make build-asan" "test-asan=make test-asan" \
	  "build-tsan=make build-tsan" "test-tsan=make test-tsan" "demo=make demo-check"

# Every release test but the fuzzers: `make check`'s and the system tests.
test-release: build
	cd build && ctest --output-on-failure -j$(JOBS) -LE fuzz

test-system: build
	cd build && ctest --output-on-failure -j$(JOBS) -L system

# The fuzzers, built by their ctest fixture, each for a fixed number of inputs.
fuzz: build
	cd build && ctest --output-on-failure -j$(JOBS) -L fuzz

# -g1 (line tables: enough for the sanitizers' reports) compiles 12-15 % quicker than -g.
ASAN_FLAGS := -O0 -g1
build-asan:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DNANOTRACE_SANITIZE=ON -DNANOTRACE_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_DEBUG="$(ASAN_FLAGS)" -DCMAKE_C_FLAGS_DEBUG="$(ASAN_FLAGS)" $(CONFIGURE_FLAGS) >/dev/null
	cmake --build build-asan -j$(JOBS) --target test-binaries

# -O1 -g1 (line tables, enough for ThreadSanitizer's reports): -O2 -g took about 1.7 times
# as long to compile.
TSAN_FLAGS := -O1 -g1 -DNDEBUG
build-tsan:
	cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNANOTRACE_TSAN=ON -DNANOTRACE_BUILD_BENCH=OFF \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$(TSAN_FLAGS)" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$(TSAN_FLAGS)" $(CONFIGURE_FLAGS) >/dev/null
	cmake --build build-tsan -j$(JOBS) --target test-binaries

# The unit, hostile-input and CLI tests under ASan+UBSan (the build registers only those; the
# label filter keeps a test added by hand out too). Leaks inside Debian's libraries are
# suppressed by tests/sanitizers/lsan.supp (each line says why).
test-asan: build-asan
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp ctest --output-on-failure -j$(JOBS) -LE '$(ASAN_EXCLUDE)'

# The concurrency tests (label tsan). die_after_fork=0: the tests fork (then exec) from
# threaded processes, which TSan refuses by default; what a fork child may do is checked by
# the release fork tests.
test-tsan: build-tsan
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 die_after_fork=0" ctest --output-on-failure -j$(JOBS) -L tsan

# A build/ configured before keeps its configuration; a new one is configured without the
# tests and benchmarks, whose packages the demo does not install.
demo: deps-demo
	@[ -f build/CMakeCache.txt ] || cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
	  -DNANOTRACE_BUILD_TESTS=OFF -DNANOTRACE_BUILD_BENCH=OFF $(CONFIGURE_FLAGS) >/dev/null
	cmake --build build -j$(JOBS) --target $(DEMO_TARGETS)
	./scripts/demo.sh

doc-test: build
	/usr/bin/python3 scripts/doc-test.py --build build

# The demo must not fail by accident: three runs in a row, their output in
# build/demo-check.log, printed only when a run fails.
demo-check: build
	@log=build/demo-check.log; : >$$log; \
	for run in 1 2 3; do \
	  echo "== demo run $$run ==" >>$$log; \
	  if ! ./scripts/demo.sh >>$$log 2>&1; then \
	    cat $$log; echo "demo-check: run $$run of 3 failed (log: $$log)"; exit 1; \
	  fi; \
	done; \
	echo "demo: 3 runs ok"

bench: deps build
	./scripts/bench.sh

format:
	git ls-files --cached --others --exclude-standard '*.cc' '*.cpp' '*.hpp' '*.h' | xargs clang-format -i

format-check:
	@bad=$$(git ls-files --cached --others --exclude-standard '*.cc' '*.cpp' '*.hpp' '*.h' | xargs clang-format --dry-run 2>&1 | grep -c warning); \
	if [ "$$bad" != "0" ]; then echo "clang-format: $$bad issues; run 'make format'"; \
	  git ls-files --cached --others --exclude-standard '*.cc' '*.cpp' '*.hpp' '*.h' | xargs clang-format --dry-run 2>&1 | grep warning | head; exit 1; fi; \
	echo "format: ok"

install: build
	cmake --install build

clean:
	rm -rf build build-asan build-tsan
