#include "engine/device.h"

#include "core/check.h"
#include "ops/cuda/device_context.h"
#include "ops/ops.h"

namespace strata::engine {

namespace {
BackendInit& init_slot(Device d) {
  static BackendInit inits[2] = {nullptr, nullptr};
  return inits[static_cast<int>(d)];
}
}  // namespace

Device parse_device(std::string_view name) {
  if (name == "cpu" || name == "host") return Device::Host;
  if (name == "cuda") return Device::Cuda;
  fail("unknown device \"{}\" (expected cpu or cuda)", name);
}

void register_backend_init(Device device, BackendInit init) {
  init_slot(device) = init;
}

void prepare_device(Device device, OpContext& ctx) {
  ctx.device = device;
  if (device == Device::Host) return;
  // Ops the user forces onto the host run there through the counted bounce (ops/host_bounce.h).
  ctx.force_host_ops = ops::forced_host_ops();
  ctx.allow_host_bounce = !ctx.force_host_ops.empty();
  if (BackendInit init = init_slot(device)) init(ctx);
  // Throws "no cuda backend is available in this build or on this machine" when none is installed.
  device_allocator(device);
}

}  // namespace strata::engine

namespace strata::engine {

DeviceScope::DeviceScope(const OpContext& ctx) {
  if (ctx.device == Device::Cuda && ctx.device_context)
    scope_ = std::make_unique<cuda::ContextScope>(
        *static_cast<cuda::DeviceContext*>(ctx.device_context));
}

DeviceScope::~DeviceScope() = default;

}  // namespace strata::engine
