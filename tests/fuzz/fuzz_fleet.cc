// libFuzzer target for the fleet messages' parsers (src/fleet/protocol.hpp, message_*.hpp),
// one binary for every message type (one build), fuzzing the type FUZZ_FLEET_MESSAGE names
// (freeze, command, fetch_request, fetch_answer, manifest, status, rounds, snapshot,
// processes, resume, top): each type is a fuzz test of its own, with its own corpus. The input is
// the message's bytes as they come from the broker. The parser must return an answer or an error,
// never throw (an exception aborts the run) nor read out of bounds (ASan); and what it accepts must
// write back as JSON that reads again to the same message (the serializer and the parser agree).
// The fetch answer (not JSON) must give at most one chunk, and give back what fetch_answer
// packed.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fleet/message_answers.hpp"
#include "fleet/message_manifest.hpp"
#include "fleet/message_status.hpp"
#include "fleet/message_top.hpp"
#include "fleet/protocol.hpp"

namespace {

using namespace nanotrace::fleet;

// Parses, writes back, parses the writing: the second writing must be the first.
template <class T>
void round_trip(const std::string& bytes) {
  auto first = T::parse(bytes);
  if (!first.ok()) return;
  const std::string written = first->to_json();
  auto second = T::parse(written);
  if (!second.ok() || second->to_json() != written) std::abort();
}

void fetch_answer_round_trip(const std::string& bytes) {
  auto data = fetch_answer_bytes(bytes);
  if (!data.ok()) return;
  if (data->size() > kFetchChunk && bytes[0] != 'D') std::abort();
  if (data->size() > kFetchChunk) return;  // 'D' is bounded by the collector, not here
  for (bool zstd : {false, true}) {
    auto back = fetch_answer_bytes(fetch_answer(*data, zstd));
    if (!back.ok() || *back != *data) std::abort();
  }
}

using Target = void (*)(const std::string& bytes);

template <class T>
void answer(const std::string& bytes) {
  round_trip<T>(bytes);
  (void)read_answer<T>(bytes);
}

struct Named {
  const char* name;
  Target target;
};
const Named kTargets[] = {
    {"freeze", round_trip<Freeze>},
    {"command", round_trip<Command>},
    {"fetch_request", round_trip<FetchRequest>},
    {"fetch_answer", fetch_answer_round_trip},
    {"manifest", round_trip<Manifest>},
    {"status", answer<StatusAnswer>},
    {"rounds", answer<RoundsAnswer>},
    {"snapshot", answer<SnapshotAnswer>},
    {"processes", answer<ProcessesAnswer>},
    {"resume", answer<ResumeAnswer>},
    {"top", answer<TopAnswer>},
};

Target g_target = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* wanted = std::getenv("FUZZ_FLEET_MESSAGE");
  for (const Named& t : kTargets) {
    if (wanted != nullptr && std::strcmp(wanted, t.name) == 0) g_target = t.target;
  }
  if (g_target == nullptr) {
    std::fprintf(stderr,
                 "FUZZ_FLEET_MESSAGE: freeze, command, fetch_request, fetch_answer, "
                 "manifest, status, rounds, snapshot, processes or resume\n");
    std::abort();
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  g_target(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
