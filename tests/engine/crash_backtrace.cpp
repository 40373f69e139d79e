// A test binary that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints its stack before
// dying, as "binary(+0xOFFSET)" frames: the GPU machine runs stripped copies of these binaries,
// and `addr2line -f -C -e <unstripped binary> 0xOFFSET` turns the offsets into lines here.
#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <initializer_list>

namespace {

void print_stack_and_die(int sig) {
  static const char kHead[] = "\n*** fatal signal; stack (addr2line -f -C -e BINARY +OFFSET):\n";
  (void)!write(STDERR_FILENO, kHead, sizeof(kHead) - 1);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);  // async-signal-safe: no malloc
  signal(sig, SIG_DFL);
  raise(sig);
}

// The handler runs on its own stack, so a stack overflow is reported too.
alignas(16) char g_alt_stack[1 << 16];

const bool kInstalled = [] {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  stack_t ss{};
  ss.ss_sp = g_alt_stack;
  ss.ss_size = sizeof(g_alt_stack);
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_handler = print_stack_and_die;
  sa.sa_flags = SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
  return true;
}();

}  // namespace
