// Who this machine is: its hostname, /etc/machine-id and kernel boot id, as the NODE chunk of
// every snapshot and recording names it (base/node_meta.hpp). The one place that asks the
// system for them.
#pragma once

#include <string>

namespace nanotrace::sys {

// This machine's hostname ("" if it cannot be read).
std::string hostname();

struct NodeIdentity {
  std::string hostname;
  std::string machine_id;
  std::string boot_id;
};

// This machine's identity. `name`, if not empty, replaces the hostname (a fleet agent's node
// name). NANOTRACE_NODE_NAME, NANOTRACE_NODE_MACHINE_ID and NANOTRACE_NODE_BOOT_ID replace
// either (to tell apart nodes simulated on one machine; a test that fakes distinct machines
// changes the boot id too). Read where a command starts and passed on from there, never
// changed through the environment.
NodeIdentity node_identity(const std::string& name = {});

}  // namespace nanotrace::sys
