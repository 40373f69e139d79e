// Mamba2 mixer (spec 3.2): in_proj -> split z | xBC | dt as row views -> causal conv + SiLU
// over xBC (state: the last K-1 raw rows) -> SSM scan (prefill) or update (decode) over
// x, B, C views -> gated grouped RMSNorm with z -> out_proj.
#include "model/nemotron_h/blocks.h"

namespace strata::model {

void mamba_block(OpContext& ctx, const ModelConfig& c, const MambaWeights& w, const Tensor& a,
                 const engine::StepInput& step, cache::MambaStatePool& states, int64_t mamba_layer,
                 Tensor& out) {
  const int64_t T = a.dim(0);
  const DType act = a.dtype();
  const int64_t gn = c.n_groups * c.ssm_state_size;

  Tensor zxbcdt = workspace(ctx, Shape{T, c.in_proj_rows}, act);  // [T, z | xBC | dt]
  ops::LinearArgs in_proj;
  in_proj.x = a;
  in_proj.w = w.in_proj;
  in_proj.out = zxbcdt;
  ops::run(ctx, in_proj);
  const Tensor z = zxbcdt.slice(1, 0, c.d_inner);                 // [T, d_inner]
  const Tensor xbc_raw = zxbcdt.slice(1, c.d_inner, c.conv_dim);  // [T, conv_dim]
  const Tensor dt_raw = zxbcdt.slice(1, c.d_inner + c.conv_dim, c.mamba_num_heads);  // [T, Hm]

  Tensor xbc = workspace(ctx, Shape{T, c.conv_dim}, act);  // [T, conv_dim] after conv + SiLU
  Tensor& conv_states = states.conv_states(mamba_layer);   // [S, K-1, conv_dim]
  if (step.decode_only()) {
    ops::Conv1dUpdateArgs conv;
    conv.x = xbc_raw;
    conv.weight = w.conv_weight;
    conv.bias = w.conv_bias;
    conv.conv_states = conv_states;
    conv.slots = step.slots();
    conv.out = xbc;
    ops::run(ctx, conv);
  } else {
    ops::Conv1dPrefillArgs conv;
    conv.x = xbc_raw;
    conv.weight = w.conv_weight;
    conv.bias = w.conv_bias;
    conv.conv_states = conv_states;
    conv.cu_seqlens = step.cu_seqlens();
    conv.slots = step.slots();
    conv.has_initial = step.has_initial();
    conv.out = xbc;
    ops::run(ctx, conv);
  }
  const Tensor x = xbc.slice(1, 0, c.d_inner);        // [T, Hm*P]
  const Tensor B = xbc.slice(1, c.d_inner, gn);       // [T, G*N]
  const Tensor C = xbc.slice(1, c.d_inner + gn, gn);  // [T, G*N]

  Tensor y = workspace(ctx, Shape{T, c.d_inner}, act);  // [T, Hm*P]
  Tensor& ssm_states = states.ssm_states(mamba_layer);  // [S, Hm, P, N]
  if (step.decode_only()) {
    ops::SsmUpdateArgs ssm;
    ssm.x = x;
    ssm.dt_raw = dt_raw;
    ssm.A = w.A;
    ssm.B = B;
    ssm.C = C;
    ssm.D = w.D;
    ssm.dt_bias = w.dt_bias;
    ssm.ssm_states = ssm_states;
    ssm.slots = step.slots();
    ssm.heads = c.mamba_num_heads;
    ssm.head_dim = c.mamba_head_dim;
    ssm.groups = c.n_groups;
    ssm.state_size = c.ssm_state_size;
    ssm.out = y;
    ops::run(ctx, ssm);
  } else {
    ops::SsmScanArgs ssm;
    ssm.x = x;
    ssm.dt_raw = dt_raw;
    ssm.A = w.A;
    ssm.B = B;
    ssm.C = C;
    ssm.D = w.D;
    ssm.dt_bias = w.dt_bias;
    ssm.ssm_states = ssm_states;
    ssm.cu_seqlens = step.cu_seqlens();
    ssm.slots = step.slots();
    ssm.has_initial = step.has_initial();
    ssm.heads = c.mamba_num_heads;
    ssm.head_dim = c.mamba_head_dim;
    ssm.groups = c.n_groups;
    ssm.state_size = c.ssm_state_size;
    ssm.chunk_size = c.chunk_size;
    ssm.out = y;
    ops::run(ctx, ssm);
  }

  // Gate with silu(z) first, then RMS per group of d_inner / G channels (spec 3.2 step 7).
  Tensor o = workspace(ctx, Shape{T, c.d_inner}, act);
  ops::GatedRmsNormArgs norm;
  norm.y = y;
  norm.z = z;
  norm.weight = w.norm;
  norm.groups = c.n_groups;
  norm.eps = c.norm_eps;
  norm.out = o;
  ops::run(ctx, norm);

  ops::LinearArgs out_proj;
  out_proj.x = o;
  out_proj.w = w.out_proj;
  out_proj.out = out;
  ops::run(ctx, out_proj);
}

}  // namespace strata::model
