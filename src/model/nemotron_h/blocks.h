// The four mixers of a Nemotron-H layer, each a fixed sequence of ops (spec 3.2-3.5). Every
// block reads the normalized input (BlockInput) and writes `out` [T, H] (act); neither may
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

// ---- W8A8 inputs quantized by their producers ----
// A W8A8 linear multiplies e4m3(x / input_scale). Where that is fused (fuse_w8a8_quant), the op
// that makes x writes the e4m3 copy itself (ops::QuantizedOut: rms_norm, gated_rms_norm, relu2)
// and the linear takes it, instead of a separate quantize pass over x inside the linear; the
// values are the same bytes either way.

// On a device unless STRATA_UNFUSED_W8A8_QUANT=1 (A/B: the linears quantize in their own pass).
// Never on the host: the host linear computes W8A16 (bf16 x, the reference) and keeps it.
bool fuse_w8a8_quant(const OpContext& ctx);
// input_scale of a W8A8 weight (e4m3 with a static input scale), else 0.
float w8a8_input_scale(const LinearWeight& w);
// When fusing on ctx and `consumer` is W8A8: sets q.out_q to a new [T, N] e4m3 workspace and
// q.out_q_scale to the consumer's input scale, and returns true.
bool quantize_for(OpContext& ctx, const LinearWeight& consumer, int64_t T, int64_t N,
                  ops::QuantizedOut& q);
// The input scale the norm before layer L quantizes its output with, for the block's first
// linears (0 = none): Mamba in_proj, attention q/k/v (only when the three share it), MLP up; not
// MoE (its shared expert's up quantizes beside the routed experts: w8a8_inputs.cpp says why).
// Nonzero only where those linears are all the block reads of its input, so the norm then
// writes the e4m3 copy alone.
float layer_input_q_scale(const LayerWeights& L);

// A block's normalized input: `a` [T, H] act and, when the norm wrote one, its e4m3 copy `q`
// (q_scale: layer_input_q_scale); `a` may be undefined when the block reads only q.
struct BlockInput {
  BlockInput(const Tensor& a_) : a(a_), act(a_.dtype()) {}  // act only (implicit: the gate's host)
  BlockInput(const Tensor& a_, const Tensor& q_, float q_scale_, DType act_)
      : a(a_), q(q_), q_scale(q_scale_), act(act_) {}
  Tensor a;  // [T, H] act, or undefined
  Tensor q;  // [T, H] f8e4m3, or undefined
  float q_scale = 0.f;
  DType act;
  int64_t rows() const { return a.defined() ? a.dim(0) : q.dim(0); }
  // The x of a linear with weight w: q when w is W8A8 with q's scale, else a.
  Tensor x_for(const LinearWeight& w) const;
};

void mamba_block(OpContext& ctx, const ModelConfig& c, const MambaWeights& w, const BlockInput& in,
                 const engine::StepInput& step, cache::MambaStatePool& states, int64_t mamba_layer,
                 Tensor& out);

void attention_block(OpContext& ctx, const ModelConfig& c, const AttentionWeights& w,
                     const BlockInput& in, const engine::StepInput& step, cache::KvBlockPool& kv,
                     int64_t attn_layer, Tensor& out);

// relu² MLP: out = down(relu(up(a))²). Also the MoE's shared expert.
void mlp_block(OpContext& ctx, const MlpWeights& w, const BlockInput& in, Tensor& out);

// out = routed experts + shared expert. With `shared_out` given and a shared expert, the sum is
// left to the caller: out gets the routed experts and *shared_out the shared expert (the next
// rms_norm adds them as its x2, the add op fused in).
void moe_block(OpContext& ctx, const ModelConfig& c, const MoeWeights& w, const BlockInput& in,
               Tensor& out, Tensor* shared_out = nullptr);

}  // namespace strata::model
