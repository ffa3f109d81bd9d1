// libFuzzer target for the fleet's credentials parser (fleet/credentials.hpp): any text must
// give credentials or a one-line error, never a crash; and what it gives must be what the text
// says: credentials written back out quoted parse to the same values (a value keeps every
// character it was written with, '#' and quotes included), and no value holds a line ending or
// a NUL byte.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "fleet/credentials.hpp"

namespace {

std::string quoted(const std::string& v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using nanotrace::fleet::parse_credentials;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto c = parse_credentials(text, "fuzz");
  if (!c.ok()) {
    check(!c.status().message().empty() && c.status().message().find('\n') == std::string::npos);
    return 0;
  }
  check(!c->token.empty() || (!c->user.empty() && !c->password.empty()));
  for (const std::string* v : {&c->token, &c->user, &c->password}) {
    check(v->find_first_of(std::string_view("\n\0", 2)) == std::string::npos);
  }
  std::string again;
  if (!c->token.empty()) again += "token = " + quoted(c->token) + "\n";
  if (!c->user.empty()) again += "user = " + quoted(c->user) + "\n";
  if (!c->password.empty()) again += "password = " + quoted(c->password) + "\n";
  auto d = parse_credentials(again, "again");
  check(d.ok() && d->token == c->token && d->user == c->user && d->password == c->password);
  return 0;
}
