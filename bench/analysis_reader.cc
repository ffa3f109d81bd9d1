// The reader's part of the analysis benchmark (scripts/analysis-bench.sh): reads every record
// of a trace once, record by record (Trace::read_all, a Record each), as batches of columns
// (ColumnReader, 64 Ki rows a batch, its memory reused: the decoding alone) or into columns
// of the whole trace (read_columns: decoding and the memory it fills), and prints {"mode",
// "records", "seconds", "cpu_seconds"} as one JSON line. The times cover the read alone, from
// an open Trace.
//
//   analysis_reader --source SRC --mode records|batches|columns
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "nanotrace/columns.hpp"
#include "nanotrace/reader.hpp"

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of this process: on a shared machine, wall time also counts the waits for a CPU.
double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::string source, mode = "columns";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--source")) {
      source = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--mode")) {
      mode = argv[i + 1];
    }
  }
  if (source.empty() || (mode != "records" && mode != "batches" && mode != "columns")) {
    std::fprintf(stderr, "usage: analysis_reader --source SRC --mode records|batches|columns\n");
    return 2;
  }
  auto trace = nanotrace::Trace::open(source);
  if (!trace.ok()) {
    std::fprintf(stderr, "analysis_reader: %s\n", trace.status().message().c_str());
    return 1;
  }
  uint64_t records = 0, check = 0;
  double t0 = now_s(), c0 = cpu_s();
  if (mode == "records") {
    auto src = (*trace)->read_all();
    nanotrace::Record r;
    while (src->next(&r)) {
      ++records;
      check += r.field_count;
    }
  } else if (mode == "batches") {
    auto reader = nanotrace::ColumnReader::open(**trace, {});
    if (!reader.ok()) {
      std::fprintf(stderr, "analysis_reader: %s\n", reader.status().message().c_str());
      return 1;
    }
    nanotrace::ColumnSet batch;
    while ((*reader)->next(&batch, 64 << 10)) {
      records += batch.rows;
      for (const nanotrace::EventTable& t : batch.tables) check += t.fields.size() * t.rows();
    }
  } else {
    auto set = nanotrace::read_columns(**trace);
    if (!set.ok()) {
      std::fprintf(stderr, "analysis_reader: %s\n", set.status().message().c_str());
      return 1;
    }
    records = set->rows;
    for (const nanotrace::EventTable& t : set->tables) check += t.fields.size() * t.rows();
  }
  double dt = now_s() - t0, cpu = cpu_s() - c0;
  std::printf(
      "{\"mode\": \"%s\", \"records\": %llu, \"seconds\": %.6f, \"cpu_seconds\": %.6f, "
      "\"fields\": %llu}\n",
      mode.c_str(), static_cast<unsigned long long>(records), dt, cpu,
      static_cast<unsigned long long>(check));
  return 0;
}
