// fill_synthetic_device: checks the target tensor and launches the device fill (CUDA builds).
#include "core/check.h"
#include "model/nemotron_h/synthetic_launch.h"
#include "model/nemotron_h/synthetic_plan.h"

namespace strata::model {

void fill_synthetic_device(const SyntheticTensor& t, Tensor& out, void* stream) {
#ifdef STRATA_HAVE_CUDA
  if (out.device() != Device::Cuda || out.dtype() != t.dtype || out.shape() != t.shape ||
      !out.is_contiguous())
    fail("synthetic weight {}: wants a contiguous cuda tensor {}{}, got {}", t.name,
         dtype_name(t.dtype), t.shape.str(), out.str());
  SynthLaunch p;
  p.seed = t.seed;
  p.kind = static_cast<int>(t.kind);
  p.k = t.k;
  p.lo = t.lo;
  p.span = t.span;
  p.value = t.value;
  p.inv_scale = t.fp8_inv_scale;
  switch (t.dtype) {
    case DType::F32:
      p.dtype = 0;
      break;
    case DType::BF16:
      p.dtype = 1;
      break;
    case DType::F8E4M3:
      p.dtype = 2;
      break;
    default:
      fail("synthetic weight {}: no device fill for dtype {}", t.name, dtype_name(t.dtype));
  }
  p.out = out.raw();
  p.n = static_cast<uint64_t>(t.shape.numel());
  const int err = launch_synthetic_fill(p, stream);
  if (err != 0)
    fail("synthetic weight {}: device fill failed: {}", t.name, synth_launch_error(err));
#else
  (void)out;
  (void)stream;
  fail("synthetic weight {} on the device: this strata build has no CUDA backend", t.name);
#endif
}

}  // namespace strata::model
