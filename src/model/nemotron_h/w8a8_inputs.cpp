// Which W8A8 inputs the producers quantize themselves (blocks.h, "W8A8 inputs quantized by
// their producers").
#include <cstdlib>

#include "core/check.h"
#include "model/nemotron_h/blocks.h"

namespace strata::model {

bool fuse_w8a8_quant(const OpContext& ctx) {
  static const bool off = std::getenv("STRATA_UNFUSED_W8A8_QUANT") != nullptr;
  return ctx.device != Device::Host && !off;
}

float w8a8_input_scale(const LinearWeight& w) {
  return w.weight.defined() && w.weight.dtype() == DType::F8E4M3 && w.input_scale > 0.f
             ? w.input_scale
             : 0.f;
}

bool quantize_for(OpContext& ctx, const LinearWeight& consumer, int64_t T, int64_t N,
                  ops::QuantizedOut& q) {
  const float s = w8a8_input_scale(consumer);
  if (!fuse_w8a8_quant(ctx) || s <= 0.f) return false;
  q.out_q = workspace(ctx, Shape{T, N}, DType::F8E4M3);
  q.out_q_scale = s;
  return true;
}

float layer_input_q_scale(const LayerWeights& L) {
  switch (L.kind) {
    case LayerKind::Mamba:
      return w8a8_input_scale(L.mamba.in_proj);
    case LayerKind::Attention: {
      const float s = w8a8_input_scale(L.attention.q_proj);
      return s == w8a8_input_scale(L.attention.k_proj) && s == w8a8_input_scale(L.attention.v_proj)
                 ? s
                 : 0.f;
    }
    case LayerKind::Mlp:
      return w8a8_input_scale(L.mlp.up);
    case LayerKind::Moe:
      // Not fused: the router and the routed experts read act, so the norm would write both
      // (on the step stream), while the shared expert's up, the only W8A8 reader, runs on the
      // side stream beside the routed experts, where its own quantize pass costs the step nothing.
      // Measured on the H200 (docs/BENCHMARKS.md, branch fuse5): the norm with both outputs took
      // 11.34 against 8.99 us at 512 tokens and 3.69 against 2.63 us at 8.
      return 0.f;
  }
  return 0.f;
}

Tensor BlockInput::x_for(const LinearWeight& w) const {
  if (q.defined() && q_scale > 0.f && w8a8_input_scale(w) == q_scale) return q;
  STRATA_CHECK(a.defined());  // the norm wrote only the e4m3 copy, and w cannot take it
  return a;
}

}  // namespace strata::model
