// The `strata` command: one binary, subcommands registered by tools/strata/cmd_*.cpp.
#include <cstdio>
#include <exception>

#include "command.h"
#include "core/check.h"

namespace strata::cli {
std::vector<CommandSetup>& command_setups() {
  static std::vector<CommandSetup> s;
  return s;
}
std::vector<CommandSetup>& bench_setups() {
  static std::vector<CommandSetup> s;
  return s;
}
}  // namespace strata::cli

int main(int argc, char** argv) {
  CLI::App app{"strata: an inference engine for NVIDIA Nemotron-H models"};
  app.require_subcommand(1);
  // Parse errors on one line, like every other error (subcommands inherit this).
  app.failure_message([](const CLI::App*, const CLI::Error& e) {
    return "strata: error: " + std::string(e.what()) + " (see --help)\n";
  });
  for (auto& setup : strata::cli::command_setups())
    setup(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const strata::Error& e) {
    std::fprintf(stderr, "strata: error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
