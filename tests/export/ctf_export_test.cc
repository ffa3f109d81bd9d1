// `nanotrace export --format ctf`, checked by the real babeltrace2: every record, field value
// and type, and the exact loss counts as discarded-events messages.
#include "export_fixture.hpp"

namespace nanotrace_export_test {
namespace {

// A field value as babeltrace2's pretty output prints it (strings quoted, bools as 0/1 since
// CTF 1.8 has no bool, doubles as %g).
std::string bt_value(const json& v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s.rfind("0x", 0) == 0) return s;  // pointer
    return "\"" + s + "\"";
  }
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (v.is_number_float()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v.get<double>());
    return buf;
  }
  return v.dump();
}

// "time|tid|event|a = 1, b = "x"" (fields sorted by name) for a dump --json record.
std::string dump_key(const json& j) {
  std::vector<std::string> fields;
  for (auto it = j["fields"].begin(); it != j["fields"].end(); ++it) {
    std::string name = it.key();
    std::replace(name.begin(), name.end(), '.', '_');
    fields.push_back(name + " = " + bt_value(it.value()));
  }
  std::sort(fields.begin(), fields.end());
  std::string joined;
  for (const std::string& f : fields) joined += (joined.empty() ? "" : ", ") + f;
  return std::to_string(j["time_ns"].get<uint64_t>()) + "|" +
         std::to_string(j["tid"].get<uint32_t>()) + "|" + j["event"].get<std::string>() + "|" +
         joined;
}

// The same key from a line of `babeltrace2 --clock-cycles` output:
// [CYCLES] (+DELTA) HOST:PROC:(PID) EVENT: { tid = T }, { FIELDS }
std::string bt_key(const std::string& line) {
  static const std::regex kLine(
      R"(^\[(\d+)\] \(\+[^)]*\) \S+ ([^ ]+): \{ tid = (\d+) \}(?:, (\{.*\}))?$)");
  std::smatch m;
  if (!std::regex_match(line, m, kLine)) return "unparsed: " + line;
  std::string text = m[4].matched ? m[4].str() : "";
  // "{ a = 1, b = 2 }": split at ", " (the traced strings hold no comma).
  std::vector<std::string> fields;
  if (text.size() > 4) {
    text = text.substr(2, text.size() - 4);
    size_t start = 0;
    for (size_t comma; (comma = text.find(", ", start)) != std::string::npos; start = comma + 2) {
      fields.push_back(text.substr(start, comma - start));
    }
    fields.push_back(text.substr(start));
  }
  // A string field is preceded by its length field ("_dev_len = 7, dev = \"nvme0n1\""): drop
  // the length once it is checked, since dump has no such field.
  std::vector<std::string> kept;
  static const std::regex kLength(R"(^_(\w+)_len = (\d+)$)");
  for (size_t i = 0; i < fields.size(); ++i) {
    std::smatch lm;
    if (i + 1 < fields.size() && std::regex_match(fields[i], lm, kLength)) {
      std::string next = fields[i + 1];
      std::string prefix = lm[1].str() + " = \"";
      if (next.rfind(prefix, 0) == 0 && next.size() == prefix.size() + std::stoul(lm[2]) + 1) {
        continue;
      }
    }
    kept.push_back(fields[i]);
  }
  std::sort(kept.begin(), kept.end());
  std::string joined;
  for (const std::string& f : kept) joined += (joined.empty() ? "" : ", ") + f;
  return std::to_string(std::stoull(m[1].str())) + "|" + m[3].str() + "|" + m[2].str() + "|" +
         joined;
}

TEST_F(ExportTest, CtfRoundTripThroughBabeltrace) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 3 --ops 2000 --gap-ns 1000");
  std::string out = path("ctf");
  Proc e = run(kCli + " export " + sim.path() + " --format ctf -o " + out);
  ASSERT_EQ(e.code, 0) << e.err;
  std::string metadata = read_file(out + "/metadata");
  EXPECT_EQ(metadata.rfind("/* CTF 1.8", 0), 0u);

  Proc bt = run("babeltrace2 --clock-cycles " + out);
  ASSERT_EQ(bt.code, 0) << bt.err;
  EXPECT_EQ(bt.err, "") << "babeltrace2 warned";
  std::vector<std::string> got, want;
  for (const std::string& l : lines(bt.out)) got.push_back(bt_key(l));
  std::vector<json> records = dump_json(sim.path());
  for (const json& j : records) want.push_back(dump_key(j));
  ASSERT_EQ(got.size(), want.size());
  EXPECT_GT(got.size(), 12000u);
  // babeltrace2 orders ties between streams its own way: compare as sorted lists.
  std::sort(got.begin(), got.end());
  std::sort(want.begin(), want.end());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "record " << i;

  // Absolute clock: babeltrace2's seconds are the wall-clock time nanotrace gives.
  auto trace = nanotrace::Trace::open(sim.path());
  ASSERT_TRUE(trace.ok());
  uint64_t real =
      (*trace)->process().clock_start.realtime_ns + records[0]["time_ns"].get<uint64_t>();
  Proc secs = run("babeltrace2 --clock-seconds " + out + " | head -1");
  EXPECT_THAT(secs.out, HasSubstr(fmt::format("[{}.{:09}]", real / 1000000000, real % 1000000000)));
}

TEST_F(ExportTest, CtfCarriesExactLossCounts) {
  for (const char* mode : {"discard", "overwrite"}) {
    SCOPED_TRACE(mode);
    Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 2 --ops 20000 --gap-ns 0",
               std::string("NANOTRACE_BUFFER=64K NANOTRACE_MODE=") + mode);
    std::map<uint32_t, uint64_t> lost = loss_by_tid(sim.path());
    uint64_t total = 0;
    for (auto& [tid, n] : lost) total += n;
    ASSERT_GT(total, 0u) << "the rings were expected to overflow";
    std::string out = path(std::string("ctf-") + mode);
    Proc e = run(kCli + " export " + sim.path() + " --format ctf -o " + out);
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_THAT(e.err, HasSubstr(fmt::format("({} lost)", total)));
    Proc bt = run("babeltrace2 " + out + " >/dev/null");
    ASSERT_EQ(bt.code, 0) << bt.err;
    // Every warning is a counted discarded-events message; sum them per stream (tid).
    static const std::regex kWarn(
        R"re(^WARNING: Tracer discarded (\d+) events? between .* within stream "[^"]*/stream-\d+-(\d+)")re");
    std::map<uint32_t, uint64_t> reported;
    for (const std::string& l : lines(bt.err)) {
      std::smatch m;
      ASSERT_TRUE(std::regex_search(l, m, kWarn)) << "unexpected babeltrace2 output: " << l;
      reported[std::stoul(m[2])] += std::stoull(m[1]);
    }
    for (auto& [tid, n] : lost) EXPECT_EQ(reported[tid], n) << "tid " << tid;
  }
}

TEST_F(ExportTest, CtfFieldTypesAndNames) {
  Traced helper(NANOTRACE_BIN_DIR "/export_helper --pairs 16");
  std::string out = path("ctf");
  Proc e = run(kCli + " export " + helper.path() + " -f ctf -o " + out);
  ASSERT_EQ(e.code, 0) << e.err;
  std::string metadata = read_file(out + "/metadata");
  EXPECT_THAT(metadata, HasSubstr("int8_t i8;"));
  EXPECT_THAT(metadata, HasSubstr("double f32;"));  // recorded as a double
  EXPECT_THAT(metadata, HasSubstr("uint8_t __name_len;\n    utf8_char_t name[__name_len];"));
  EXPECT_THAT(metadata, HasSubstr("_event;"));  // a TSDL keyword, escaped
  EXPECT_THAT(metadata, HasSubstr("a_b;"));     // not an identifier, sanitised
  EXPECT_THAT(metadata, HasSubstr("absolute = true;"));
  Proc bt = run("babeltrace2 " + out);
  ASSERT_EQ(bt.code, 0) << bt.err;
  EXPECT_EQ(bt.err, "");
  EXPECT_THAT(bt.out, HasSubstr("test:types: { tid = ")) << bt.out.substr(0, 2000);
  EXPECT_THAT(bt.out,
              HasSubstr("{ i8 = -5, i16 = -300, i32 = -70000, i64 = -5000000000, u8 = 200, "
                        "u16 = 60000, u32 = 4000000000, u64 = 18000000000000000000, "
                        "f32 = 1.5, f64 = -2.25, flag = 1, _name_len = 11, name = \"hello world\", "
                        "ptr = 0x1234, event = 7, a_b = 9 }"));
  EXPECT_THAT(bt.out, HasSubstr("test:empty: { tid = "));
  EXPECT_THAT(bt.out,
              HasSubstr("{ _first_len = 0, first = \"\", _second_len = 63, second = "
                        "\"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_\", "
                        "small = 3, _last_len = 4, last = \"tail\" }"));
}

}  // namespace
}  // namespace nanotrace_export_test
