// The top level of the forward (spec 3.0, 3.6): embedding, the layer stack with vLLM's fused
// residual add + RMSNorm, norm_f on the rows that need logits, lm_head in the activation dtype,
// then logits in f32.
#include "model/nemotron_h/model.h"

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "core/check.h"
#include "model/nemotron_h/blocks.h"

namespace strata::model {

namespace {

// The MoE block's add (routed + shared experts) fused into the next rms_norm as its x2: one
// launch and one [T, H] round trip less per MoE layer. STRATA_UNFUSED_MOE_ADD=1 keeps the add op
// (A/B; the same values either way).
bool fuse_moe_add() {
  static const bool on = std::getenv("STRATA_UNFUSED_MOE_ADD") == nullptr;
  return on;
}

}  // namespace

NemotronHModel::NemotronHModel(ModelConfig config, ModelWeights weights)
    : config_(std::move(config)), weights_(std::move(weights)) {
  STRATA_CHECK_EQ(static_cast<int64_t>(weights_.loaded().layers.size()), config_.num_layers());
}

Tensor NemotronHModel::forward(OpContext& ctx, const engine::StepInput& step, cache::ModelCache& cache,
                               engine::LogitRows rows) {
  const ModelConfig& c = config_;
  const ModelWeights& W = weights_.on(ctx.device);  // uploaded on the first use of a device
  const DType act = W.act_dtype;
  const int64_t T = step.num_tokens(), B = step.num_seqs(), H = c.hidden_size;
  if (cache.mamba.num_layers() != c.num_mamba || cache.kv.num_layers() != c.num_attention)
    fail(
        "forward: the cache was sized for another model ({} Mamba / {} attention layers, model has "
        "{} / {})",
        cache.mamba.num_layers(), cache.kv.num_layers(), c.num_mamba, c.num_attention);

  // h = Embedding[ids]                                           [T, H]
  Tensor h = workspace(ctx, Shape{T, H}, act);
  ops::EmbeddingArgs emb;
  emb.table = W.embedding;
  emb.ids = step.token_ids();
  emb.out = h;
  ops::run(ctx, emb);

  Tensor residual;                                  // [T, H] the residual stream, stored act
  Tensor a = workspace(ctx, Shape{T, H}, act);      // [T, H] normalized mixer input
  Tensor mixed = workspace(ctx, Shape{T, H}, act);  // [T, H] mixer output
  Tensor mixed2;  // [T, H] a MoE block's shared expert, added by the next norm (fuse_moe_add)
  Tensor a_q;  // [T, H] e4m3 copy of a for the block's W8A8 linears (blocks.h), made on first use
  const bool fuse_q = fuse_w8a8_quant(ctx);
  for (int64_t l = 0; l < c.num_layers(); ++l) {
    const LayerWeights& L = W.layers[static_cast<size_t>(l)];
    // Layer 0: residual = h, a = norm(h). Later: residual = act(h + residual), a = norm(residual),
    // h = act(mixed + mixed2) after a MoE block whose add was left to this norm.
    ops::RmsNormArgs norm;
    norm.x = l == 0 ? h : mixed;
    if (l > 0) norm.x2 = mixed2;
    if (l > 0) norm.residual = residual;
    norm.weight = L.norm;
    norm.eps = c.norm_eps;
    norm.out = a;
    // The block's first W8A8 linears take the norm's e4m3 copy.
    const float q_scale = fuse_q ? layer_input_q_scale(L) : 0.f;
    if (q_scale > 0.f) {
      if (!a_q.defined()) a_q = workspace(ctx, Shape{T, H}, DType::F8E4M3);
      norm.out_q = a_q;
      norm.out_q_scale = q_scale;
      norm.out = Tensor();  // the block reads only the copy (layer_input_q_scale)
    }
    ops::run(ctx, norm);
    if (l == 0) residual = h;
    const BlockInput in(norm.out, q_scale > 0.f ? a_q : Tensor(), q_scale, act);

    const int64_t k = c.kind_index[static_cast<size_t>(l)];
    mixed2 = Tensor();
    switch (L.kind) {
      case LayerKind::Mamba:
        mamba_block(ctx, c, L.mamba, in, step, cache.mamba, k, mixed);
        break;
      case LayerKind::Attention:
        attention_block(ctx, c, L.attention, in, step, cache.kv, k, mixed);
        break;
      case LayerKind::Mlp:
        mlp_block(ctx, L.mlp, in, mixed);
        break;
      case LayerKind::Moe:
        moe_block(ctx, c, L.moe, in, mixed, fuse_moe_add() ? &mixed2 : nullptr);
        break;
    }
  }

  // Rows that need logits. Gathering them before norm_f saves the norm and the head on rows
  // nobody reads; the row gather is the embedding op with the hidden states as its table.
  Tensor last_h = mixed, last_h2 = mixed2, last_r = residual;
  int64_t R = T;
  if (rows == engine::LogitRows::LastPerSequence && B != T) {
    R = B;
    auto gather = [&](const Tensor& src) {
      Tensor g = workspace(ctx, Shape{B, H}, act);  // [B, H]
      ops::EmbeddingArgs pick;
      pick.table = src;
      pick.ids = step.last_token_rows();
      pick.out = g;
      ops::run(ctx, pick);
      return g;
    };
    last_h = gather(mixed);
    if (mixed2.defined()) last_h2 = gather(mixed2);
    last_r = gather(residual);
  }
  Tensor normed = workspace(ctx, Shape{R, H}, act);  // [R, H] norm_f(act(h + residual))
  ops::RmsNormArgs norm_f;
  norm_f.x = last_h;
  norm_f.x2 = last_h2;
  norm_f.residual = last_r;
  norm_f.weight = W.norm_f;
  norm_f.eps = c.norm_eps;
  norm_f.out = normed;
  ops::run(ctx, norm_f);

  // lm_head in the activation dtype (vLLM computes bf16 logits), then f32 for sampling.
  Tensor logits = workspace(ctx, Shape{R, c.vocab_size}, act);  // [R, V]
  ops::LinearArgs head;
  head.x = normed;
  head.w = W.lm_head;
  head.out = logits;
  ops::run(ctx, head);
  if (act == DType::F32) return logits;
  Tensor logits32 = workspace(ctx, Shape{R, c.vocab_size}, DType::F32);
  ops::CastArgs cast;
  cast.x = logits;
  cast.out = logits32;
  ops::run(ctx, cast);
  return logits32;
}

void NemotronHModel::check_kernels(Device device, bool sampling) const {
  const ModelConfig& c = config_;
  const std::set<std::string> forced = ops::forced_host_ops();
  std::vector<std::string> missing;
  auto need = [&](auto tag, bool used) {
    using Args = decltype(tag);
    if (used && !has_kernel<Args>(device) && !(device != Device::Host && forced.count(Args::kName)))
      missing.emplace_back(Args::kName);
  };
  need(ops::EmbeddingArgs{}, true);
  need(ops::RmsNormArgs{}, true);
  need(ops::LinearArgs{}, true);
  need(ops::CastArgs{}, act_dtype() != DType::F32);
  need(ops::SampleArgs{}, sampling);
  need(ops::Conv1dPrefillArgs{}, c.num_mamba > 0);
  need(ops::Conv1dUpdateArgs{}, c.num_mamba > 0);
  need(ops::SsmScanArgs{}, c.num_mamba > 0);
  need(ops::SsmUpdateArgs{}, c.num_mamba > 0);
  need(ops::GatedRmsNormArgs{}, c.num_mamba > 0);
  need(ops::KvCacheWriteArgs{}, c.num_attention > 0);
  need(ops::AttentionArgs{}, c.num_attention > 0);
  need(ops::Relu2Args{}, c.num_mlp > 0 || c.num_moe > 0);
  need(ops::MoeRouteArgs{}, c.num_moe > 0);
  need(ops::MoeExpertsArgs{}, c.num_moe > 0);
  need(ops::AddArgs{}, c.num_moe > 0);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing)
      list += (list.empty() ? "" : ", ") + m;
    fail(
        "the {} backend has no kernel for op(s) this model needs: {} (--force-host-ops {} runs "
        "them on the host "
        "through a counted bounce)",
        device_name(device), list, list);
  }
}

}  // namespace strata::model
