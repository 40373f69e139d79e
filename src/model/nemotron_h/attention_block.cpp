// Attention (spec 3.3): q, k, v projections (no bias, no RoPE) -> write k, v into the paged
// cache at the step's slot mapping -> causal GQA attention over each sequence's context
// (decode rows and prefill rows of a mixed step each with their kernels) -> o_proj.
#include <cmath>

#include "model/nemotron_h/blocks.h"

namespace strata::model {

void attention_block(OpContext& ctx, const ModelConfig& c, const AttentionWeights& w,
                     const BlockInput& in, const engine::StepInput& step, cache::KvBlockPool& kv,
                     int64_t attn_layer, Tensor& out) {
  const int64_t T = in.rows();
  const DType act = in.act;
  auto project = [&](const LinearWeight& weight, int64_t width) {
    Tensor y = workspace(ctx, Shape{T, width}, act);
    ops::LinearArgs lin;
    lin.x = in.x_for(weight);
    lin.w = weight;
    lin.out = y;
    ops::run(ctx, lin);
    return y;
  };
  const Tensor q = project(w.q_proj, c.q_size);   // [T, n_heads*hd]
  const Tensor k = project(w.k_proj, c.kv_size);  // [T, n_kv*hd]
  const Tensor v = project(w.v_proj, c.kv_size);  // [T, n_kv*hd]

  ops::KvCacheWriteArgs write;
  write.k = k;
  write.v = v;
  write.k_cache = kv.k_cache(attn_layer);
  write.v_cache = kv.v_cache(attn_layer);
  write.slot_mapping = step.slot_mapping();
  ops::run(ctx, write);

  // Decode rows and prefill rows attend in separate launches (the decode kernel needs
  // q_len 1); each part's queries, block tables and context lengths are views of the step's.
  Tensor o = workspace(ctx, Shape{T, c.q_size}, act);  // [T, n_heads*hd]
  for (const engine::StepPart& part : {step.decode_part(), step.prefill_part()}) {
    if (part.empty()) continue;
    ops::AttentionArgs attn;
    attn.q = part.rows(q);
    attn.k_cache = kv.k_cache(attn_layer);
    attn.v_cache = kv.v_cache(attn_layer);
    attn.block_tables = part.block_tables;
    attn.cu_seqlens_q = part.cu_seqlens;
    attn.context_lens = part.context_lens;
    attn.n_heads = c.num_attention_heads;
    attn.n_kv_heads = c.num_key_value_heads;
    attn.head_dim = c.head_dim;
    attn.max_q_len = part.max_q_len;
    attn.scale = 1.f / std::sqrt(static_cast<float>(c.head_dim));
    attn.out = part.rows(o);
    ops::run(ctx, attn);
  }

  ops::LinearArgs o_proj;
  o_proj.x = o;
  o_proj.w = w.o_proj;
  o_proj.out = out;
  ops::run(ctx, o_proj);
}

}  // namespace strata::model
