// Shared by `strata bench-kernels`' rows (cmd_bench_kernels.cpp, bench_kernels_scan.cpp,
// bench_kernels_small.cpp): deterministic random device tensors, the kernel lookup by name,
// graph-timed launches and the bandwidth rows' line and table formats.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/tensor.h"
#include "ops/registry.h"

namespace strata::cli::bench_kernels {

constexpr double kCeilingGBs = 4570.0;  // the H200's measured read ceiling (spec/performance.md 9)
constexpr double kRotateBytes = 256e6;  // > 4x the 50 MB L2

float next_uniform();  // in (-1, 1): fast, deterministic
uint64_t next_bits();
// e4m3 codes of values uniform in +-300.
void fill_e4m3(uint8_t* q, int64_t n);
// A device tensor of values uniform in +-scale (e4m3: +-300).
Tensor random_device(const Shape& shape, DType dt, float scale);
Tensor device_i32(const std::vector<int32_t>& v);

// One row of the bandwidth tables: a kernel on a shape, the bytes it must move, its time.
struct BandwidthRow {
  std::string kernel, shape;
  double bytes = 0, us = 0;  // us = 0: not timed (a refusal; the shape says why)
};
void print_row(const BandwidthRow& r);          // one line on stdout, flushed
std::string table_row(const BandwidthRow& r);  // its markdown table row (with the newline)
// Input sets to rotate over so that a row's working set exceeds the L2.
int sets_for(double bytes);
// Median microseconds of one launch: `sets` launches (one per input set) captured in a graph.
double time_launches(int sets, const std::function<void(int)>& launch);

template <class Args>
const Kernel<Args>& kernel_named(const char* name) {
  for (const auto& k : OpTable<Args>::kernels())
    if (k.device == Device::Cuda && std::string(k.name) == name) return k;
  fail("no CUDA kernel named {} for op {}", name, Args::kName);
}

}  // namespace strata::cli::bench_kernels
