// The op registry (DESIGN principle 1). Each op is an argument struct (src/ops/ops.h); each
// backend registers one or more kernels for it with an honest `supports`. `ops::run` picks,
// at run time, the first kernel of the context's backend that supports the arguments; when
// none does it fails naming the op and every kernel's reason. The host kernels are the
// reference. An op may be forced onto the host (bisecting): then device tensors are bounced
// through host copies, and every bounce is counted and logged.
#pragma once

#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"

namespace strata {

// Per-run execution state: which backend ops run on, the device stream, and counters.
struct OpContext {
  Device device = Device::Host;
  void* stream = nullptr;                // cudaStream_t when device == Cuda
  // The device context the ops run in when device == Cuda (a cuda::DeviceContext: its stream,
  // arena, index-error counter and per-context caches); set by cuda::bind.
  void* device_context = nullptr;
  std::set<std::string> force_host_ops;  // op names forced onto host kernels (bisecting)
  bool allow_host_bounce = false;        // else a forced/missing device op is an error
  std::atomic<int64_t> host_bounces{0};  // ops that ran on host with device tensors
  std::atomic<int64_t> h2d_copies{0};    // host->device transfers made through this context
  std::atomic<int64_t> d2h_copies{0};    // device->host transfers made through this context
  // Called by ops::run with the op's name and its Args before the op runs (activation
  // calibration, tracing); empty = none. An observer may replace tensor handles in the Args
  // (never the data they point to): the per-block gate feeds its host reference the
  // activations the device quantizes that way.
  std::function<void(const char* op, const void* args)> observer;
};

template <class Args>
struct Kernel {
  const char* name;  // e.g. "host", "cuda.small_m"
  Device device;
  // Returns true when this kernel handles `a`; otherwise sets *why (shapes, dtypes).
  bool (*supports)(const Args& a, std::string* why);
  void (*run)(const Args& a, OpContext& ctx);
  // Optional: true when a later kernel that also supports `a` should run it instead (measured
  // faster there); find_kernel then takes that one, and this one only if none later does. The
  // op harness ignores it and runs every kernel that supports a case.
  bool (*defers)(const Args& a) = nullptr;
};

template <class Args>
class OpTable {
 public:
  static std::vector<Kernel<Args>>& kernels() {
    static std::vector<Kernel<Args>> k;
    return k;
  }
  static void add(const Kernel<Args>& k) { kernels().push_back(k); }
};

// Static registration: `STRATA_REGISTER_KERNEL(RmsNormArgs, host_rms_norm_kernel)` at file
// scope in a kernel file.
template <class Args>
struct KernelRegistrar {
  explicit KernelRegistrar(const Kernel<Args>& k) { OpTable<Args>::add(k); }
};
#define STRATA_REGISTER_KERNEL_CAT2(a, b) a##b
#define STRATA_REGISTER_KERNEL_CAT(a, b) STRATA_REGISTER_KERNEL_CAT2(a, b)
#define STRATA_REGISTER_KERNEL(ArgsT, ...)                            \
  static ::strata::KernelRegistrar<ArgsT> STRATA_REGISTER_KERNEL_CAT( \
      strata_reg_, __LINE__)(::strata::Kernel<ArgsT>{__VA_ARGS__})

// Does `device` have a kernel for this op at all (load-time check, before any shapes exist)?
template <class Args>
bool has_kernel(Device device) {
  for (const auto& k : OpTable<Args>::kernels())
    if (k.device == device) return true;
  return false;
}

// The first kernel for `device` that supports `a`, or nullptr with every kernel's refusal
// appended to *reasons.
template <class Args>
const Kernel<Args>* find_kernel(const Args& a, Device device, std::string* reasons) {
  const Kernel<Args>* deferred = nullptr;  // the first supporting kernel that defers
  for (const auto& k : OpTable<Args>::kernels()) {
    if (k.device != device) continue;
    std::string why;
    if (k.supports(a, &why)) {
      if (k.defers == nullptr || !k.defers(a)) return &k;
      if (deferred == nullptr) deferred = &k;
      continue;
    }
    *reasons += fmt::format(" [{}: {}]", k.name, why);
  }
  if (deferred != nullptr) return deferred;
  if (reasons->empty()) *reasons = " [no kernel registered]";
  return nullptr;
}

// Finds the kernel that will run `a` under `ctx`, or throws naming the op and the reasons.
template <class Args>
const Kernel<Args>& select_kernel(const Args& a, const OpContext& ctx) {
  const bool forced = ctx.force_host_ops.count(Args::kName) > 0;
  const Device want = forced ? Device::Host : ctx.device;
  std::string reasons;
  if (const Kernel<Args>* k = find_kernel(a, want, &reasons)) return *k;
  fail("op {} has no {} kernel for these arguments:{}", Args::kName, device_name(want), reasons);
}

}  // namespace strata
