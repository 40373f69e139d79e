#include "runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <thread>

namespace strata::robustness {

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// In the child between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(const RunSpec& spec, const std::string& out, const std::string& err,
                             char* const* argv) {
  if (!spec.cwd.empty() && ::chdir(spec.cwd.c_str()) != 0) ::_exit(120);
  const int in_fd = ::open(spec.stdin_path.c_str(), O_RDONLY);
  int out_fd = -1;
  if (spec.stdout_path == "|closed") {  // a pipe whose reader has gone: writes get EPIPE
    int p[2];
    if (::pipe(p) != 0) ::_exit(125);
    ::close(p[0]);
    out_fd = p[1];
  } else {
    out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in_fd < 0 || out_fd < 0 || err_fd < 0) ::_exit(121);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(122);
  if (spec.address_space_bytes) {
    rlimit r{spec.address_space_bytes, spec.address_space_bytes};
    if (::setrlimit(RLIMIT_AS, &r) != 0) ::_exit(123);
  }
  rlimit core{0, 0};  // a crash must not leave a core file in the scratch directory
  ::setrlimit(RLIMIT_CORE, &core);
  ::execv(argv[0], argv);
  ::_exit(124);
}

}  // namespace

RunResult run(const RunSpec& spec) {
  char tmpl[] = "/tmp/strata-robust-io-XXXXXX";
  if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  const std::string io_dir = tmpl;
  const std::string out = spec.stdout_path.empty() ? io_dir + "/out" : spec.stdout_path;
  const std::string err = io_dir + "/err";
  std::vector<char*> argv;
  for (const auto& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) exec_child(spec, out, err, argv.data());

  RunResult r;
  int status = 0;
  rusage usage{};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(spec.timeout_s);
  for (;;) {
    const pid_t w = ::wait4(pid, &status, WNOHANG, &usage);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::wait4(pid, &status, 0, &usage);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.signaled = WIFSIGNALED(status);
  r.signal = r.signaled ? WTERMSIG(status) : 0;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.max_rss_bytes = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  if (spec.stdout_path.empty()) r.out = slurp(out);
  r.err = slurp(err);
  if (spec.stdout_path.empty()) ::unlink(out.c_str());  // never a path the caller named
  ::unlink(err.c_str());
  ::rmdir(io_dir.c_str());
  return r;
}

}  // namespace strata::robustness
