// Choosing the device a run uses, and starting its backend. A device backend that needs
// start-up (the CUDA backend: pick the GPU, create the stream, install its allocator) registers
// an initializer; prepare_device runs it once and fails clearly when the device is unusable.
#pragma once

#include <memory>
#include <string_view>

#include "ops/registry.h"

namespace strata::cuda {
class ContextScope;
}

namespace strata::engine {

// "cpu" / "host" -> Host, "cuda" -> Cuda; anything else throws naming the value.
Device parse_device(std::string_view name);

using BackendInit = void (*)(OpContext& ctx);
// Called by a backend at static-initialization time. The initializer must be idempotent
// (every run context calls it) and throw strata::Error when the device cannot be used.
void register_backend_init(Device device, BackendInit init);

// Makes `device` usable for ctx (runs the backend's initializer, sets ctx.device, and for a
// device run the ops forced onto the host: ops::forced_host_ops()). Throws
// strata::Error when this build or machine has no backend for it.
void prepare_device(Device device, OpContext& ctx);

// Makes ctx's device context current on this thread for the scope (CUDA: its device selected,
// its arena the allocator of new Device::Cuda tensors; see cuda::ContextScope). Nothing for a
// host context or one not bound to a device context. The Executor opens one at every entry
// point, so an executor works in its own context whichever thread calls it.
class DeviceScope {
 public:
  explicit DeviceScope(const OpContext& ctx);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  std::unique_ptr<cuda::ContextScope> scope_;
};

}  // namespace strata::engine
