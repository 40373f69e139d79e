// The `strata` command: one binary, subcommands registered by tools/strata/cmd_*.cpp.
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <exception>
#include <new>
#include <typeinfo>

#include "command.h"
#include "core/check.h"
#include "io/atomic_file.h"

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

namespace {

bool same_file(int a, int b) {
  struct stat sa {
  }, sb{};
  return ::fstat(a, &sa) == 0 && ::fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// Every error is the last line on stderr, starting "strata: error: ". Whatever a command
// printed to stdout is flushed first so the error cannot land in the middle of it.
int report(const std::string& message) {
  std::fflush(stdout);
  // Streamed text without its newline (generate stopped mid-line): end that line first.
  const char* open_line = strata::io::stdout_line_open() && same_file(1, 2) ? "\n" : "";
  std::fprintf(stderr, "%sstrata: error: %s\n", open_line, message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // A closed pipe on stdout is a write error (EPIPE) reported like any other, not a kill.
  std::signal(SIGPIPE, SIG_IGN);
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
    strata::io::check_stdout();  // a failed write to stdout is an error, not exit 0
  } catch (const CLI::ParseError& e) {
    // --help exits 0; every usage error (unknown flag, out-of-range value) exits 2, as the
    // shell convention has it, whatever CLI11's own code for the kind of error.
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const strata::Error& e) {
    return report(e.what());
  } catch (const std::bad_alloc&) {
    // Admission checks refuse what cannot fit before allocating; this is what slipped past.
    return report(
        "out of host memory: an allocation failed that no admission check foresaw; please "
        "report the command line");
  } catch (const std::exception& e) {
    // Standard-library text (vector::_M_fill_insert, stoi) names no file, flag or limit: it is
    // a bug that an input reached it, so say that rather than print it.
    return report(std::string("internal error: an unexpected ") + typeid(e).name() +
                  " escaped; please report the command line that caused it");
  }
  return 0;
}
