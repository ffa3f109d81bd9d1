// A traced test program whose text is hostile, for the tests that every output is valid
// UTF-8: string fields with a 63-byte cut inside a multi-byte character, lone continuation
// bytes, overlong forms, surrogates, code points above U+10FFFF and control characters; a
// thread named with invalid bytes (and the process too, when the test runs it through a link
// with such a name); doubles JSON must keep apart (NaN, +inf, -inf, -0.0, 2.0); and a
// begin/end pair whose key and --by field are invalid text. With --dictionary, also strings
// for dictionary-encoded columns: a field whose values differ only in their ill-formed bytes
// (alike once made valid UTF-8), named like text:begin's, and one of 300 distinct values.
// With --large N, also N text:large records on two threads at once (a file large enough to be
// read in two parts), whose strings and enum values keep changing: a part meets values the
// other never does, and alike strings in different parts.
//
//   text_helper [--dictionary | --large N]   (prints "text_helper pid N segment PATH")
#include <pthread.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <nanotrace/control.hpp>
#include <nanotrace/enum.hpp>
#include <nanotrace/nanotrace.hpp>
#include <string>
#include <thread>

namespace {

void hostile_strings() {
  // 61 + 3, 60 + 4 and 62 + 2 bytes: the 63-byte cut leaves 2 of 3, 3 of 4 and 1 of 2 bytes.
  NANOTRACE(text, cut, "euro={} emoji={} e_acute={}", std::string(61, 'a') + "\xe2\x82\xac",
            std::string(60, 'b') + "\xf0\x9f\x98\x80", std::string(62, 'c') + "\xc3\xa9");
  NANOTRACE(text, bad, "cont={} overlong={} surrogate={} high={} mixed={}", "\x80x\xbf",
            "\xc0\xaf\xe0\x80\xaf\xc1\xbf", "\xed\xa0\x80!", "\xf4\x90\x80\x80\xf5\xff",
            "caf\xc3\xa9 \xe2\x82 ok");
  NANOTRACE(text, control, "forged={} escape={} c1={}", "x\n999 1 forged test:forged ok\r\n",
            "\x1b[31mred\x7f\t\x01", "nel\xc2\x85 ls\xe2\x80\xa8");
}

enum class Stage : uint8_t { kOpen = 1, kRead = 2, kClose = 3 };
NANOTRACE_ENUM(Stage, {Stage::kOpen, "open"}, {Stage::kRead, "read"}, {Stage::kClose, "close"});

// Thread t's half of n text:large records: i / half sweeps the file's time, and each value
// below is a function of it, so new ones appear all along.
void large_half(int t, uint64_t n) {
  const char* const alike[] = {"d\xff", "d\xfe", "d\xef\xbf\xbd", "d\xc3", "d", ""};
  const uint64_t half = n / 2;
  for (uint64_t i = 0; i < half; ++i) {
    const uint64_t at = i * 1000 / half;  // 0..999 along the file
    // Short texts (up to 7 bytes: one word with their length) and long ones.
    std::string many = "s", long_text = "a longer text number ";
    many += std::to_string(at / 2);
    long_text += std::to_string(at / 50);
    const auto stage = static_cast<Stage>(at < 900 ? 1 + at / 300 : 9);  // 9 has no name
    NANOTRACE(text, large, "dev={} many={} long={} stage={} n={} t={}", alike[at * 6 / 1000], many,
              long_text, stage, i, t);
    if (i % 7 == 0) NANOTRACE(text, tick, "n={} many={}", i, many);
  }
}

}  // namespace

void dictionary_strings() {
  const char* const alike[] = {"d\xff", "d\xfe", "d\xef\xbf\xbd", "d\xc3", "d", ""};
  for (int i = 0; i < 600; ++i) {
    NANOTRACE(text, dict, "dev={} many={} n={}", alike[i % 6], "s" + std::to_string(i % 300), i);
  }
}

int main(int argc, char** argv) {
  std::printf("text_helper pid %d segment %s\n", getpid(), nanotrace::segment_path().c_str());
  std::fflush(stdout);
  hostile_strings();
  if (argc > 1 && std::strcmp(argv[1], "--dictionary") == 0) dictionary_strings();
  if (argc > 2 && std::strcmp(argv[1], "--large") == 0) {
    const uint64_t n = std::strtoull(argv[2], nullptr, 10);
    std::thread other(large_half, 1, n);
    large_half(0, n);
    other.join();
  }
  NANOTRACE(text, numbers, "nan={} inf={} ninf={} negzero={} two={} f32={} big={}",
            std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
            -std::numeric_limits<double>::infinity(), -0.0, 2.0, 2.0f, 1e300);
  // A begin/end pair keyed and split by invalid text (latency, report).
  NANOTRACE(text, begin, "key={} dev={}", "k\xff", "d\xc3");
  NANOTRACE(text, end, "key={}", "k\xff");
  std::thread named([] {
    pthread_setname_np(pthread_self(), "thr\xff\xc3\n\x80z");
    hostile_strings();
  });
  named.join();
  return 0;
}
