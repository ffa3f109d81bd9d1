// One record as a JSON object on one line, the text `nanotrace dump --json` prints and
// `nanotrace export --format jsonl` writes (docs/export.md promises they are the same):
// {"time_ns":..,"tid":..,"thread":"..","seq":..,"event":"group:event","fields":{..}}; a kernel
// record: {"time_ns":..,"tid":..,"cpu":..,"seq":..,"kernel":true,"event":..,"fields":{..}}.
// A trace of several processes adds "pid" after "time_ns", one of several nodes "node" (its
// hostname) before it.
// The constant text of each thread and event is prepared once.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "nanotrace/reader.hpp"

namespace nanotrace::exporter {

class JsonLineEncoder {
 public:
  // threads: the record source's thread list (indexed by Record::thread).
  void prepare(const Trace& trace, const std::vector<ThreadStats>& threads);
  // Appends the record's object and a newline.
  void encode(fmt::memory_buffer& out, const Record& r) const;

 private:
  std::vector<std::string> threads_;            // by thread index: ,"tid":..,"thread":".."
  std::vector<std::string> events_;             // by event id: ,"event":"..","fields":{
  std::vector<std::vector<std::string>> keys_;  // by event id and field: "name":
};

}  // namespace nanotrace::exporter
