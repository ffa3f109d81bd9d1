// Reading the fleet's credentials file (credentials.hpp).
#include "fleet/credentials.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>

namespace nanotrace::fleet {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

}  // namespace

Result<Credentials> read_credentials(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
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
  Credentials c;
  std::istringstream in(text);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return Status::Invalid(path + ":" + std::to_string(number) + ": expected key = value");
    }
    std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "token") {
      c.token = value;
    } else if (key == "user") {
      c.user = value;
    } else if (key == "password") {
      c.password = value;
    } else {
      return Status::Invalid(path + ":" + std::to_string(number) + ": unknown key '" + key +
                             "' (token, user, password)");
    }
  }
  if (c.token.empty() && (c.user.empty() || c.password.empty())) {
    return Status::Invalid("credentials " + path + " hold neither a token nor a user and password");
  }
  return c;
}

}  // namespace nanotrace::fleet
