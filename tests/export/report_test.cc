// `nanotrace report` rendered by headless Chromium (Debian's chromium): the DOM it builds is
// checked against the records of `nanotrace dump` (every record accounted for by the
// timelines, pairs, log-spaced histogram buckets, legend, hover texts), and a PNG screenshot
// is kept as a test artifact.
#include "common/prerequisite.hpp"
#include "export_fixture.hpp"

namespace nanotrace_export_test {
namespace {

const char* kChromium = "/usr/bin/chromium";

// The element of `dom` with id="<id>" (its start tag to the end tag `close`), or "".
std::string element(const std::string& dom, const std::string& id, const std::string& close) {
  size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  size_t start = dom.rfind('<', at);
  size_t end = dom.find(close, at);
  return end == std::string::npos ? "" : dom.substr(start, end + close.size() - start);
}

// The value of attribute `name` in the start tag beginning at `tag` of `text`.
std::string attribute(const std::string& text, size_t tag, const std::string& name) {
  size_t close = text.find('>', tag);
  size_t at = text.find(" " + name + "=\"", tag);
  if (at == std::string::npos || at > close) return "";
  at += name.size() + 3;
  return text.substr(at, text.find('"', at) - at);
}

// Start offsets of every tag of `text` opening with `prefix` (e.g. `<rect class="rec"`).
std::vector<size_t> tags(const std::string& text, const std::string& prefix) {
  std::vector<size_t> out;
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    out.push_back(at);
  }
  return out;
}

uint64_t sum_attribute(const std::string& text, const std::string& prefix,
                       const std::string& name) {
  uint64_t sum = 0;
  for (size_t at : tags(text, prefix)) sum += std::stoull(attribute(text, at, name));
  return sum;
}

// The text of the <title> child of the element starting at `tag`.
std::string title_of(const std::string& text, size_t tag) {
  size_t open = text.find("<title>", tag);
  size_t close = text.find("</title>", open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return text.substr(open + 7, close - open - 7);
}

class ReportTest : public ExportTest {
 protected:
  void SetUp() override {
    ExportTest::SetUp();
    std::string profile = path("profile");
    fs::create_directories(profile);
    flags_ =
        " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
        "--disable-background-networking --disable-component-update --disable-sync "
        "--enable-logging=stderr --v=0 --user-data-dir=" +
        profile;
  }

  // The report's DOM as Chromium builds it; fails the test on a console message (a script
  // error or any other).
  std::string render(const std::string& html) {
    Proc dom = run(std::string("timeout 180 ") + kChromium + flags_ + " --dump-dom file://" + html);
    EXPECT_EQ(dom.code, 0) << dom.err;
    for (const std::string& line : lines(dom.err)) {
      EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;
    }
    EXPECT_THAT(dom.out, HasSubstr("</html>"));
    return dom.out;
  }

  // The records of `source` as `nanotrace dump` prints them: time, tid, event, fields text.
  struct Line {
    uint64_t time_ns;
    uint32_t tid;
    std::string event, fields;
  };
  static std::vector<Line> dump_text(const std::string& source) {
    Proc r = run(kCli + " dump " + source);
    EXPECT_EQ(r.code, 0) << r.err;
    std::vector<Line> out;
    static const std::regex kLine(R"(^\s*(\d+)\s+(\d+)\s+\S+\s+(\S+)\s+(.*)$)");
    for (const std::string& l : lines(r.out)) {
      std::smatch m;
      if (!std::regex_match(l, m, kLine)) continue;
      out.push_back({std::stoull(m[1]), static_cast<uint32_t>(std::stoul(m[2])), m[3], m[4]});
    }
    return out;
  }

  std::string flags_;
};

TEST_F(ReportTest, RendersEveryRecordInChromium) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 2 --ops 3000 --gap-ns 2000");
  std::string html = path("report.html");
  Proc r = run(kCli + " report " + sim.path() + " -o " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  std::string page = read_file(html);
  // Self-contained: no script, no external resource.
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
  NANOTRACE_REQUIRE(access(kChromium, X_OK) == 0, "chromium is not installed (/usr/bin/chromium)");

  std::string dom = render(html);
  std::vector<json> records = dump_json(sim.path());
  EXPECT_THAT(dom, HasSubstr("<td id=\"records\">" + std::to_string(records.size()) + "</td>"));
  EXPECT_THAT(dom, HasSubstr("<td id=\"lost\">0</td>"));
  EXPECT_THAT(dom, HasSubstr("io:submit -&gt; io:complete by req"));  // inferred pair
  EXPECT_THAT(dom, HasSubstr("<td>6000</td>"));                       // its pair count
  for (const char* thread : {"worker-0", "worker-1"}) EXPECT_THAT(dom, HasSubstr(thread));

  // The whole-trace timeline accounts for every record.
  std::string overview = element(dom, "overview", "</svg>");
  ASSERT_FALSE(overview.empty());
  EXPECT_EQ(attribute(overview, 0, "data-records"), std::to_string(records.size()));
  EXPECT_EQ(sum_attribute(overview, "<rect class=\"rec\"", "data-n"), records.size());
  EXPECT_EQ(attribute(overview, 0, "data-pairs"), "6000");

  // The busiest window: the records and pairs it shows are those of its time range.
  std::string window = element(dom, "window", "</svg>");
  ASSERT_FALSE(window.empty());
  uint64_t w0 = std::stoull(attribute(window, 0, "data-begin-ns"));
  uint64_t w1 = std::stoull(attribute(window, 0, "data-end-ns"));
  uint64_t in_window = 0, pairs_in_window = 0;
  std::map<uint64_t, uint64_t> open;  // req -> begin time
  for (const json& rec : records) {
    uint64_t t = rec["time_ns"];
    if (t >= w0 && t < w1) ++in_window;
    if (rec["event"] == "io:submit") open[rec["fields"]["req"]] = t;
    if (rec["event"] == "io:complete") {
      auto it = open.find(rec["fields"]["req"]);
      ASSERT_NE(it, open.end());
      if (it->second < w1 && t >= w0) ++pairs_in_window;
      open.erase(it);
    }
  }
  EXPECT_GT(in_window, 0u);
  EXPECT_EQ(attribute(window, 0, "data-records"), std::to_string(in_window));
  EXPECT_EQ(sum_attribute(window, "<rect class=\"rec\"", "data-n"), in_window);
  EXPECT_EQ(attribute(window, 0, "data-pairs"), std::to_string(pairs_in_window));

  // Hovering a column shows its count and the fields of its first record: each thread's
  // first record is the first of its column on the whole-trace timeline.
  std::vector<size_t> rects = tags(overview, "<rect class=\"rec\"");
  std::set<std::string> titles;
  for (size_t at : rects) {
    std::string t = title_of(overview, at);
    EXPECT_THAT(t, HasSubstr(attribute(overview, at, "data-n") + " record")) << t;
    titles.insert(t.substr(t.find("first: ") + 7));
  }
  std::set<uint32_t> seen;
  for (const Line& l : dump_text(sim.path())) {
    if (!seen.insert(l.tid).second) continue;
    std::string want = fmt::format("{} ns, tid {}, {}: {}", l.time_ns, l.tid, l.event, l.fields);
    EXPECT_EQ(titles.count(want), 1u) << want;
  }
  EXPECT_EQ(seen.size(), 3u);
  // Hovering a pairs column names the slowest pair of the column.
  std::vector<size_t> pair_rects = tags(window, "<rect class=\"pair\"");
  ASSERT_FALSE(pair_rects.empty());
  for (size_t at : pair_rects) {
    EXPECT_THAT(title_of(window, at), HasSubstr("slowest: io:submit -&gt; io:complete by req: "));
    EXPECT_THAT(title_of(window, at), HasSubstr("end record io:complete: req="));
  }

  // The legend names the colours of every event and of the pair rule.
  std::string legend = element(dom, "legend", "</div>");
  ASSERT_FALSE(legend.empty());
  for (const char* event :
       {"io:submit", "io:complete", "debug:checkpoint", "io:error", "app:start", "app:stop"}) {
    EXPECT_THAT(legend, HasSubstr("</span>" + std::string(event) + "</li>")) << event;
  }
  EXPECT_THAT(element(dom, "legend-rules", "</ul>"),
              HasSubstr("</span>io:submit -&gt; io:complete by req</li>"));

  // Histogram: log2 buckets, contiguous, every pair counted, heights on a log scale.
  size_t hist = dom.find("<svg class=\"histogram\"");
  ASSERT_NE(hist, std::string::npos);
  std::string histogram = dom.substr(hist, dom.find("</svg>", hist) - hist);
  uint64_t pairs = 0, previous_hi = 0;
  std::vector<double> per_decade;  // height / (1 + log10(count)): constant on a log scale
  for (size_t at : tags(histogram, "<rect class=\"bucket\"")) {
    uint64_t lo = std::stoull(attribute(histogram, at, "data-lo-ns"));
    uint64_t hi = std::stoull(attribute(histogram, at, "data-hi-ns"));
    uint64_t count = std::stoull(attribute(histogram, at, "data-count"));
    if (lo > 0) {
      EXPECT_EQ(hi, 2 * lo);
    }
    if (previous_hi > 0) {
      EXPECT_EQ(lo, previous_hi);
    }
    previous_hi = hi;
    pairs += count;
    EXPECT_THAT(title_of(histogram, at), HasSubstr(fmt::format(": {} pair", count)));
    if (count > 0) {
      per_decade.push_back(std::stod(attribute(histogram, at, "height")) /
                           (1 + std::log10(static_cast<double>(count))));
    }
  }
  EXPECT_EQ(pairs, 6000u);
  ASSERT_GE(per_decade.size(), 2u);
  for (double h : per_decade) EXPECT_NEAR(h, per_decade[0], 0.2);
  EXPECT_THAT(histogram, HasSubstr("pairs (log scale)"));

  std::string artifacts = NANOTRACE_ARTIFACT_DIR;
  fs::create_directories(artifacts);
  std::string png = artifacts + "/report.png";
  fs::remove(png);
  Proc shot = run(std::string("timeout 180 ") + kChromium + flags_ + " --screenshot=" + png +
                  " --window-size=1280,2000 file://" + html);
  ASSERT_EQ(shot.code, 0) << shot.err;
  ASSERT_TRUE(fs::exists(png));
  EXPECT_GT(fs::file_size(png), 10000u);
  fs::copy_file(html, artifacts + "/report.html", fs::copy_options::overwrite_existing);
}

// Events registered by the program but never hit make no default pair; a pair asked for
// that never fired says so instead of showing latencies of 0 ns.
TEST_F(ReportTest, DefaultPairsAreAmongEventsThatOccurred) {
  // Only the app group records: io:submit and io:complete exist but never fire.
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 1 --ops 100", "NANOTRACE_GROUPS=app");
  Proc r = run(kCli + " report " + sim.path() + " -o " + path("r.html"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::string page = read_file(path("r.html"));
  EXPECT_THAT(page, HasSubstr("id=\"no-pairs\""));
  EXPECT_EQ(page.find("io:submit -&gt; io:complete"), std::string::npos);
  EXPECT_EQ(page.find("class=\"histogram\""), std::string::npos);
  EXPECT_EQ(page.find("class=\"pair\""), std::string::npos);

  Proc asked = run(kCli + " report " + sim.path() + " -o " + path("asked.html") +
                   " --pair io:submit,io:complete,req");
  ASSERT_EQ(asked.code, 0) << asked.err;
  page = read_file(path("asked.html"));
  EXPECT_THAT(page, HasSubstr("io:submit -&gt; io:complete by req"));
  EXPECT_THAT(page, HasSubstr("no pair matched (0 begin records, 0 end records)"));
  EXPECT_EQ(page.find(">0 ns<"), std::string::npos);
}

// Many threads: the busiest have a row each, the others share one, and every record is
// still accounted for; the page's size does not grow with the threads.
TEST_F(ReportTest, ManyThreadsShareARow) {
  Traced sim(NANOTRACE_BIN_DIR "/storage_sim --threads 40 --ops 200 --gap-ns 1000");
  Proc r = run(kCli + " report " + sim.path() + " -o " + path("r.html"));
  ASSERT_EQ(r.code, 0) << r.err;
  std::string page = read_file(path("r.html"));
  std::vector<json> records = dump_json(sim.path());
  std::string overview = element(page, "overview", "</svg>");
  EXPECT_EQ(sum_attribute(overview, "<rect class=\"rec\"", "data-n"), records.size());
  // 41 threads (main and 40 workers): 16 rows alone, 25 in the shared row.
  EXPECT_THAT(overview, HasSubstr(">25 other threads</text>"));
  EXPECT_EQ(tags(overview, "<text x=\"4\"").size(), 17u);
  EXPECT_LT(page.size(), 8u << 20);
}

}  // namespace
}  // namespace nanotrace_export_test
