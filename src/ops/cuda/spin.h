// A kernel that keeps one SM busy for a number of clock cycles. Profiling only: put in front of
// an eagerly launched step, it holds the stream while the host enqueues the whole step, so the
// step's kernels then run back to back (as in a CUDA graph) and events between them time the
// kernels, not the host's launch latency.
#pragma once

#include <cstdint>

namespace strata::cuda {

void launch_spin(int64_t cycles, void* stream);

}  // namespace strata::cuda
