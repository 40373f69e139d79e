#include "engine/device_memory.h"

#include <fstream>
#include <sstream>
#include <string>

#include "core/check.h"
#include "ops/cuda/cuda_backend.h"
#include "ops/ops.h"

namespace strata::engine {

namespace {
size_t meminfo_kib(const std::string& key) {
  std::ifstream f("/proc/meminfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream in(line.substr(key.size() + 1));
    size_t kib = 0;
    in >> kib;
    return kib;
  }
  return 0;
}
}  // namespace

DeviceMemory device_memory(Device device) {
  DeviceMemory m;
  if (device == Device::Host) {
    m.free = meminfo_kib("MemAvailable") * 1024;
    m.total = meminfo_kib("MemTotal") * 1024;
    return m;
  }
  cuda::memory_info(&m.free, &m.total);
  return m;
}

bool kv_cache_dtype_supported(Device device, DType dtype) {
  // A one-block, one-head probe: supports() looks at dtypes and shapes, not at the data.
  const DType act = DType::BF16;
  ops::AttentionArgs a;
  a.q = Tensor::empty(Shape{1, 64}, act, device);
  a.k_cache = Tensor::empty(Shape{1, 16, 1, 64}, dtype, device);
  a.v_cache = Tensor::empty(Shape{1, 16, 1, 64}, dtype, device);
  a.block_tables = Tensor::zeros(Shape{1, 1}, DType::I32, device);
  a.cu_seqlens_q = Tensor::zeros(Shape{2}, DType::I32, device);
  a.context_lens = Tensor::zeros(Shape{1}, DType::I32, device);
  a.n_heads = a.n_kv_heads = 1;
  a.head_dim = 64;
  a.max_q_len = 1;
  a.out = Tensor::empty(Shape{1, 64}, act, device);
  ops::KvCacheWriteArgs w;
  w.k = Tensor::empty(Shape{1, 64}, act, device);
  w.v = Tensor::empty(Shape{1, 64}, act, device);
  w.k_cache = a.k_cache;
  w.v_cache = a.v_cache;
  w.slot_mapping = Tensor::zeros(Shape{1}, DType::I32, device);
  std::string why;
  return find_kernel(a, device, &why) != nullptr && find_kernel(w, device, &why) != nullptr;
}

}  // namespace strata::engine
