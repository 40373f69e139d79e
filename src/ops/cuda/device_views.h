// Plain descriptions of tensors handed from the kernel registrations (.cpp, where arguments are
// checked) to the launchers (.cu, which only launch). No CUDA or fmt types, so both sides
// include it.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace strata::cuda {

// A row-major 2-D view: element (r, c) at p + r * ld + c (ld >= cols, in elements).
struct Mat {
  void* p = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  DType dt = DType::F32;
};

// The e4m3 copy a producer op writes for the W8A8 linear that consumes its output
// (ops::QuantizedOut): element (r, c) = e4m3_sat(value / scale) at p + r * ld + c (bytes);
// p null = none.
struct QuantOut {
  void* p = nullptr;
  int64_t ld = 0;
  float scale = 1.f;
};

// A contiguous vector (parameters, index tensors); p may be null for an absent tensor.
struct Vec {
  void* p = nullptr;
  int64_t n = 0;
  DType dt = DType::F32;
};

}  // namespace strata::cuda
