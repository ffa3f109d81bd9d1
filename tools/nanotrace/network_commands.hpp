// The commands that talk to a network: `agent` and `fleet ...` (NATS, libmicrohttpd) and
// `ship` (ClickHouse over libcurl). Their libraries and the ones they pull in (gnutls, krb5,
// ldap: 42 in all) took every other command about 3 ms to load and initialise, so they live in
// a second executable, nanotrace-net: the same command line with the network commands' code.
// `nanotrace` parses every command (its help and `reference` list them all) and, for these,
// runs nanotrace-net with the same arguments (network_exec.cc); nanotrace-net runs them
// (network_run.cc).
#pragma once

#include "fleet_commands.hpp"
#include "ship_command.hpp"

namespace nanotrace::cli {

// Runs the network command given, if one was: true, and *status its exit status.
bool run_network_commands(const FleetCommands& fleet, const ShipCommand& ship, char** argv,
                          int* status);

}  // namespace nanotrace::cli
