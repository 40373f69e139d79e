// The executor's launched-but-not-collected step (executor_sampling.cpp): its output buffer
// on the device and, on CUDA, the pinned host copy and the event that says it arrived.
#pragma once

#include <cstdint>

#include "core/tensor.h"
#include "engine/executor.h"

namespace strata::engine {

struct Executor::InFlight {
  bool launched = false;
  int64_t B = 0, K = 0;  // rows; top logprobs per row (0: none requested)
  bool logprobs = false;
  Tensor out;             // i32 [words] on the device (host runs: on the host)
  void* pinned = nullptr;  // host copy of `out` (CUDA)
  size_t pinned_bytes = 0;
  void* event = nullptr;  // cudaEvent_t recorded after the copy
  // Pinned memory the step's input is built in (CUDA): untouched until the step is collected.
  int32_t* staging = nullptr;
  size_t staging_words = 0;
  int32_t* stage(size_t words);
  ~InFlight();  // frees the pinned buffer and the event
  // Words of the output buffer: ids | nonfinite | logprob | rank | top ids | top logprobs.
  static int64_t words(int64_t B, int64_t K, bool lp) { return 2 * B + (lp ? 2 * B + 2 * B * K : 0); }
};

}  // namespace strata::engine
