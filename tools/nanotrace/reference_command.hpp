// `nanotrace reference`: every command and option as markdown, walked from the CLI's own
// definitions (docs/reference/commands.md is its output, and a test keeps them equal).
#pragma once

#include <CLI/CLI.hpp>

namespace nanotrace::cli {

// Registers the hidden `reference` subcommand on the tool's top-level App.
CLI::App* register_reference_command(CLI::App& app);
// Prints the markdown reference of every visible subcommand of `app` to stdout; returns 0.
int cmd_reference(const CLI::App& app);

}  // namespace nanotrace::cli
