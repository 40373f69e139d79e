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
// Subcommands of `strata bench` (latency, throughput, prefill, serve): each setup gets the
// bench App.
std::vector<CommandSetup>& bench_setups();
// The commit this binary was built from ("1e950f1abcde", "+dirty" when built from changes).
const char* build_commit();

struct CommandRegistrar {
  CommandRegistrar(std::vector<CommandSetup>& list, CommandSetup s) {
    list.push_back(std::move(s));
  }
};

}  // namespace strata::cli

#define STRATA_COMMAND(fn) \
  static ::strata::cli::CommandRegistrar strata_command_##fn(::strata::cli::command_setups(), fn)
#define STRATA_BENCH_COMMAND(fn) \
  static ::strata::cli::CommandRegistrar strata_bench_##fn(::strata::cli::bench_setups(), fn)
