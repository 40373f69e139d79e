// Mamba2 mixer (spec 3.2): in_proj -> split z | xBC | dt as row views -> causal conv + SiLU
// over xBC (state: the last K-1 raw rows) -> SSM scan (prefill) or update (decode) over
// x, B, C views -> gated grouped RMSNorm with z -> out_proj.
//
// A step's decode rows (its leading single-token sequences) run the single-token kernels
// (conv1d_update, ssm_update) and its prefill rows the chunked kernels (conv1d_prefill,
// ssm_scan), in the same step; the projections and the norm run once over all rows.
#include "model/nemotron_h/blocks.h"

namespace strata::model {

void mamba_block(OpContext& ctx, const ModelConfig& c, const MambaWeights& w, const BlockInput& in,
                 const engine::StepInput& step, cache::MambaStatePool& states, int64_t mamba_layer,
                 Tensor& out) {
  const int64_t T = in.rows();
  const DType act = in.act;
  const int64_t gn = c.n_groups * c.ssm_state_size;
  const engine::StepPart dec = step.decode_part(), pre = step.prefill_part();

  Tensor zxbcdt = workspace(ctx, Shape{T, c.in_proj_rows}, act);  // [T, z | xBC | dt]
  ops::LinearArgs in_proj;
  in_proj.x = in.x_for(w.in_proj);  // the norm's e4m3 copy when in_proj is W8A8
  in_proj.w = w.in_proj;
  in_proj.out = zxbcdt;
  ops::run(ctx, in_proj);
  const Tensor z = zxbcdt.slice(1, 0, c.d_inner);                 // [T, d_inner]
  const Tensor xbc_raw = zxbcdt.slice(1, c.d_inner, c.conv_dim);  // [T, conv_dim]
  const Tensor dt_raw = zxbcdt.slice(1, c.d_inner + c.conv_dim, c.mamba_num_heads);  // [T, Hm]

  Tensor xbc = workspace(ctx, Shape{T, c.conv_dim}, act);  // [T, conv_dim] after conv + SiLU
  Tensor& conv_states = states.conv_states(mamba_layer);   // [S, K-1, conv_dim]
  if (!dec.empty()) {
    ops::Conv1dUpdateArgs conv;
    conv.x = dec.rows(xbc_raw);
    conv.weight = w.conv_weight;
    conv.bias = w.conv_bias;
    conv.conv_states = conv_states;
    conv.slots = dec.slots;
    conv.out = dec.rows(xbc);
    ops::run(ctx, conv);
  }
  if (!pre.empty()) {
    ops::Conv1dPrefillArgs conv;
    conv.x = pre.rows(xbc_raw);
    conv.weight = w.conv_weight;
    conv.bias = w.conv_bias;
    conv.conv_states = conv_states;
    conv.cu_seqlens = pre.cu_seqlens;
    conv.slots = pre.slots;
    conv.has_initial = pre.has_initial;
    conv.out = pre.rows(xbc);
    ops::run(ctx, conv);
  }

  Tensor y = workspace(ctx, Shape{T, c.d_inner}, act);  // [T, Hm*P]
  ops::SsmArgs ssm;
  ssm.x = xbc.slice(1, 0, c.d_inner);        // [T, Hm*P]
  ssm.B = xbc.slice(1, c.d_inner, gn);       // [T, G*N]
  ssm.C = xbc.slice(1, c.d_inner + gn, gn);  // [T, G*N]
  ssm.dt_raw = dt_raw;
  ssm.A = w.A;
  ssm.D = w.D;
  ssm.dt_bias = w.dt_bias;
  ssm.ssm_states = states.ssm_states(mamba_layer);  // [S, Hm, P, N]
  ssm.heads = c.mamba_num_heads;
  ssm.head_dim = c.mamba_head_dim;
  ssm.groups = c.n_groups;
  ssm.state_size = c.ssm_state_size;
  ssm.out = y;
  // The same arguments over one part's rows and slots.
  auto rows_of = [&](ops::SsmArgs& part, const engine::StepPart& p) {
    part.x = p.rows(ssm.x);
    part.B = p.rows(ssm.B);
    part.C = p.rows(ssm.C);
    part.dt_raw = p.rows(ssm.dt_raw);
    part.out = p.rows(ssm.out);
    part.slots = p.slots;
  };
  if (!dec.empty()) {
    ops::SsmUpdateArgs update;
    static_cast<ops::SsmArgs&>(update) = ssm;
    rows_of(update, dec);
    ops::run(ctx, update);
  }
  if (!pre.empty()) {
    ops::SsmScanArgs scan;
    static_cast<ops::SsmArgs&>(scan) = ssm;
    rows_of(scan, pre);
    scan.cu_seqlens = pre.cu_seqlens;
    scan.has_initial = pre.has_initial;
    scan.chunk_size = c.chunk_size;
    ops::run(ctx, scan);
  }

  // Gate with silu(z) first, then RMS per group of d_inner / G channels (spec 3.2 step 7). A
  // W8A8 out_proj reads only the norm's e4m3 copy: the norm writes just that.
  ops::GatedRmsNormArgs norm;
  norm.y = y;
  norm.z = z;
  norm.weight = w.norm;
  norm.groups = c.n_groups;
  norm.eps = c.norm_eps;
  if (!quantize_for(ctx, w.out_proj, T, c.d_inner, norm))
    norm.out = workspace(ctx, Shape{T, c.d_inner}, act);
  ops::run(ctx, norm);

  ops::LinearArgs out_proj;
  out_proj.x = norm.out_q.defined() ? norm.out_q : norm.out;
  out_proj.w = w.out_proj;
  out_proj.out = out;
  ops::run(ctx, out_proj);
}

}  // namespace strata::model
