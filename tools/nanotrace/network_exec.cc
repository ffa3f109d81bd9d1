// nanotrace's side of network_commands.hpp: a network command runs in nanotrace-net, found
// beside this executable (the build tree) or in ../libexec/nanotrace (an installed prefix).
// Its place comes from /proc/self/exe, never from the environment.
#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "network_commands.hpp"

namespace nanotrace::cli {
namespace {

std::string helper_path() {
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  std::string dir(self, static_cast<size_t>(n));
  dir.erase(dir.rfind('/'));
  for (const std::string& candidate :
       {dir + "/nanotrace-net", dir + "/../libexec/nanotrace/nanotrace-net"}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

bool run_network_commands(const FleetCommands& fleet, const ShipCommand& ship, char** argv,
                          int* status) {
  const bool network = fleet.agent->parsed() || fleet.fleet->parsed() ||
                       (ship.ship != nullptr && ship.ship->parsed());
  if (!network) return false;
  const std::string helper = helper_path();
  if (helper.empty()) {
    std::fprintf(stderr,
                 "nanotrace: nanotrace-net (which runs agent, fleet and ship) is not installed "
                 "beside this nanotrace or in ../libexec/nanotrace\n");
    *status = 1;
    return true;
  }
  std::fflush(stdout);
  execv(helper.c_str(), argv);
  std::fprintf(stderr, "nanotrace: cannot run %s: %s\n", helper.c_str(), std::strerror(errno));
  *status = 1;
  return true;
}

}  // namespace nanotrace::cli
