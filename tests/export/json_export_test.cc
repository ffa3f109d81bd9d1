// The JSON-family and tabular exports: JSON lines and CSV against `nanotrace dump`, Chrome
// JSON parsed back with nlohmann-json (slices, thread names, the exact text of every kind of
// value), Perfetto protobuf decoded by a small decoder written here.
#include "export_fixture.hpp"
#include "protobuf_decode.hpp"

namespace nanotrace_export_test {
namespace {

TEST_F(ExportTest, JsonlMatchesDumpAndCsvHasEveryRecord) {
  Traced helper(NANOTRACE_BIN_DIR "/export_helper --pairs 200");
  Proc j = run(kCli + " export " + helper.path() + " -f jsonl -o -");
  ASSERT_EQ(j.code, 0) << j.err;
  Proc d = run(kCli + " dump --json " + helper.path());
  ASSERT_EQ(d.code, 0);
  EXPECT_EQ(j.out, d.out);  // the same objects, byte for byte
  std::vector<std::string> dl = lines(d.out);
  for (const std::string& l : dl) EXPECT_TRUE(json::parse(l).is_object());

  std::string csv = path("t.csv");
  Proc c = run(kCli + " export " + helper.path() + " -f csv -o " + csv);
  ASSERT_EQ(c.code, 0) << c.err;
  std::vector<std::string> rows = lines(read_file(csv));
  ASSERT_EQ(rows.size(), dl.size() + 1);
  EXPECT_EQ(rows[0].rfind("time_ns,tid,thread,seq,event,", 0), 0u);
  for (const char* column : {",id,", ",dev,", ",status,", ",i8,", ",a.b", ",fields.event,"}) {
    EXPECT_THAT(rows[0], HasSubstr(column));
  }
  json first = json::parse(dl[0]);
  EXPECT_EQ(rows[1].rfind(std::to_string(first["time_ns"].get<uint64_t>()) + ",", 0), 0u);
  EXPECT_THAT(read_file(csv), HasSubstr(",test:types,"));
}

TEST_F(ExportTest, ChromeJsonParsesWithSlicesAndThreadNames) {
  Traced helper(NANOTRACE_BIN_DIR
                "/export_helper --pairs 400 --unmatched-begins 5 --unmatched-ends 2");
  std::string out = path("t.json");
  Proc e = run(kCli + " export " + helper.path() + " -f chrome -o " + out +
               " --slice test:begin,test:end,id");
  ASSERT_EQ(e.code, 0) << e.err;
  json doc = json::parse(read_file(out));
  std::vector<json> records = dump_json(helper.path());
  std::set<uint32_t> tids;
  for (const json& r : records) tids.insert(r["tid"].get<uint32_t>());
  std::set<uint32_t> named;
  std::map<std::string, int> phases;
  std::vector<json> events;
  for (const json& ev : doc["traceEvents"]) {
    std::string ph = ev["ph"];
    if (ph == "M") {
      if (ev["name"] == "thread_name") named.insert(ev["tid"].get<uint32_t>());
      continue;
    }
    ++phases[ph];
    events.push_back(ev);
  }
  for (uint32_t t : tids) EXPECT_TRUE(named.count(t)) << "no thread_name for " << t;
  ASSERT_EQ(events.size(), records.size());
  EXPECT_EQ(phases["b"], 400 + 5);
  EXPECT_EQ(phases["e"], 400 + 2);
  EXPECT_EQ(phases["i"], static_cast<int>(records.size()) - 807);
  std::map<std::string, int> open;
  for (size_t i = 0; i < events.size(); ++i) {
    const json& ev = events[i];
    const json& r = records[i];
    EXPECT_EQ(ev["tid"], r["tid"]);
    EXPECT_NEAR(ev["ts"].get<double>(), r["time_ns"].get<double>() / 1000.0, 0.0006);
    EXPECT_EQ(ev["args"], r["fields"]);
    if (ev["ph"] != "i") {
      EXPECT_EQ(ev["name"], "test:begin");
      EXPECT_EQ(ev["cat"], "test");
      EXPECT_EQ(ev["id"], std::to_string(r["fields"]["id"].get<uint64_t>()));
      open[ev["id"]] += ev["ph"] == "b" ? 1 : -1;
    } else {
      EXPECT_EQ(ev["name"], r["event"]);
    }
  }
  int unmatched_begins = 0, unmatched_ends = 0;
  for (auto& [id, n] : open) (n > 0 ? unmatched_begins : unmatched_ends) += n != 0;
  EXPECT_EQ(unmatched_begins, 5);
  EXPECT_EQ(unmatched_ends, 2);
  EXPECT_TRUE(doc["otherData"]["lost"].is_object());
}

TEST_F(ExportTest, PerfettoProtobufDecodes) {
  Traced helper(NANOTRACE_BIN_DIR
                "/export_helper --pairs 300 --unmatched-begins 4 --unmatched-ends 3");
  std::string out = path("t.pftrace");
  Proc e = run(kCli + " export " + helper.path() + " -f perfetto -o " + out +
               " --slice test:begin,test:end,id");
  ASSERT_EQ(e.code, 0) << e.err;
  std::vector<json> records = dump_json(helper.path());
  std::vector<Field> packets;
  ASSERT_TRUE(decode(read_file(out), &packets));
  std::set<uint64_t> tids;
  std::map<uint64_t, std::string> track_names;
  std::map<uint64_t, int> depth;  // per track: open slices
  int begins = 0, ends = 0, instants = 0;
  bool types_checked = false;
  // Names are interned: resolved through the sequence's tables as Perfetto reads them.
  InternTables names;
  std::map<std::string, int> named;  // TrackEvents by resolved name
  for (const Field& p : packets) {
    ASSERT_EQ(p.number, 1u);
    std::vector<Field> pf;
    ASSERT_TRUE(decode(p.bytes, &pf));
    names.add_packet(pf);
    const Field* seq = find(pf, 10);
    ASSERT_TRUE(seq && seq->varint == 1);
    if (const Field* td = find(pf, 60)) {
      std::vector<Field> d;
      ASSERT_TRUE(decode(td->bytes, &d));
      if (const Field* th = find(d, 4)) {
        std::vector<Field> t;
        ASSERT_TRUE(decode(th->bytes, &t));
        tids.insert(find(t, 2)->varint);
      }
      continue;
    }
    const Field* te = find(pf, 11);
    if (!te) continue;
    ASSERT_TRUE(find(pf, 8));  // timestamp
    std::vector<Field> ev;
    ASSERT_TRUE(decode(te->bytes, &ev));
    uint64_t type = find(ev, 9)->varint;
    uint64_t track = find(ev, 11)->varint;
    if (type != 2) {
      const std::string name = names.event_name(ev);
      ++named[name];
      EXPECT_EQ(names.category(ev), name.substr(0, name.find(':'))) << name;
      EXPECT_EQ(find(ev, 23), nullptr) << "names are interned";
    }
    if (type == 1) {
      ++begins;
      EXPECT_EQ(names.event_name(ev), "test:begin");
      EXPECT_EQ(++depth[track], 1) << "slices on one lane must not overlap";
    } else if (type == 2) {
      ++ends;
      EXPECT_EQ(--depth[track], 0);
    } else {
      ASSERT_EQ(type, 3u);
      ++instants;
      if (names.event_name(ev) == "test:types") {
        std::map<std::string, Field> ann;
        for (const Field& f : ev) {
          if (f.number != 4) continue;
          std::vector<Field> a;
          ASSERT_TRUE(decode(f.bytes, &a));
          ann[names.annotation_name(a)] = a.size() > 1 ? a[1] : Field{};
        }
        EXPECT_EQ(static_cast<int64_t>(ann["i64"].varint), -5000000000);
        EXPECT_EQ(ann["i64"].number, 4u);
        EXPECT_EQ(ann["u64"].varint, 18000000000000000000ull);
        EXPECT_EQ(ann["u64"].number, 3u);
        double d;
        std::memcpy(&d, &ann["f64"].varint, 8);
        EXPECT_EQ(d, -2.25);
        EXPECT_EQ(ann["name"].bytes, "hello world");
        EXPECT_EQ(ann["flag"].number, 2u);
        EXPECT_EQ(ann["ptr"].varint, 0x1234u);
        types_checked = true;
      }
    }
  }
  EXPECT_EQ(names.error, "");
  // Every record's event under its own name: the begins and instants by name, plus the ends
  // of matched slices (END events carry no name).
  std::map<std::string, int> want_named;
  for (const json& r : records) ++want_named[r["event"].get<std::string>()];
  want_named["test:end"] -= ends;
  EXPECT_EQ(named, want_named);
  std::set<uint64_t> want_tids;
  for (const json& r : records) want_tids.insert(r["tid"].get<uint64_t>());
  for (uint64_t t : want_tids) EXPECT_TRUE(tids.count(t)) << t;
  EXPECT_TRUE(types_checked);
  EXPECT_EQ(begins, 304);
  EXPECT_EQ(ends, 300);  // the unmatched ends are instants; unmatched begins stay open
  EXPECT_EQ(begins + ends + instants, static_cast<int>(records.size()));
}

// Without --slice, a trace file's records are encoded straight from their bytes and a
// segment's decoded first (perfetto_writer.cc): the same bytes either way, every type of value
// (test:types) included.
TEST_F(ExportTest, PerfettoFromATraceFileIsTheSameAsFromItsSegment) {
  Traced helper(NANOTRACE_BIN_DIR "/export_helper --pairs 50");
  const std::string file = path("t.ntr");
  ASSERT_EQ(run(kCli + " recover " + helper.path() + " -o " + file).code, 0);
  const std::string from_segment = path("segment.pftrace"), from_file = path("file.pftrace");
  ASSERT_EQ(run(kCli + " export " + helper.path() + " -f perfetto -o " + from_segment).code, 0);
  ASSERT_EQ(run(kCli + " export " + file + " -f perfetto -o " + from_file).code, 0);
  const std::string bytes = read_file(from_segment);
  EXPECT_GT(bytes.size(), 1000u);
  EXPECT_TRUE(bytes == read_file(from_file));
}

// The exact text of every kind of value in Chrome JSON: escapes, invalid UTF-8 (U+FFFD), the
// longest string, extreme integers, doubles (shortest round trip, always with a point or an
// exponent; non-finite ones as "NaN", "Infinity", "-Infinity"),
// pointers, and a string slice id. Traced by this process, exported from its own segment.
TEST_F(ExportTest, ChromeJsonEncodesEveryValueExactly) {
  const std::string escapes(nanotrace::abi::kMaxStringBytes, '\x01');  // the most a record expands
  NANOTRACE(edge, strings, "quote={} ctl={} utf8={} bad={} cut={} empty={} worst={} long={}",
            "a\"b\\c/d", "\n\t\r\x01\x1f\x7f", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
            "\xff\xfe ok \xed\xa0\x80", "x\xc3", "", escapes, std::string(100, 'z'));
  NANOTRACE(edge, ints, "i8={} min={} max={} neg={} u64={} u8={}", int8_t{-128},
            std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), int32_t{-1},
            std::numeric_limits<uint64_t>::max(), uint8_t{255});
  NANOTRACE(edge, doubles,
            "zero={} negzero={} tenth={} small={} big={} half={} milli={} e15={} most={} nan={} "
            "inf={} ninf={} f32={} tiny={} max={}",
            0.0, -0.0, 0.1, 1e-7, 1e300, 12.5, -0.001, 1e15, 999999999999.999,
            std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
            -std::numeric_limits<double>::infinity(), 0.1f,
            std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::max());
  NANOTRACE(edge, misc, "null={} ptr={} maxptr={} yes={} no={}", static_cast<void*>(nullptr),
            reinterpret_cast<void*>(0xdeadbeef), reinterpret_cast<void*>(~uintptr_t{0}), true,
            false);
  NANOTRACE(edge, open, "name={}", "req \"7\"");
  NANOTRACE(edge, close, "name={}", "req \"7\"");

  std::string out = path("edge.json");
  Proc e = run(kCli + " export " + std::to_string(getpid()) + " -f chrome -o " + out +
               " --slice edge:open,edge:close,name");
  ASSERT_EQ(e.code, 0) << e.err;
  std::string text = read_file(out);
  for (const std::string& expected : std::vector<std::string>{
           std::string(R"("quote":"a\"b\\c/d")"),
           std::string(R"("ctl":"\n\t\r\u0001\u001f)") + "\x7f\"",
           std::string("\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""),
           std::string(R"("bad":"\ufffd\ufffd ok \ufffd\ufffd\ufffd")"),
           std::string(R"("cut":"x\ufffd","empty":"",)"),
           R"("i8":-128,"min":-9223372036854775808,"max":9223372036854775807,"neg":-1,)"
           R"("u64":18446744073709551615,"u8":255})",
           R"("zero":0.0,"negzero":-0.0,"tenth":0.1,"small":1e-07,"big":1e+300,"half":12.5,)"
           R"("milli":-0.001,"e15":1000000000000000.0,"most":999999999999.999,"nan":"NaN",)"
           R"("inf":"Infinity","ninf":"-Infinity","f32":0.10000000149011612,"tiny":5e-324,)"
           R"("max":1.7976931348623157e+308})",
           R"("null":"0x0","ptr":"0xdeadbeef","maxptr":"0xffffffffffffffff","yes":true,)"
           R"("no":false})",
           R"("ph":"b",)",
           R"("id":"req \"7\"")",
       }) {
    EXPECT_THAT(text, HasSubstr(expected));
  }
  json doc = json::parse(text);  // also rejects invalid UTF-8
  std::map<std::string, json> args;
  for (const json& ev : doc["traceEvents"]) {
    if (ev["ph"] != "M") args[ev["name"]] = ev["args"];
  }
  ASSERT_EQ(args.count("edge:strings"), 1u) << text.substr(0, 2000);
  const json& s = args["edge:strings"];
  EXPECT_EQ(s["quote"], "a\"b\\c/d");
  EXPECT_EQ(s["ctl"], "\n\t\r\x01\x1f\x7f");
  EXPECT_EQ(s["bad"], "\xef\xbf\xbd\xef\xbf\xbd ok \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(s["worst"], escapes);
  EXPECT_EQ(s["long"], std::string(nanotrace::abi::kMaxStringBytes, 'z'));
  EXPECT_EQ(args["edge:ints"]["min"].get<int64_t>(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(args["edge:ints"]["u64"].get<uint64_t>(), std::numeric_limits<uint64_t>::max());
  const json& d = args["edge:doubles"];
  EXPECT_EQ(d["most"].get<double>(), 999999999999.999);
  EXPECT_EQ(d["f32"].get<double>(), static_cast<double>(0.1f));
  EXPECT_EQ(d["tiny"].get<double>(), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(d["max"].get<double>(), std::numeric_limits<double>::max());
}

}  // namespace
}  // namespace nanotrace_export_test
