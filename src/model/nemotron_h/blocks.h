// The four mixers of a Nemotron-H layer, each a fixed sequence of ops (spec 3.2-3.5). Every
// block reads the normalized input `a` [T, H] (act) and writes `out` [T, H] (act); neither may
// alias the residual stream.
#pragma once

#include "cache/cache_plan.h"
#include "model/nemotron_h/config.h"
#include "engine/step_input.h"
#include "model/nemotron_h/weights.h"
#include "ops/ops.h"

namespace strata::model {

// Workspace tensors of the step live on ctx.device in the activation dtype unless noted.
inline Tensor workspace(OpContext& ctx, const Shape& shape, DType dtype) {
  return Tensor::empty(shape, dtype, ctx.device);
}

void mamba_block(OpContext& ctx, const ModelConfig& c, const MambaWeights& w, const Tensor& a,
                 const engine::StepInput& step, cache::MambaStatePool& states, int64_t mamba_layer,
                 Tensor& out);

void attention_block(OpContext& ctx, const ModelConfig& c, const AttentionWeights& w,
                     const Tensor& a, const engine::StepInput& step, cache::KvBlockPool& kv,
                     int64_t attn_layer, Tensor& out);

// relu² MLP: out = down(relu(up(a))²). Also the MoE's shared expert.
void mlp_block(OpContext& ctx, const MlpWeights& w, const Tensor& a, Tensor& out);

// out = routed experts + shared expert. With `shared_out` given and a shared expert, the sum is
// left to the caller: out gets the routed experts and *shared_out the shared expert (the next
// rms_norm adds them as its x2, the add op fused in).
void moe_block(OpContext& ctx, const ModelConfig& c, const MoeWeights& w, const Tensor& a,
               Tensor& out, Tensor* shared_out = nullptr);

}  // namespace strata::model
