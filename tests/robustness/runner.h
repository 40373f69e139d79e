// Runs the strata binary as a hostile or careless user would, for the robustness suite:
// under an address-space limit, stdin/stdout redirected, and reports how it ended.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace strata::robustness {

struct RunSpec {
  std::vector<std::string> argv;  // argv[0] is the binary
  std::string cwd;
  std::string stdin_path = "/dev/null";  // a file or a directory, opened read-only
  std::string stdout_path;  // "" = a capture file; "/dev/full" to fail writes; "|closed": EPIPE
  uint64_t address_space_bytes = 0;  // RLIMIT_AS of the child; 0 = none
  int timeout_s = 60;
};

struct RunResult {
  bool signaled = false;
  int signal = 0;
  int exit_code = -1;
  bool timed_out = false;
  std::string out, err;
  uint64_t max_rss_bytes = 0;  // from wait4's rusage
};

RunResult run(const RunSpec& spec);

}  // namespace strata::robustness
