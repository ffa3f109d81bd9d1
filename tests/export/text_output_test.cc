// Text is data: every output of the CLI is valid UTF-8 whatever the trace holds (invalid
// bytes in strings, thread and process names become U+FFFD, the same way everywhere, as
// Python's errors="replace" does), text output cannot be forged by control characters, and
// JSON keeps NaN, infinities, -0.0 and 2.0 as what they are. Checked by real parsers:
// Python's strict UTF-8 decoder and csv module, nlohmann-json, babeltrace2, and the protobuf
// decoder of the Perfetto tests. Also: sources that are no trace (FIFO, directory, device),
// negative arguments, outputs that would overwrite their source, and output modes.
#include <sys/stat.h>

#include "base/utf8.hpp"
#include "export_fixture.hpp"
#include "protobuf_decode.hpp"

namespace nanotrace_export_test {
namespace {

const std::string kPython = "/usr/bin/python3";
const std::string R = "\xef\xbf\xbd";  // U+FFFD

std::string times(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// What text_helper's strings become.
const std::map<std::string, std::string>& expected_fields() {
  static const std::map<std::string, std::string> kFields = {
      // The writer never cuts inside a character: the whole character goes.
      {"euro", std::string(61, 'a')},
      {"emoji", std::string(60, 'b')},
      {"e_acute", std::string(62, 'c')},
      {"cont", R + "x" + R},
      {"overlong", times(R, 7)},
      {"surrogate", times(R, 3) + "!"},
      {"high", times(R, 6)},
      {"mixed", "caf\xc3\xa9 " + R + " ok"},
      {"forged", "x\n999 1 forged test:forged ok\r\n"},
      {"escape", "\x1b[31mred\x7f\t\x01"},
      {"c1", "nel\xc2\x85 ls\xe2\x80\xa8"},
  };
  return kFields;
}
const std::string kThreadName = "thr" + R + R + "\n" + R + "z";
const std::string kLinkName = "pn\xe2\x82\xff";  // the process name (comm) of text_helper
const std::string kProcessName = "pn" + R + R;

// True if Python's strict decoder accepts the file as UTF-8.
bool python_utf8(const std::string& file) {
  Proc r =
      run(kPython + " -c \"import sys; open(sys.argv[1], 'rb').read().decode('utf-8')\" " + file);
  EXPECT_EQ(r.code, 0) << file << ": " << r.err;
  return r.code == 0;
}

std::string write_to(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

class TextOutputTest : public ExportTest {
 protected:
  void SetUp() override {
    ExportTest::SetUp();
    // Run through a link whose name is not UTF-8: that becomes the process name.
    std::string link = path(kLinkName);
    ASSERT_EQ(symlink(NANOTRACE_BIN_DIR "/text_helper", link.c_str()), 0);
    helper_ = std::make_unique<Traced>(
        "'" + link + "'", "NANOTRACE_NAME='n\xff" + std::string(59, 'u') + "\xe2\x82\xac'");
    source_ = helper_->path();
  }

  // Runs the CLI, expects success, keeps stdout in a file of the test directory.
  std::string cli_to_file(const std::string& args, const std::string& name) {
    Proc r = run(kCli + " " + args);
    EXPECT_EQ(r.code, 0) << args << ": " << r.err;
    return write_to(path(name), r.out);
  }

  std::unique_ptr<Traced> helper_;
  std::string source_;
};

TEST_F(TextOutputTest, DumpJsonAndJsonLinesRepairTextTheSameWay) {
  std::string dumped = cli_to_file("dump --json " + source_, "dump.json");
  ASSERT_TRUE(python_utf8(dumped));
  std::string jsonl = cli_to_file("export " + source_ + " -f jsonl -o -", "export.jsonl");
  EXPECT_EQ(read_file(jsonl), read_file(dumped)) << "JSON lines must be what dump --json prints";
  std::string to_file = path("file.jsonl");
  ASSERT_EQ(run(kCli + " export " + source_ + " -f jsonl -o " + to_file).code, 0);
  EXPECT_EQ(read_file(to_file), read_file(dumped));

  std::map<std::string, int> seen;
  int named_thread_records = 0, records = 0;
  for (const std::string& l : lines(read_file(dumped))) {
    json j = json::parse(l);  // throws on invalid UTF-8
    ++records;
    if (j["thread"] == kThreadName) ++named_thread_records;
    for (const auto& [key, value] : j["fields"].items()) {
      auto it = expected_fields().find(key);
      if (it == expected_fields().end()) continue;
      EXPECT_EQ(value.get<std::string>(), it->second) << key;
      ++seen[key];
    }
  }
  EXPECT_EQ(named_thread_records, 3);
  EXPECT_EQ(records, 9);
  for (const auto& [key, value] : expected_fields()) EXPECT_EQ(seen[key], 2) << key;
}

TEST_F(TextOutputTest, JsonKeepsNonFiniteNegativeZeroAndFloatsApart) {
  Proc d = run(kCli + " dump --json -e text:numbers " + source_);
  ASSERT_EQ(d.code, 0) << d.err;
  Proc e = run(kCli + " export " + source_ + " -f jsonl -o - 2>/dev/null | grep text:numbers");
  ASSERT_EQ(e.code, 0) << e.err;
  for (const std::string& text : {d.out, e.out}) {
    EXPECT_THAT(text, HasSubstr(R"("fields":{"nan":"NaN","inf":"Infinity","ninf":"-Infinity",)"
                                R"("negzero":-0.0,"two":2.0,"f32":2.0,"big":1e+300}})"));
    json f = json::parse(text)["fields"];
    EXPECT_TRUE(f["negzero"].is_number_float());
    EXPECT_TRUE(std::signbit(f["negzero"].get<double>()));
    EXPECT_TRUE(f["two"].is_number_float());
    EXPECT_EQ(f["two"].get<double>(), 2.0);
    EXPECT_TRUE(f["f32"].is_number_float());
  }
  // Chrome JSON spells them the same way.
  std::string chrome = path("t.json");
  ASSERT_EQ(run(kCli + " export " + source_ + " -f chrome -o " + chrome).code, 0);
  EXPECT_THAT(read_file(chrome),
              HasSubstr(R"("nan":"NaN","inf":"Infinity","ninf":"-Infinity","negzero":-0.0,)"
                        R"("two":2.0,"f32":2.0,"big":1e+300})"));
}

TEST_F(TextOutputTest, TextDumpEscapesControlCharacters) {
  std::string text = cli_to_file("dump " + source_, "dump.txt");
  ASSERT_TRUE(python_utf8(text));
  std::vector<std::string> ls = lines(read_file(text));
  ASSERT_EQ(ls.size(), 9u) << "a string field added or forged a line";
  static const std::regex kLine(R"(^ *\d+ +\d+ \S.* text:\w+ .*$)");
  for (const std::string& l : ls) {
    EXPECT_TRUE(std::regex_match(l, kLine)) << l;
    for (char c : l) EXPECT_FALSE(static_cast<unsigned char>(c) < 0x20 || c == 0x7f) << l;
  }
  std::string all = read_file(text);
  EXPECT_THAT(all, HasSubstr(R"(x\n999 1 forged test:forged ok\r\n)"));
  EXPECT_THAT(all, HasSubstr(R"(\x1b[31mred\x7f\t\x01)"));
  EXPECT_THAT(all, HasSubstr(R"(nel\u0085 ls\u2028)"));
  EXPECT_THAT(all, HasSubstr(std::string(61, 'a') + " "));
  EXPECT_THAT(all, HasSubstr("thr" + R + R + "\\n" + R + "z"));
}

TEST_F(TextOutputTest, StatsListAndEventsJsonSurviveInvalidNames) {
  std::string stats = cli_to_file("stats --json " + source_, "stats.json");
  ASSERT_TRUE(python_utf8(stats));
  json s = json::parse(read_file(stats));
  std::set<std::string> names;
  for (const json& t : s["threads"]) names.insert(t["name"].get<std::string>());
  EXPECT_TRUE(names.count(kThreadName)) << s.dump();
  std::string stats_text = cli_to_file("stats " + source_, "stats.txt");
  EXPECT_TRUE(python_utf8(stats_text));

  // One oddly named process must not break `list` for anyone.
  std::string list = cli_to_file("list --json", "list.json");
  ASSERT_TRUE(python_utf8(list));
  bool found = false;
  for (const json& p : json::parse(read_file(list))) {
    if (p["path"] != source_) continue;
    found = true;
    EXPECT_EQ(p["process"], kProcessName);
    std::string name = p["name"];
    EXPECT_EQ(name.rfind("n" + R + std::string(59, 'u'), 0), 0u) << name;
    EXPECT_EQ(name.substr(name.size() - 3), R);  // the 63-byte cut inside the euro sign
  }
  EXPECT_TRUE(found) << read_file(list);
  EXPECT_TRUE(python_utf8(cli_to_file("list", "list.txt")));

  std::string events = cli_to_file("events --json " + source_, "events.json");
  ASSERT_TRUE(python_utf8(events));
  EXPECT_TRUE(json::parse(read_file(events)).is_array());
  EXPECT_TRUE(python_utf8(cli_to_file("events " + source_, "events.txt")));
  EXPECT_TRUE(python_utf8(cli_to_file("status " + source_, "status.txt")));
}

TEST_F(TextOutputTest, CsvIsValidUtf8WithOneRowPerRecord) {
  std::string csv = path("t.csv");
  ASSERT_EQ(run(kCli + " export " + source_ + " -f csv -o " + csv).code, 0);
  ASSERT_TRUE(python_utf8(csv));
  // Python's csv module, reading strictly decoded text, finds the header and 7 rows, and the
  // repaired values in the right columns.
  std::string script = path("check.py");
  write_to(script,
           "import csv, json, sys\n"
           "rows = list(csv.reader(open(sys.argv[1], encoding='utf-8', errors='strict', "
           "newline='')))\n"
           "header = rows[0]\n"
           "out = {'rows': len(rows) - 1, 'values': {}}\n"
           "for r in rows[1:]:\n"
           "    for k, v in zip(header, r):\n"
           "        if v: out['values'].setdefault(k, v)\n"
           "print(json.dumps(out))\n");
  Proc r = run(kPython + " " + script + " " + csv);
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["rows"], 9);
  for (const auto& [key, value] : expected_fields()) EXPECT_EQ(j["values"][key], value) << key;
  EXPECT_EQ(j["values"]["thread"].get<std::string>().rfind("", 0), 0u);
}

TEST_F(TextOutputTest, ChromeJsonIsValidWithRepairedNames) {
  std::string out = path("t.json");
  ASSERT_EQ(run(kCli + " export " + source_ + " -f chrome -o " + out).code, 0);
  ASSERT_TRUE(python_utf8(out));
  json doc = json::parse(read_file(out));
  std::set<std::string> thread_names;
  std::string process_name;
  int checked = 0;
  for (const json& ev : doc["traceEvents"]) {
    if (ev["name"] == "thread_name") thread_names.insert(ev["args"]["name"].get<std::string>());
    if (ev["name"] == "process_name") process_name = ev["args"]["name"];
    if (ev["ph"] == "M") continue;
    for (const auto& [key, value] : ev["args"].items()) {
      auto it = expected_fields().find(key);
      if (it == expected_fields().end()) continue;
      EXPECT_EQ(value.get<std::string>(), it->second) << key;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * static_cast<int>(expected_fields().size()));
  EXPECT_TRUE(thread_names.count(kThreadName));
  EXPECT_EQ(process_name.rfind("n" + R, 0), 0u);  // the NANOTRACE_NAME
}

// Every string field of the Perfetto trace (names, categories, annotation names and string
// values, track and thread names) is valid UTF-8 to Python, and the repaired values match.
TEST_F(TextOutputTest, PerfettoStringsAreValidUtf8) {
  std::string out = path("t.pftrace");
  ASSERT_EQ(run(kCli + " export " + source_ + " -f perfetto -o " + out).code, 0);
  std::vector<Field> packets;
  ASSERT_TRUE(decode(read_file(out), &packets));
  std::vector<std::string> strings;
  std::map<std::string, std::string> values;
  auto message = [](const std::string& bytes) {
    std::vector<Field> f;
    EXPECT_TRUE(decode(bytes, &f));
    return f;
  };
  InternTables names;
  for (const Field& p : packets) {
    std::vector<Field> pf = message(p.bytes);
    names.add_packet(pf);
    if (const Field* data = find(pf, 12)) {  // interned names: every table's entries
      for (const Field& table : message(data->bytes)) {
        const std::vector<Field> entry = message(table.bytes);  // find() points into it
        if (const Field* text = find(entry, 2)) strings.push_back(text->bytes);
      }
    }
    if (const Field* td = find(pf, 60)) {
      for (const Field& f : message(td->bytes)) {
        if (f.number == 2) strings.push_back(f.bytes);  // track name
        if (f.number == 3 || f.number == 4) {           // process or thread descriptor
          for (const Field& g : message(f.bytes)) {
            if ((f.number == 3 && g.number == 6) || (f.number == 4 && g.number == 5)) {
              strings.push_back(g.bytes);
            }
          }
        }
      }
    }
    if (const Field* te = find(pf, 11)) {
      for (const Field& f : message(te->bytes)) {
        if (f.number == 22 || f.number == 23) strings.push_back(f.bytes);
        if (f.number != 4) continue;
        std::vector<Field> a = message(f.bytes);
        const std::string name = names.annotation_name(a);
        const Field* text = find(a, 6);
        ASSERT_NE(name, "");
        ASSERT_NE(name, "?");
        strings.push_back(name);
        if (text) {
          strings.push_back(text->bytes);
          values[name] = text->bytes;
        }
      }
    }
  }
  EXPECT_EQ(names.error, "");
  EXPECT_TRUE(std::count(strings.begin(), strings.end(), kThreadName) >= 1);
  for (const auto& [key, value] : expected_fields()) EXPECT_EQ(values[key], value) << key;
  // Python decodes each one strictly.
  std::string all;
  for (const std::string& s : strings) all += s + '\0';
  EXPECT_TRUE(python_utf8(write_to(path("strings.bin"), all)));
}

// A trace file's Perfetto export encodes records straight from their bytes, a segment's
// decodes them first (perfetto_writer.cc): the same records give the same bytes, with enum
// names, repaired text and every type of value.
TEST_F(TextOutputTest, PerfettoFromATraceFileIsTheSameAsFromItsSegment) {
  const std::string file = path("t.ntr");
  ASSERT_EQ(run(kCli + " recover " + source_ + " -o " + file).code, 0);
  const std::string from_segment = path("segment.pftrace"), from_file = path("file.pftrace");
  ASSERT_EQ(run(kCli + " export " + source_ + " -f perfetto -o " + from_segment).code, 0);
  ASSERT_EQ(run(kCli + " export " + file + " -f perfetto -o " + from_file).code, 0);
  const std::string bytes = read_file(from_segment);
  EXPECT_GT(bytes.size(), 1000u);
  EXPECT_TRUE(bytes == read_file(from_file));
}

TEST_F(TextOutputTest, CtfReadsInBabeltraceAsValidUtf8) {
  std::string out = path("ctf");
  Proc e = run(kCli + " export " + source_ + " -f ctf -o " + out);
  ASSERT_EQ(e.code, 0) << e.err;
  Proc bt = run("babeltrace2 " + out);
  ASSERT_EQ(bt.code, 0) << bt.err;
  EXPECT_EQ(bt.err, "");
  ASSERT_TRUE(python_utf8(write_to(path("bt.txt"), bt.out)));
  EXPECT_TRUE(python_utf8(out + "/metadata"));
  EXPECT_EQ(lines(bt.out).size(), 9u) << bt.out;
  for (const char* key :
       {"euro", "emoji", "e_acute", "cont", "overlong", "surrogate", "high", "mixed"}) {
    std::string want = std::string(key) + " = \"" + expected_fields().at(key) + "\"";
    size_t n = 0;
    for (size_t at = bt.out.find(want); at != std::string::npos; at = bt.out.find(want, at + 1)) {
      ++n;
    }
    EXPECT_EQ(n, 2u) << want;
  }
}

TEST_F(TextOutputTest, LatencyKeysAndGroupsAreRepaired) {
  const std::string args =
      "latency " + source_ + " --begin text:begin --end text:end --key key --by dev --top 3";
  std::string out = cli_to_file(args + " --json", "latency.json");
  ASSERT_TRUE(python_utf8(out));
  json j = json::parse(read_file(out));
  EXPECT_EQ(j["overall"]["count"], 1);
  ASSERT_EQ(j["groups"].size(), 1u);
  EXPECT_EQ(j["groups"][0]["value"], "d" + R);
  ASSERT_EQ(j["top"].size(), 1u);
  EXPECT_EQ(j["top"][0]["key"], "k" + R);
  EXPECT_TRUE(python_utf8(cli_to_file(args, "latency.txt")));
}

TEST_F(TextOutputTest, HtmlReportIsValidUtf8) {
  std::string out = path("report.html");
  Proc r = run(kCli + " report " + source_ + " -o " + out);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_TRUE(python_utf8(out));
  std::string html = read_file(out);
  EXPECT_THAT(html, HasSubstr("thr" + R + R + "\\n" + R + "z"));
  EXPECT_EQ(html.find('\x1b'), std::string::npos);
}

// utf8::valid() replaces exactly as Python's decode(errors="replace") does, on the hostile
// cases and on random bytes.
TEST(Utf8Test, RepairMatchesPython) {
  std::vector<std::string> cases = {"",
                                    "plain",
                                    "\xc3",
                                    "\xe2\x82",
                                    "\xf0\x9f\x98",
                                    "\x80\xbf",
                                    "\xc0\xaf",
                                    "\xe0\x80\xaf",
                                    "\xed\xa0\x80",
                                    "\xf4\x90\x80\x80",
                                    "\xf5\xff\xfe",
                                    "\xe2\x82 x",
                                    "caf\xc3\xa9",
                                    "\xf0\x9f\x98\x80",
                                    "\xef\xbf\xbd"};
  uint64_t x = 0x9e3779b97f4a7c15ull;
  const char alphabet[] =
      "\x00\x41\x7f\x80\x8f\x90\x9f\xa0\xbf\xc0\xc1\xc2\xdf\xe0\xe1\xed\xee"
      "\xef\xf0\xf1\xf3\xf4\xf5\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    size_t n = 1 + i % 9;
    for (size_t k = 0; k < n; ++k) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      s += alphabet[x % (sizeof(alphabet) - 1)];
    }
    cases.push_back(s);
  }
  char dir[] = "/tmp/nanotrace-utf8-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  std::string in = std::string(dir) + "/in", out = std::string(dir) + "/out";
  {
    std::ofstream f(in, std::ios::binary);
    for (const std::string& c : cases) f << c.size() << '\n' << c;
  }
  write_to(std::string(dir) + "/repair.py",
           "import sys\n"
           "data = open(sys.argv[1], 'rb').read()\n"
           "out = open(sys.argv[2], 'wb')\n"
           "i = 0\n"
           "while i < len(data):\n"
           "    nl = data.index(b'\\n', i)\n"
           "    n = int(data[i:nl])\n"
           "    s = data[nl + 1:nl + 1 + n]\n"
           "    r = s.decode('utf-8', 'replace').encode('utf-8')\n"
           "    out.write(b'%d\\n' % len(r) + r)\n"
           "    i = nl + 1 + n\n");
  Proc p = run(kPython + " " + dir + "/repair.py " + in + " " + out);
  ASSERT_EQ(p.code, 0) << p.err;
  std::string repaired = read_file(out);
  size_t at = 0;
  for (const std::string& c : cases) {
    size_t nl = repaired.find('\n', at);
    ASSERT_NE(nl, std::string::npos);
    size_t n = std::stoul(repaired.substr(at, nl - at));
    std::string want = repaired.substr(nl + 1, n);
    at = nl + 1 + n;
    EXPECT_EQ(nanotrace::utf8::valid(c), want) << testing::PrintToString(c);
    EXPECT_EQ(nanotrace::utf8::is_valid(c), want == c) << testing::PrintToString(c);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nanotrace_export_test
