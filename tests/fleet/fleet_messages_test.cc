// The fleet's messages as types (protocol.hpp, message_*.hpp): each one written by its
// serializer reads back equal through its parser, with the JSON keys docs/fleet.md gives; and
// every parser refuses, without an exception, what a misbehaving or hostile member may send
// (wrong types, missing fields, huge lists, invalid UTF-8, not JSON), with a one-line reason
// naming the field and, for an answer, the node that sent it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "fleet/message_answers.hpp"
#include "fleet/message_fields.hpp"
#include "fleet/message_manifest.hpp"
#include "fleet/message_status.hpp"
#include "fleet/message_top.hpp"
#include "fleet/protocol.hpp"

namespace nanotrace::fleet {
namespace {

using nlohmann::json;

Freeze sample_freeze() {
  Freeze f;
  f.round = "20261203T121501.123456-node3";
  f.node = "node3";
  f.pid = 42;
  f.tid = 43;
  f.seq = 1234567;
  f.event = "io:complete";
  f.expression = "io:complete lat_us>1000";
  f.match_realtime_ns = 1764763501123456789ull;
  f.after_ns = 500000;
  return f;
}

Manifest sample_manifest() {
  Manifest m;
  m.round = "20261203T121501.123456-node3";
  m.node = "node1";
  m.fleet = "default";
  m.origins = {sample_freeze()};
  m.before_ns = 2000000000;
  m.freeze_realtime_ns = 1764763501125000000ull;
  m.latency_ns = 1543211;
  ManifestProcess good;
  good.pid = 7;
  good.name = "db";
  good.file = m.round + ".node1.7.nt";
  good.frozen_realtime_ns = m.freeze_realtime_ns;
  good.history_seconds = 3.25;
  good.bytes = 1 << 20;
  good.records = 5000;
  good.has_kernel = true;
  good.kernel_pages = 12;
  good.kernel_lost = 1;
  ManifestProcess not_frozen;
  not_frozen.pid = 8;
  not_frozen.error = "not frozen";
  m.processes = {good, not_frozen};
  m.timing = RoundTiming{};
  m.timing->received_ns = 1764763501124000000ull;
  m.timing->copied_ns = 1764763501126000000ull;
  return m;
}

StatusAnswer sample_status() {
  StatusAnswer s;
  s.node = "node2";
  s.connected = true;
  s.processes = {{9, "db", "armed", "io:complete lat_us>1000", 4, 100000, 2.5, 4096, 3}};
  s.armed = "io:complete lat_us>1000";
  s.before_ns = 2000000000;
  s.rate_ns = 10000000000;
  s.rounds = 5;
  s.coalesced = 1;
  s.rate_limited = 2;
  s.local_only = 1;
  s.last_latency_ns = 1200000;
  s.clock = ClockStatus{"chrony", true, -1200, true, 35000, "10.0.0.1"};
  s.kernel = KernelStatus{{"sched", "block"}, "nanotrace-1-2-flight", ""};
  s.ship = ShipStatus{2, "nanotrace", 3, 1, 9000, 4, 0, 1, "connection refused", 20, 10};
  return s;
}

TEST(FleetMessagesTest, EachTypeReadsBackWhatItsSerializerWrote) {
  const Freeze f = sample_freeze();
  auto freeze = Freeze::parse(f.to_json());
  ASSERT_TRUE(freeze.ok()) << freeze.status().message();
  EXPECT_EQ(freeze->to_json(), f.to_json());
  EXPECT_EQ(freeze->after_ns, 500000u);

  const Manifest m = sample_manifest();
  auto manifest = Manifest::parse(m.to_json(2));
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_EQ(manifest->to_json(), m.to_json());
  EXPECT_TRUE(manifest->names_round(f.round));
  EXPECT_TRUE(manifest->processes[0].copied());
  EXPECT_FALSE(manifest->processes[1].copied());
  EXPECT_EQ(manifest->timing->copied_ns, 1764763501126000000ull);
  // The keys docs/fleet.md gives, as the agents wrote them before the types.
  const json j = json::parse(m.to_json());
  for (const char* key : {"round", "node", "fleet", "origins", "before_ns", "freeze_realtime_ns",
                          "latency_ns", "processes", "timing"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["processes"][1], json::parse(R"({"pid":8,"error":"not frozen"})"));
  EXPECT_EQ(j["processes"][0]["kernel_pages"], 12);
  EXPECT_EQ(j["timing"], json::parse(R"({"received_ns":1764763501124000000,
                                          "copied_ns":1764763501126000000})"));

  const StatusAnswer s = sample_status();
  auto status = StatusAnswer::parse(s.to_json());
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_EQ(status->to_json(), s.to_json());
  EXPECT_EQ(status->clock->offset_ns, -1200);
  EXPECT_EQ(status->ship->last_error, "connection refused");
  StatusAnswer unsynced = s;
  unsynced.clock->bound_known = false;
  EXPECT_TRUE(json::parse(unsynced.to_json())["clock"]["bound_ns"].is_null());
  auto back = StatusAnswer::parse(unsynced.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->clock->bound_known);

  ProcessesAnswer arm{"node1", "", {{7, "db", ""}, {8, "cache", "no trigger slot"}}};
  auto arm_back = ProcessesAnswer::parse(arm.to_json());
  ASSERT_TRUE(arm_back.ok()) << arm_back.status().message();
  EXPECT_EQ(arm_back->to_json(), arm.to_json());
  ResumeAnswer resume{"node1", "", {"process 7: not frozen"}};
  auto resume_back = ResumeAnswer::parse(resume.to_json());
  ASSERT_TRUE(resume_back.ok());
  EXPECT_EQ(resume_back->errors, resume.errors);
  SnapshotAnswer snap{"node1", "", m};
  auto snap_back = SnapshotAnswer::parse(snap.to_json());
  ASSERT_TRUE(snap_back.ok()) << snap_back.status().message();
  EXPECT_EQ(snap_back->manifest.to_json(), m.to_json());
  RoundsAnswer rounds{"node1", "", {m, m}};
  auto rounds_back = RoundsAnswer::parse(rounds.to_json());
  ASSERT_TRUE(rounds_back.ok()) << rounds_back.status().message();
  EXPECT_EQ(rounds_back->to_json(), rounds.to_json());

  // A node's error is an answer of every type, carrying nothing else.
  auto refused = StatusAnswer::parse(error_answer("node4", "unknown command 'x'"));
  ASSERT_TRUE(refused.ok()) << refused.status().message();
  EXPECT_EQ(refused->node, "node4");
  EXPECT_EQ(refused->error, "unknown command 'x'");
  EXPECT_TRUE(RoundsAnswer::parse(error_answer("node4", "x")).ok());
}

// An agent older than the clock, kernel, ship and timing fields: its answers still read.
TEST(FleetMessagesTest, FieldsAddedSinceTheFirstAgentAreOptional) {
  StatusAnswer s = sample_status();
  s.clock.reset();
  s.kernel.reset();
  s.ship.reset();
  auto status = StatusAnswer::parse(s.to_json());
  ASSERT_TRUE(status.ok()) << status.status().message();
  EXPECT_FALSE(status->clock.has_value());
  Manifest m = sample_manifest();
  m.timing.reset();
  auto manifest = Manifest::parse(m.to_json());
  ASSERT_TRUE(manifest.ok()) << manifest.status().message();
  EXPECT_FALSE(manifest->timing.has_value());
  // And fields a newer agent adds are ignored.
  json j = json::parse(sample_status().to_json());
  j["waiters"] = json::array({1, 2});
  EXPECT_TRUE(StatusAnswer::parse(j.dump()).ok());
}

struct Bad {
  const char* bytes;
  const char* node;    // the node read_answer names
  const char* reason;  // a part of the reason
};

// What a hostile member answered `fleet status` and `fleet collect` with, and more.
TEST(FleetMessagesTest, MalformedAnswersAreRefusedNamingTheFieldAndTheNode) {
  const std::string deep(100000, '[');
  const Bad status_cases[] = {
      {R"({"node":"evil","rounds":"x"})", "evil", "connected: missing"},
      {R"({"node":"evil","connected":true,"processes":[],"armed":"","before_ns":0,"rate_ns":0,
          "rounds":"x","coalesced":0,"rate_limited":0,"local_only":0,"last_latency_ns":0})",
       "evil", "rounds: not an unsigned integer"},
      {R"({"node":"evil","connected":1})", "evil", "connected: not true or false"},
      {R"({"node":"evil","connected":true,"processes":{"pid":1}})", "evil",
       "processes: not a list"},
      {R"({"node":"evil","connected":true,"processes":[{"pid":-1}]})", "evil",
       "processes[0].pid: not an unsigned integer"},
      {R"({"node":"evil","connected":true,"processes":[{"pid":4294967296}]})", "evil",
       "processes[0].pid: out of range"},
      {R"({"node":"evil","connected":true,"processes":[7]})", "evil",
       "processes[0]: not an object"},
      {R"({"node":"evil","connected":true,"processes":[{"pid":1,"name":null}]})", "evil",
       "processes[0].name: not a string"},
      {R"({"node":"evil","error":17})", "evil", "error: not a string"},
      {R"({"node":"a.b","connected":true})", "a.b", "node: not a name"},
      {R"({"node":7})", "(number)", "node: not a string"},
      {R"({"connected":true})", "", "node: missing"},
      {"{\"node\":\"evil\",\"armed\":\"\xff\xfe\"}", "evil", "not valid UTF-8"},
      {"garbage", "", "not JSON"},
      {"", "", "not JSON"},
      {"[1,2,3]", "", "not a JSON object"},
      {"{\"node\":\"evil\",\"x\":", "evil", "not JSON"},
      {deep.c_str(), "", "not JSON"},
  };
  for (const Bad& bad : status_cases) {
    ReadAnswer<StatusAnswer> read;
    EXPECT_NO_THROW(read = read_answer<StatusAnswer>(bad.bytes));
    EXPECT_FALSE(read.answer.ok()) << bad.bytes;
    EXPECT_EQ(read.node, bad.node) << bad.bytes;
    EXPECT_NE(read.answer.status().message().find(bad.reason), std::string::npos)
        << bad.bytes << " -> " << read.answer.status().message();
    EXPECT_EQ(read.answer.status().message().find('\n'), std::string::npos);
  }
  const Bad rounds_cases[] = {
      {R"({"node":"evil","rounds":"x"})", "evil", "rounds: not a list"},
      {R"({"node":"evil","rounds":[{"round":"r"}]})", "evil", "rounds[0].node: missing"},
      {R"({"node":"evil","rounds":[1]})", "evil", "rounds[0]: not an object"},
      {R"({"node":"evil","rounds":[{"round":"../../etc","node":"evil"}]})", "evil",
       "rounds[0].round: not a spool file name"},
      {R"({"node":"evil","rounds":[{"round":"r","node":"evil","fleet":"f","origins":[{"round":"r",
          "node":"n","pid":"1"}]}]})",
       "evil", "rounds[0].origins[0].pid: not an unsigned integer"},
      {R"({"node":"evil","rounds":[{"round":"r","node":"evil","fleet":"f","origins":[],
          "before_ns":0,"freeze_realtime_ns":0,"latency_ns":0,
          "processes":[{"pid":1,"file":"../../etc/passwd"}]}]})",
       "evil", "rounds[0].processes[0].file: not a spool file name"},
  };
  for (const Bad& bad : rounds_cases) {
    ReadAnswer<RoundsAnswer> read = read_answer<RoundsAnswer>(bad.bytes);
    EXPECT_FALSE(read.answer.ok()) << bad.bytes;
    EXPECT_EQ(read.node, bad.node) << bad.bytes;
    EXPECT_NE(read.answer.status().message().find(bad.reason), std::string::npos)
        << bad.bytes << " -> " << read.answer.status().message();
  }
}

live::LiveFrame sample_frame() {
  live::LiveFrame f;
  f.sequence = 12;
  f.realtime_ns = 1765094400123456789ull;
  f.interval_s = 1.000213;
  live::LiveProcess p;
  p.pid = 17;
  p.name = "waiter_program";
  p.threads = 2;
  p.records = 40;
  p.records_per_second = 39.99;
  f.processes.push_back(p);
  f.events.push_back({"io:submit", 20, 19.99, 21, 1});
  live::LivePair pair;
  pair.rule = {"io:submit", "io:complete", "req"};
  pair.inferred = true;
  pair.processes = 1;
  pair.last = {20, 101000, 180000, 181000};
  pair.total = {21, 101000, 180000, 181000};
  pair.open = 1;
  pair.oldest_open_ns = 12400000000ull;
  f.pairs.push_back(pair);
  live::LiveWaiter w;
  w.pid = 17;
  w.process = "waiter_program";
  w.rule = pair.rule;
  w.key = "424242";
  w.tid = 18;
  w.thread = "stuck-worker";
  w.age_ns = 12400000000ull;
  w.begin_realtime_ns = 1765094387723456789ull;
  w.fields = "req=424242 len=4096 path=/data/stuck";
  f.waiters.push_back(w);
  f.open_total = 1;
  f.notes.push_back("a note");
  return f;
}

// `top`'s answer carries the node's live frame: it reads back whole, a malformed frame is
// refused naming the frame's member and the node, and a frame too large for one broker message
// is cut (events first, then waiters) rather than lost.
TEST(FleetMessagesTest, TopAnswerCarriesTheFrameAndRefusesAMalformedOne) {
  const TopAnswer a{"node2", "", sample_frame()};
  auto back = TopAnswer::parse(a.to_json());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->to_json(), a.to_json());
  EXPECT_EQ(back->frame.waiters.at(0).key, "424242");
  EXPECT_EQ(back->frame.waiters.at(0).age_ns, 12400000000ull);
  EXPECT_EQ(back->frame.pairs.at(0).last.p99_ns, 180000u);
  EXPECT_TRUE(json::parse(a.to_json()).contains("frame"));
  auto refused = TopAnswer::parse(error_answer("node4", "no live view"));
  ASSERT_TRUE(refused.ok());
  EXPECT_EQ(refused->error, "no live view");

  json j = json::parse(a.to_json());
  j["frame"]["waiters"][0]["age_ns"] = "12s";
  const std::string deep =
      R"({"node":"evil","frame":)" + std::string(5000, '[') + std::string(5000, ']') + "}";
  const Bad cases[] = {
      {R"({"node":"evil"})", "evil", "frame: missing"},
      {R"({"node":"evil","frame":[]})", "evil", "frame: top frame: not a JSON object"},
      {R"({"node":"evil","frame":{"version":2}})", "evil", "version 2"},
      {R"({"node":"evil","frame":{"version":1}})", "evil", "missing 'sequence'"},
      {deep.c_str(), "evil", "not a JSON object"},
  };
  for (const Bad& bad : cases) {
    ReadAnswer<TopAnswer> read;
    EXPECT_NO_THROW(read = read_answer<TopAnswer>(bad.bytes));
    EXPECT_FALSE(read.answer.ok()) << bad.bytes;
    EXPECT_EQ(read.node, bad.node) << bad.bytes;
    EXPECT_NE(read.answer.status().message().find(bad.reason), std::string::npos)
        << bad.bytes << " -> " << read.answer.status().message();
  }
  ReadAnswer<TopAnswer> typed = read_answer<TopAnswer>(j.dump());
  ASSERT_FALSE(typed.answer.ok());
  EXPECT_NE(typed.answer.status().message().find("'age_ns' is not a count"), std::string::npos)
      << typed.answer.status().message();

  live::LiveFrame big = sample_frame();
  for (int i = 0; i < 20000; ++i) big.events.push_back({"ev:" + std::to_string(i), 1, 1, 1, 1});
  for (int i = 0; i < 10000; ++i) big.waiters.push_back(big.waiters[0]);
  const std::string fitted = top_answer("node2", big);
  EXPECT_LE(fitted.size(), kMaxMessageBytes);
  auto cut = TopAnswer::parse(fitted);
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  EXPECT_TRUE(cut->frame.events.empty());
  EXPECT_FALSE(cut->frame.waiters.empty());
  EXPECT_NE(cut->frame.notes.back().find("left out"), std::string::npos);
  EXPECT_EQ(top_answer("node2", sample_frame()), a.to_json());
}

TEST(FleetMessagesTest, SizesAreBounded) {
  // A list longer than any agent sends.
  json many = {{"node", "evil"}, {"errors", json::array()}};
  for (int i = 0; i < 5000; ++i) many["errors"].push_back("x");
  auto resume = read_answer<ResumeAnswer>(many.dump());
  EXPECT_FALSE(resume.answer.ok());
  EXPECT_NE(resume.answer.status().message().find("errors: more than 4096 entries"),
            std::string::npos);
  // A message larger than the broker's maximum, and a field longer than its bound.
  std::string huge = R"({"node":"evil","error":")" + std::string(kMaxMessageBytes, 'x') + "\"}";
  auto too_large = read_answer<StatusAnswer>(huge);
  EXPECT_FALSE(too_large.answer.ok());
  EXPECT_NE(too_large.answer.status().message().find("too large"), std::string::npos);
  EXPECT_EQ(too_large.node, "evil");  // named from its bytes
  auto long_error = StatusAnswer::parse(error_answer("evil", std::string(kMaxTextBytes + 1, 'e')));
  EXPECT_FALSE(long_error.ok());
  // A name that is not a node name is named as sent, printable and cut.
  auto escape =
      read_answer<StatusAnswer>(R"({"node":"\u001b[31mred\n)" + std::string(100, 'n') + "\"}");
  EXPECT_EQ(escape.node.find('\x1b'), std::string::npos);
  EXPECT_EQ(escape.node.find('\n'), std::string::npos);
  EXPECT_LT(escape.node.size(), 80u);
  EXPECT_NE(escape.node.find("red"), std::string::npos);
}

TEST(FleetMessagesTest, RequestsAreCheckedFieldByField) {
  auto c = Command::parse(R"({"op":"arm","expression":"io:error","after":"2ms","rate_ns":5})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rate_ns, 5u);
  auto round_trip = Command::parse(c->to_json());
  ASSERT_TRUE(round_trip.ok());
  EXPECT_EQ(round_trip->to_json(), c->to_json());
  const std::pair<const char*, const char*> bad_commands[] = {
      {R"({"op":7})", "op: not a string"},
      {R"({})", "op: missing"},
      {R"({"op":"arm","before_ns":-5})", "before_ns: not an unsigned integer"},
      {R"({"op":"arm","expression":[]})", "expression: not a string"},
      {R"({"op":"snapshot","round":"a/b"})", "not a spool file name"},
      {"\xff", "not valid UTF-8"},
  };
  for (const auto& [bytes, reason] : bad_commands) {
    auto bad = Command::parse(bytes);
    ASSERT_FALSE(bad.ok()) << bytes;
    EXPECT_NE(bad.status().message().find(reason), std::string::npos)
        << bytes << " -> " << bad.status().message();
  }
  auto freeze = Freeze::parse(R"({"round":"r","node":"n","after_ns":1.5})");
  ASSERT_FALSE(freeze.ok());
  EXPECT_NE(freeze.status().message().find("after_ns"), std::string::npos);
  EXPECT_FALSE(FetchRequest::parse(R"({"offset":0})").ok());  // no file
  EXPECT_FALSE(FetchRequest::parse(R"({"file":"x","length":"all"})").ok());
  // A fetch's answer: the agent's error is printable on one line.
  auto error = fetch_answer_bytes("Eno such file\n\x1b[2J");
  ASSERT_FALSE(error.ok());
  EXPECT_EQ(error.status().message().find('\n'), std::string::npos);
  EXPECT_EQ(error.status().message().find('\x1b'), std::string::npos);
  EXPECT_FALSE(fetch_answer_bytes("Zgarbage").ok());
  EXPECT_FALSE(fetch_answer_bytes("").ok());
  EXPECT_FALSE(fetch_answer_bytes("?").ok());
}

// Every parser on valid messages cut and with bytes changed: an answer or an error, never an
// exception (the fuzz targets do this at length; this keeps it in make check).
TEST(FleetMessagesTest, DamagedMessagesNeverThrow) {
  const std::string seeds[] = {sample_freeze().to_json(), sample_manifest().to_json(),
                               sample_status().to_json(),
                               RoundsAnswer{"n", "", {sample_manifest()}}.to_json(),
                               Command{Command::Op::kArm, "io:x", "1ms", 1, 2, ""}.to_json()};
  std::mt19937 random(12345);
  size_t refused = 0, read = 0;
  for (const std::string& seed : seeds) {
    for (int i = 0; i < 400; ++i) {
      std::string bytes = seed;
      const int changes = 1 + static_cast<int>(random() % 4);
      for (int k = 0; k < changes && !bytes.empty(); ++k) {
        const size_t at = random() % bytes.size();
        switch (random() % 3) {
          case 0:
            bytes[at] = static_cast<char>(random());
            break;
          case 1:
            bytes.resize(at);
            break;
          default:
            bytes.insert(at, 1, "{}[]\",:0-e\\"[random() % 11]);
        }
      }
      EXPECT_NO_THROW({
        (read_answer<StatusAnswer>(bytes).answer.ok() ? read : refused) += 1;
        (read_answer<RoundsAnswer>(bytes).answer.ok() ? read : refused) += 1;
        (read_answer<SnapshotAnswer>(bytes).answer.ok() ? read : refused) += 1;
        (read_answer<ProcessesAnswer>(bytes).answer.ok() ? read : refused) += 1;
        (read_answer<ResumeAnswer>(bytes).answer.ok() ? read : refused) += 1;
        (Manifest::parse(bytes).ok() ? read : refused) += 1;
        (Freeze::parse(bytes).ok() ? read : refused) += 1;
        (Command::parse(bytes).ok() ? read : refused) += 1;
        (FetchRequest::parse(bytes).ok() ? read : refused) += 1;
      }) << bytes;
    }
  }
  EXPECT_GT(refused, 0u);
  EXPECT_GT(read, 0u);  // some damage leaves a message that reads (both paths ran)
}

}  // namespace
}  // namespace nanotrace::fleet
