# libFuzzer targets for the fleet's messages (included by CMakeLists.txt, with its clang++
# objects and flags): one binary, fuzz_fleet, and one fuzz test per message type, each for a
# fixed number of inputs from its own seed corpus (fuzz_fleet_corpus/<type>).
set(NANOTRACE_FUZZ_RUNS_FLEET 10000 CACHE STRING "inputs each fleet message fuzz test runs")
set(_fleet_sources
  ${_src}/fleet/message_fields.cc ${_src}/fleet/message_answers.cc
  ${_src}/fleet/message_manifest.cc ${_src}/fleet/message_status.cc ${_src}/fleet/protocol.cc
  ${_src}/fleet/spool.cc ${_src}/base/utf8.cc ${_src}/base/status.cc)
set(_fleet_objects "")
foreach(source ${_fleet_sources})
  file(RELATIVE_PATH name ${_src} ${source})
  string(REPLACE "/" "_" name ${name})
  nanotrace_fuzz_object(obj ${source} fleet_${name})
  list(APPEND _fleet_objects ${obj})
endforeach()
nanotrace_fuzz_object(main ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_fleet.cc fuzz_fleet)
set(_out ${CMAKE_RUNTIME_OUTPUT_DIRECTORY}/fuzz_fleet)
add_custom_command(OUTPUT ${_out}
  COMMAND ${NANOTRACE_CLANGXX} -fsanitize=fuzzer,address,undefined ${main} ${_fleet_objects}
          -lzstd -lfmt -o ${_out}
  DEPENDS ${main} ${_fleet_objects}
  COMMENT "clang++ libFuzzer: fuzz_fleet" VERBATIM)
list(APPEND _fuzzers ${_out})
foreach(type freeze command fetch_request fetch_answer manifest status rounds snapshot processes
        resume)
  add_test(NAME fuzz_fleet_${type}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_fleet_run.sh ${_out} ${type}
            ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_fleet_corpus/${type}
            ${CMAKE_CURRENT_BINARY_DIR}/work-fleet-${type} ${NANOTRACE_FUZZ_RUNS_FLEET})
  set_tests_properties(fuzz_fleet_${type} PROPERTIES LABELS fuzz TIMEOUT 300
                       FIXTURES_REQUIRED fuzzers)
endforeach()
