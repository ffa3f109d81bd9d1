// nanotrace-net's side of network_commands.hpp: the network commands run here.
#include "network_commands.hpp"

namespace nanotrace::cli {

bool run_network_commands(const FleetCommands& fleet, const ShipCommand& ship, char** /*argv*/,
                          int* status) {
  return run_fleet_commands(fleet, status) || run_ship_command(ship, status);
}

}  // namespace nanotrace::cli
