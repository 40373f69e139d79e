// A test binary that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints where before
// dying: the faulting instruction and address, the process's memory map (to tell which library
// the instruction is in), then the stack as "binary(+0xOFFSET)" frames. The GPU machine runs
// stripped copies of these binaries; `addr2line -f -C -e <unstripped binary> 0xOFFSET` turns an
// offset into a line here. Everything in the handler is async-signal-safe (no malloc).
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <initializer_list>

namespace {

void put(const char* s) {
  size_t n = 0;
  while (s[n])
    ++n;
  (void)!write(STDERR_FILENO, s, n);
}

void put_hex(uintptr_t v) {
  char buf[19] = "0x";
  for (int i = 0; i < 16; ++i)
    buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xf];
  buf[18] = 0;
  put(buf);
}

void print_and_die(int sig, siginfo_t* info, void* uc) {
  put("\n*** fatal signal ");
  put_hex(static_cast<uintptr_t>(sig));
  put(" at address ");
  put_hex(reinterpret_cast<uintptr_t>(info->si_addr));
#if defined(__x86_64__)
  const auto* ctx = static_cast<const ucontext_t*>(uc);
  put(", instruction ");
  put_hex(static_cast<uintptr_t>(ctx->uc_mcontext.gregs[REG_RIP]));
  put(", stack pointer ");
  put_hex(static_cast<uintptr_t>(ctx->uc_mcontext.gregs[REG_RSP]));
#endif
  put("\n*** memory map:\n");
  const int fd = open("/proc/self/maps", O_RDONLY);
  if (fd >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
      (void)!write(STDERR_FILENO, buf, n);
    close(fd);
  }
  put("*** stack (addr2line -f -C -e BINARY +OFFSET):\n");
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
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
  struct sigaction sa {};
  sa.sa_sigaction = print_and_die;
  sa.sa_flags = SA_ONSTACK | SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT})
    sigaction(sig, &sa, nullptr);
  return true;
}();

}  // namespace
