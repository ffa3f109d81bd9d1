// Reading the fleet's credentials file (credentials.hpp).
#include "fleet/credentials.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nanotrace::fleet {
namespace {

bool blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// A value as written (already trimmed): quoted, or the text itself. Returns an error's reason,
// or "" and the value in *out.
std::string unquote(std::string_view v, std::string* out) {
  out->clear();
  if (v.empty() || (v.front() != '"' && v.front() != '\'')) {
    out->assign(v);
    return "";
  }
  const char quote = v.front();
  size_t i = 1;
  for (; i < v.size() && v[i] != quote; ++i) {
    if (quote == '"' && v[i] == '\\') {
      if (i + 1 == v.size() || (v[i + 1] != '"' && v[i + 1] != '\\')) {
        return "in \"...\", a backslash stands before \" or \\ only";
      }
      ++i;
    }
    *out += v[i];
  }
  if (i == v.size()) return std::string("the value's ") + quote + " is not closed";
  if (i + 1 != v.size()) return "text after the quoted value (a comment takes a line of its own)";
  return "";
}

}  // namespace

Result<Credentials> parse_credentials(std::string_view text, const std::string& origin) {
  if (text.find('\0') != std::string_view::npos) {
    return Status::Invalid("credentials " + origin + " hold a NUL byte");
  }
  Credentials c;
  bool seen_token = false, seen_user = false, seen_password = false;
  int number = 0;
  while (!text.empty()) {
    ++number;
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);  // a CRLF file
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    const std::string where = origin + ":" + std::to_string(number) + ": ";
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return Status::Invalid(where + "expected key = value");
    std::string_view key = trim(line.substr(0, eq));
    std::string value;
    std::string bad = unquote(trim(line.substr(eq + 1)), &value);
    if (!bad.empty()) return Status::Invalid(where + bad);
    bool* seen = nullptr;
    std::string* field = nullptr;
    if (key == "token") {
      seen = &seen_token, field = &c.token;
    } else if (key == "user") {
      seen = &seen_user, field = &c.user;
    } else if (key == "password") {
      seen = &seen_password, field = &c.password;
    } else {
      return Status::Invalid(where + "unknown key (token, user, password)");
    }
    if (*seen) return Status::Invalid(where + std::string(key) + " is given twice");
    *seen = true;
    *field = std::move(value);
  }
  if (c.token.empty() && (c.user.empty() || c.password.empty())) {
    return Status::Invalid("credentials " + origin +
                           " hold neither a token nor a user and password");
  }
  return c;
}

Result<Credentials> read_credentials(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return Status::NotFound("no credentials file " + path);
    return Status::Invalid("cannot open credentials " + path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::Invalid("credentials " + path + " is not a regular file");
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    return Status::Invalid("credentials " + path +
                           " must be readable by its owner alone (chmod 600)");
  }
  if (st.st_uid != geteuid()) {
    ::close(fd);
    return Status::Invalid("credentials " + path + " belongs to another user");
  }
  if (st.st_size > 64 * 1024) {
    ::close(fd);
    return Status::Invalid("credentials " + path + " is too large");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (n < 0) return Status::Invalid("cannot read credentials " + path);
  text.resize(static_cast<size_t>(n));
  return parse_credentials(text, path);
}

}  // namespace nanotrace::fleet
