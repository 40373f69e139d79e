// What a device's memory holds now, for sizing the caches (the executor), and whether a
// device's attention kernels read a KV cache of a given dtype.
#pragma once

#include <cstddef>

#include "core/tensor.h"

namespace strata::engine {

struct DeviceMemory {
  size_t free = 0, total = 0;
};

// The CUDA device's free and total bytes (cudaMemGetInfo after trimming the arena); the host's
// MemAvailable and MemTotal. Throws when the device has no backend.
DeviceMemory device_memory(Device device);

// True when some attention and kv_cache_write kernel of `device` accepts a cache of `dtype`.
bool kv_cache_dtype_supported(Device device, DType dtype);

}  // namespace strata::engine
