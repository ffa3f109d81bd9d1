# Targets of the export benchmark (scripts/export-bench.sh): gen_trace writes a large trace,
# export_bench times the reader and `nanotrace export` on it. Included from
# tests/export/CMakeLists.txt (no Google Benchmark needed).
if(NOT TARGET gen_trace)
  add_executable(gen_trace ${CMAKE_CURRENT_LIST_DIR}/gen_trace.cc)
  target_link_libraries(gen_trace PRIVATE nanotrace::nanotrace)
  add_executable(export_bench ${CMAKE_CURRENT_LIST_DIR}/export_bench.cc)
  target_link_libraries(export_bench PRIVATE nanotrace::reader fmt::fmt nlohmann_json::nlohmann_json)
endif()
