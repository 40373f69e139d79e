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

const bool kInstalled = [] {
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now, not inside the handler
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) signal(sig, print_stack_and_die);
  return true;
}();

}  // namespace
