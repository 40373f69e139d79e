// Registers the CUDA backend's start-up with engine::prepare_device: a run on Device::Cuda
// initializes device 0 (stream, arena) and binds the context to its stream. In a build without
// CUDA, cuda::init_backend throws the backend's own explanation.
#include <string>

#include "core/check.h"
#include "engine/device.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::engine {
namespace {

void init_cuda(OpContext& ctx) {
  try {
    cuda::init_backend(0);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("--device cuda", 0) == 0) throw;
    fail("--device cuda: {}", msg);
  }
  cuda::bind(ctx);
}

const bool registered = (register_backend_init(Device::Cuda, init_cuda), true);

}  // namespace
}  // namespace strata::engine
