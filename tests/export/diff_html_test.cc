// The page of `nanotrace diff --html` rendered by headless Chromium (Debian's chromium): no
// console message, the headline and ranked table (of the changes observed, one run a side)
// name the planted stage first, and each
// subject's histograms of A and B share their buckets (so that bars line up) and account for
// every sample. A PNG screenshot is kept as a test artifact. Label: system (a browser).
#include "export_fixture.hpp"

namespace nanotrace_export_test {
namespace {

const char* kChromium = "/usr/bin/chromium";

// The element with id="<id>" up to the end tag `close`, or "".
std::string element(const std::string& dom, const std::string& id, const std::string& close) {
  size_t at = dom.find("id=\"" + id + "\"");
  if (at == std::string::npos) return "";
  size_t start = dom.rfind('<', at);
  size_t end = dom.find(close, at);
  return end == std::string::npos ? "" : dom.substr(start, end + close.size() - start);
}

// Every value of attribute `name` in the tags of `text` that open with `prefix`.
std::vector<std::string> attributes(const std::string& text, const std::string& prefix,
                                    const std::string& name) {
  std::vector<std::string> out;
  for (size_t at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at + 1)) {
    const size_t close = text.find('>', at);
    size_t v = text.find(" " + name + "=\"", at);
    if (v == std::string::npos || v > close) continue;
    v += name.size() + 3;
    out.push_back(text.substr(v, text.find('"', v) - v));
  }
  return out;
}

TEST(DiffHtmlTest, RendersInChromiumWithSideBySideHistograms) {
  if (access(kChromium, X_OK) != 0) GTEST_SKIP() << "chromium is not installed (/usr/bin/chromium)";
  const fs::path dir =
      fs::temp_directory_path() / ("nanotrace-diff-html-" + std::to_string(getpid()));
  fs::create_directories(dir);
  Traced a(NANOTRACE_BIN_DIR "/stages_program --requests 800");
  Traced b(NANOTRACE_BIN_DIR "/stages_program --requests 800 --delay-stage write --delay-us 400");
  const std::string html = (dir / "diff.html").string();
  Proc d = run(kCli + " diff " + a.path() + " " + b.path() + " --html " + html);
  ASSERT_EQ(d.code, 0) << d.err;
  const std::string profile = (dir / "profile").string();
  const std::string flags =
      " --headless --no-sandbox --disable-gpu --disable-quic --no-first-run "
      "--disable-background-networking --disable-component-update --disable-sync "
      "--enable-logging=stderr --v=0 --user-data-dir=" +
      profile;
  Proc dom = run(std::string("timeout 180 ") + kChromium + flags + " --dump-dom file://" + html);
  ASSERT_EQ(dom.code, 0) << dom.err;
  for (const std::string& line : lines(dom.err)) {
    EXPECT_EQ(line.find(":CONSOLE"), std::string::npos) << line;
  }
  ASSERT_THAT(dom.out, HasSubstr("</html>"));
  const std::string headline = element(dom.out, "headline", "</p>");
  EXPECT_THAT(headline, HasSubstr("stage:write_begin"));
  // One run a side: the planted stage heads the changes observed (not attributable).
  const std::string ranked = element(dom.out, "observed", "</table>");
  ASSERT_FALSE(ranked.empty());
  const size_t first_row = ranked.find("<tr>", ranked.find("</tr>"));
  EXPECT_THAT(ranked.substr(first_row, ranked.find("</tr>", first_row) - first_row),
              HasSubstr("stage:write_begin"));
  // Every subject: two histograms over the same buckets, 800 samples each.
  for (int s = 0; s < 3; ++s) {
    const std::string id = "subject-" + std::to_string(s);
    const size_t at = dom.out.find("id=\"" + id + "\"");
    ASSERT_NE(at, std::string::npos) << id;
    const size_t end = dom.out.find("</table>", dom.out.find("class=\"sides\"", at));
    const std::string sides = dom.out.substr(at, end - at);
    const size_t split = sides.find("data-rule=\"1\"");
    ASSERT_NE(split, std::string::npos) << id;
    const std::string side_a = sides.substr(0, split), side_b = sides.substr(split);
    EXPECT_EQ(attributes(side_a, "<rect class=\"bucket\"", "data-lo-ns"),
              attributes(side_b, "<rect class=\"bucket\"", "data-lo-ns"));
    for (const std::string* side : {&side_a, &side_b}) {
      uint64_t sum = 0;
      for (const std::string& c : attributes(*side, "<rect class=\"bucket\"", "data-count")) {
        sum += std::stoull(c);
      }
      EXPECT_EQ(sum, 800u) << id;
    }
  }
  std::string artifacts = NANOTRACE_ARTIFACT_DIR;
  fs::create_directories(artifacts);
  const std::string png = artifacts + "/diff.png";
  fs::remove(png);
  Proc shot = run(std::string("timeout 180 ") + kChromium + flags + " --screenshot=" + png +
                  " --window-size=1280,2400 file://" + html);
  ASSERT_EQ(shot.code, 0) << shot.err;
  EXPECT_GT(fs::file_size(png), 10000u);
  fs::copy_file(html, artifacts + "/diff.html", fs::copy_options::overwrite_existing);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nanotrace_export_test
