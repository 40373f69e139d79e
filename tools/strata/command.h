// Subcommands of the `strata` tool register themselves: each tools/strata/cmd_*.cpp defines
// STRATA_COMMAND(setup) where setup(CLI::App& app) adds its subcommand and callback.
// Callbacks throw strata::Error on bad input; main prints the message on one line and exits 1.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <vector>

namespace strata::cli {

using CommandSetup = std::function<void(CLI::App&)>;
std::vector<CommandSetup>& command_setups();
// Run after every command_setups() entry: for subcommands of subcommands (`bench serve`).
std::vector<CommandSetup>& late_command_setups();

struct CommandRegistrar {
  explicit CommandRegistrar(CommandSetup s) { command_setups().push_back(std::move(s)); }
};
struct LateCommandRegistrar {
  explicit LateCommandRegistrar(CommandSetup s) { late_command_setups().push_back(std::move(s)); }
};

}  // namespace strata::cli

#define STRATA_COMMAND(fn) static ::strata::cli::CommandRegistrar strata_command_##fn(fn)
#define STRATA_LATE_COMMAND(fn) \
  static ::strata::cli::LateCommandRegistrar strata_late_command_##fn(fn)
