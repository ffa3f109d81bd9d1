# The ClickHouse answer fuzzer (fuzz_clickhouse_answer.cc), included by CMakeLists.txt after
# nanotrace_fuzz_object() is defined: its own objects (the parser, UTF-8, Status), linked into
# tests/fuzz's `fuzzers` target and run as the ctest test fuzz_clickhouse_answer for a fixed
# number of inputs (about 4 s of CPU on the CI machine).
set(NANOTRACE_FUZZ_RUNS_CLICKHOUSE 60000 CACHE STRING "inputs the ClickHouse answer fuzz test runs")
set(_ch_objects "")
foreach(source ${_src}/ship/clickhouse_answer.cc ${_src}/base/utf8.cc ${_src}/base/status.cc)
  file(RELATIVE_PATH name ${_src} ${source})
  string(REPLACE "/" "_" name "ch_${name}")
  nanotrace_fuzz_object(obj ${source} ${name})
  list(APPEND _ch_objects ${obj})
endforeach()
nanotrace_fuzz_object(_ch_main ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_clickhouse_answer.cc
                      fuzz_clickhouse_answer)
set(_ch_out ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/fuzz_clickhouse_answer)
add_custom_command(OUTPUT ${_ch_out}
  COMMAND ${NANOTRACE_CLANGXX} -fsanitize=fuzzer,address,undefined ${_ch_main} ${_ch_objects}
          -lfmt -o ${_ch_out}
  DEPENDS ${_ch_main} ${_ch_objects}
  COMMENT "clang++ libFuzzer: fuzz_clickhouse_answer" VERBATIM)
set_property(GLOBAL APPEND PROPERTY NANOTRACE_FUZZERS ${_ch_out})
add_test(NAME fuzz_clickhouse_answer
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_clickhouse_run.sh ${_ch_out}
          ${CMAKE_CURRENT_BINARY_DIR}/work-clickhouse ${NANOTRACE_FUZZ_RUNS_CLICKHOUSE})
set_tests_properties(fuzz_clickhouse_answer PROPERTIES LABELS fuzz TIMEOUT 300
                     FIXTURES_REQUIRED fuzzers)
