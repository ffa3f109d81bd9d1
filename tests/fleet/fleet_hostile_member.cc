// A misbehaving fleet member for fleet_hostile_test.sh: it connects to the broker with the
// fleet's valid credentials, and answers every command on the fleet's control subject with
// many malformed answers at once, each claiming a node of its own ("evil-KIND"): the bodies
// that made `fleet status` and `fleet collect` abort before the messages had types, and more
// (wrong types, missing fields, a huge list, invalid UTF-8, deep nesting, not JSON, a node name
// that is not one, a second answer claiming a real node), and one that only a rounds answer
// reads as (holding no round). To `rounds` it also answers, as
// evil-fetch, a well-formed manifest of the latest `fleet snapshot` round, then answers every
// fetch of that node with a chunk that does not decompress: a collection copies the good nodes
// and names evil-fetch.
//
// Usage: nanotrace_fleet_hostile_member URL CREDENTIALS FLEET IMPOSTOR
// (IMPOSTOR: a real node's name it also claims). Prints "ready" once subscribed; runs until
// SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "fleet/broker.hpp"
#include "fleet/credentials.hpp"
#include "fleet/protocol.hpp"

namespace {

std::atomic<bool> g_stop{false};
void on_term(int) { g_stop.store(true); }

using nanotrace::fleet::Broker;
using nanotrace::fleet::BrokerMessage;
using nanotrace::fleet::Command;

// The malformed answers, the same to every command.
std::vector<std::string> malformed(const std::string& impostor) {
  std::string huge = R"({"node":"evil-huge","connected":true,"processes":[)";
  for (int i = 0; i < 150000; ++i) huge += i == 0 ? "{}" : ",{}";
  huge += R"(],"rounds":[)";
  for (int i = 0; i < 50000; ++i) huge += i == 0 ? "1" : ",1";
  huge += "]}";
  const std::string deep =
      R"({"node":"evil-deep","rounds":)" + std::string(20000, '[') + std::string(20000, ']') + "}";
  return {
      R"({"node":"evil-rounds-x","rounds":"x"})",
      R"({"node":"evil-types","connected":"yes","processes":"none","rounds":-1,"armed":7})",
      R"({"node":"evil-missing"})",
      R"({"node":"evil-empty","rounds":[]})",  // a readable rounds answer, without the round
      R"({"node":"evil-nested","connected":true,"processes":[{"pid":"1"}],
          "rounds":[{"round":"r","node":"evil-nested","origins":[{"pid":"x"}]}]})",
      R"({"node":"evil-path","rounds":[{"round":"r","node":"evil-path","fleet":"f",
          "origins":[],"before_ns":0,"freeze_realtime_ns":0,"latency_ns":0,
          "processes":[{"pid":1,"file":"../../etc/passwd"}]}]})",
      R"({"node":"evil-error","error":{"not":"text"}})",
      "{\"node\":\"evil-utf8\",\"armed\":\"\xff\xfe\",\"rounds\":\"\xc0\"}",
      huge,
      deep,
      "garbage \x01\x02 that is not JSON",
      R"({"node":"evil\u001b[31m.name\n","rounds":[]})",
      R"({"node":")" + impostor + R"(","connected":"twice"})",
  };
}

// evil-fetch's answer to `rounds`: a manifest a collector can read, of round, with one file.
std::string rounds_answer(const std::string& round) {
  const std::string file = round + ".evil-fetch.1.nt";
  return R"({"node":"evil-fetch","rounds":[{"round":")" + round +
         R"(","node":"evil-fetch","fleet":"f","origins":[{"round":")" + round +
         R"(","node":"evil-fetch"}],"before_ns":0,"freeze_realtime_ns":0,"latency_ns":0,
         "processes":[{"pid":1,"name":"x","file":")" +
         file + R"(","bytes":100}]}]})";
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s URL CREDENTIALS FLEET IMPOSTOR\n", argv[0]);
    return 2;
  }
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  auto credentials = nanotrace::fleet::read_credentials(argv[2]);
  if (!credentials.ok()) {
    std::fprintf(stderr, "%s\n", credentials.status().message().c_str());
    return 1;
  }
  nanotrace::fleet::BrokerOptions options;
  options.url = argv[1];
  options.credentials = *credentials;
  options.name = "nanotrace-hostile-member";
  auto broker = Broker::connect(options);
  if (!broker.ok()) {
    std::fprintf(stderr, "%s\n", broker.status().message().c_str());
    return 1;
  }
  Broker& b = **broker;
  const std::string fleet = argv[3];
  const std::vector<std::string> bodies = malformed(argv[4]);
  std::mutex mu;
  std::string round;  // the latest snapshot's
  nanotrace::Status s = b.subscribe(nanotrace::fleet::ctl_subject(fleet), [&](BrokerMessage&& m) {
    if (m.reply.empty()) return;
    auto command = Command::parse(m.data);
    std::string known;
    {
      std::lock_guard lock(mu);
      if (command.ok() && command->op == Command::Op::kSnapshot) round = command->round;
      known = round;
    }
    for (const std::string& body : bodies) (void)b.publish(m.reply, body);
    if (command.ok() && command->op == Command::Op::kRounds && !known.empty()) {
      (void)b.publish(m.reply, rounds_answer(known));
    }
    if (command.ok() && command->op == Command::Op::kSnapshot) {
      (void)b.publish(m.reply, R"({"node":"evil-fetch","error":"disk full"})");
    }
  });
  if (s.ok()) {
    s = b.subscribe(nanotrace::fleet::fetch_subject(fleet, "evil-fetch"), [&](BrokerMessage&& m) {
      if (!m.reply.empty()) (void)b.publish(m.reply, "Zthis is not a zstd frame");
    });
  }
  if (s.ok()) s = b.flush(2000);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  std::printf("ready\n");
  std::fflush(stdout);
  while (!g_stop.load()) usleep(50000);
  return 0;
}
