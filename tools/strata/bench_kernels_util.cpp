#include "bench_kernels_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "core/dtype.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::cli::bench_kernels {

namespace {
uint64_t g_state = 0x1234567;
}  // namespace
float next_uniform() {  // never exactly zero in practice
  uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<float>(z >> 40) * (1.0f / 16777216.0f) * 2.f - 1.f;
}

uint64_t next_bits() {
  uint64_t z = (g_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// 4096 bins, five per random draw: converting one value at a time took seconds for the MoE
// rows' 1.3 GB of experts.
void fill_e4m3(uint8_t* q, int64_t n) {
  static const std::vector<uint8_t> table = [] {
    std::vector<uint8_t> t(4096);
    for (size_t i = 0; i < t.size(); ++i)
      t[i] = fp8e4m3_from_f32_sat((2.f * (static_cast<float>(i) + 0.5f) / 4096.f - 1.f) * 300.f);
    return t;
  }();
  for (int64_t i = 0; i < n;) {
    uint64_t z = next_bits();
    for (int j = 0; j < 5 && i < n; ++j, ++i, z >>= 12)
      q[i] = table[z & 4095u];
  }
}

Tensor random_device(const Shape& shape, DType dt, float scale) {
  Tensor h = Tensor::empty(shape, dt, Device::Host);
  if (dt == DType::F8E4M3) {
    fill_e4m3(static_cast<uint8_t*>(h.raw()), h.numel());
  } else if (dt == DType::BF16) {
    auto* q = static_cast<uint16_t*>(h.raw());
    for (int64_t i = 0; i < h.numel(); ++i)
      q[i] = f32_to_bf16(next_uniform() * scale);
  } else {
    for (int64_t i = 0; i < h.numel(); ++i)
      store_from_f32(h.raw(), dt, static_cast<size_t>(i), next_uniform() * scale);
  }
  return h.to(Device::Cuda);
}

Tensor device_i32(const std::vector<int32_t>& v) {
  Tensor h = Tensor::empty(Shape{static_cast<int64_t>(v.size())}, DType::I32, Device::Host);
  std::copy(v.begin(), v.end(), h.data<int32_t>());
  return h.to(Device::Cuda);
}

int sets_for(double bytes) {
  return static_cast<int>(std::clamp(std::ceil(kRotateBytes / bytes), 1.0, 64.0));
}

double time_launches(int sets, const std::function<void(int)>& launch) {
  for (int i = 0; i < sets; ++i)
    launch(i);  // warm: plans, tables, arena blocks
  cuda::synchronize();
  const double ms = cuda::time_graph_ms(
      [&] {
        for (int i = 0; i < sets; ++i)
          launch(i);
      },
      3, 20);
  return ms * 1000.0 / sets;
}

void print_row(const BandwidthRow& r) {
  if (r.us == 0) {  // not timed: the shape says why
    std::printf("%-34s %s\n", r.kernel.c_str(), r.shape.c_str());
    std::fflush(stdout);
    return;
  }
  std::printf("%-34s %-40s %9.3f MB %8.2f us %7.0f GB/s %5.1f%%\n", r.kernel.c_str(),
              r.shape.c_str(), r.bytes / 1e6, r.us, r.bytes / r.us / 1e3,
              100.0 * r.bytes / r.us / 1e3 / kCeilingGBs);
  std::fflush(stdout);
}

std::string table_row(const BandwidthRow& r) {
  return fmt::format("| {} | {} | {:.3f} | {:.2f} | {:.0f} | {:.1f}% |\n", r.kernel, r.shape,
                     r.bytes / 1e6, r.us, r.bytes / r.us / 1e3,
                     100.0 * r.bytes / r.us / 1e3 / kCeilingGBs);
}

}  // namespace strata::cli::bench_kernels
