// A traced test program whose text is hostile, for the tests that every output is valid
// UTF-8: string fields with a 63-byte cut inside a multi-byte character, lone continuation
// bytes, overlong forms, surrogates, code points above U+10FFFF and control characters; a
// thread named with invalid bytes (and the process too, when the test runs it through a link
// with such a name); doubles JSON must keep apart (NaN, +inf, -inf, -0.0, 2.0); and a
// begin/end pair whose key and --by field are invalid text. With --dictionary, also strings
// for dictionary-encoded columns: a field whose values differ only in their ill-formed bytes
// (alike once made valid UTF-8), named like text:begin's, and one of 300 distinct values.
//
//   text_helper [--dictionary]   (prints "text_helper pid N segment PATH")
#include <pthread.h>

#include <cstdio>
#include <cstring>
#include <limits>
#include <nanotrace/control.hpp>
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
