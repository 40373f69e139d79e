// Plain launch parameters of the device fill of synthetic weights (synthetic_device.cu); kept
// free of fmt and the tensor headers so nvcc only sees what it needs.
#pragma once

#include <cstdint>

namespace strata::model {

struct SynthLaunch {
  uint64_t seed = 0;
  int kind = 0;  // SynthKind
  float k = 0.f, lo = 0.f, span = 0.f, value = 0.f, inv_scale = 1.f;
  int dtype = 0;  // 0 f32, 1 bf16, 2 f8e4m3
  void* out = nullptr;
  uint64_t n = 0;
};

// Enqueues the fill on `stream`; returns 0 or the CUDA error code, described by
// synth_launch_error().
int launch_synthetic_fill(const SynthLaunch& p, void* stream);
const char* synth_launch_error(int code);

}  // namespace strata::model
