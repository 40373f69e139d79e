#include "model/nemotron_h/block_gate.h"

#include <cmath>

#include "core/check.h"
#include "model/nemotron_h/blocks.h"

namespace strata::model {
namespace {

int64_t storage_points(LayerKind k) {
  switch (k) {
    case LayerKind::Mamba: return 5;
    case LayerKind::Attention: return 4;
    case LayerKind::Mlp: return 3;
    case LayerKind::Moe: return 6;
  }
  return 6;
}

bool is_fp8(const LinearWeight& w) { return w.weight.dtype() == DType::F8E4M3; }

// FP8 linears one token passes through in the block (routed experts count once: a token's
// path goes through up and down of its experts).
int64_t fp8_on_path(const LayerWeights& L) {
  switch (L.kind) {
    case LayerKind::Mamba: return is_fp8(L.mamba.in_proj) + is_fp8(L.mamba.out_proj);
    case LayerKind::Attention:
      return std::max({is_fp8(L.attention.q_proj), is_fp8(L.attention.k_proj), is_fp8(L.attention.v_proj)}) +
             is_fp8(L.attention.o_proj);
    case LayerKind::Mlp: return is_fp8(L.mlp.up) + is_fp8(L.mlp.down);
    case LayerKind::Moe: {
      int64_t routed = 0;
      for (size_t e = 0; e < L.moe.up.size(); ++e)
        routed = std::max<int64_t>(routed, is_fp8(L.moe.up[e]) + is_fp8(L.moe.down[e]));
      const int64_t shared = L.moe.has_shared ? is_fp8(L.moe.shared.up) + is_fp8(L.moe.shared.down) : 0;
      return std::max(routed, shared) + is_fp8(L.moe.router);
    }
  }
  return 0;
}

Tensor to_host(const Tensor& t) { return t.device() == Device::Host ? t : t.to(Device::Host); }

// ||a - b|| / ||b|| and max |a - b| over two host tensors of the same shape (any float dtype).
void compare(const Tensor& dev_out, const Tensor& host_out, BlockGateRow* row) {
  const Tensor a = to_host(dev_out), b = host_out.contiguous();
  STRATA_CHECK(a.shape() == b.shape());
  double num = 0, den = 0, mx = 0;
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = load_as_f32(a.raw(), a.dtype(), static_cast<size_t>(i));
    const double y = load_as_f32(b.raw(), b.dtype(), static_cast<size_t>(i));
    if (!std::isfinite(x) || !std::isfinite(y)) {
      row->rel_l2 = INFINITY;
      row->max_abs = INFINITY;
      row->elements = n;
      return;
    }
    num += (x - y) * (x - y);
    den += y * y;
    mx = std::max(mx, std::abs(x - y));
  }
  row->rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  row->max_abs = mx;
  row->elements = n;
}

// One side of the gate: its context, caches, sequence and steps.
struct Side {
  Side(const NemotronHModel& m, OpContext* ctx_, int64_t tokens)
      : ctx(ctx_),
        cache(m.config(), cache::plan_cache_for_tokens(m.config(), 1, tokens, 16, m.act_dtype()), ctx_->device) {
    slot = cache.mamba.allocate();
    if (!blocks.ensure(cache.kv, tokens)) fail("gate: no KV blocks for {} tokens", tokens);
  }
  ~Side() { blocks.release(cache.kv); }
  StepInput step(const std::vector<int32_t>& tokens, int64_t computed) {
    SequenceChunk c;
    c.slot = slot;
    c.num_computed = computed;
    c.tokens = tokens;
    c.blocks = &blocks;
    return StepInput::build({c}, cache.kv.block_size(), need_kv, ctx->device, *ctx);
  }
  OpContext* ctx;
  cache::ModelCache cache;
  cache::BlockTable blocks;
  int32_t slot = -1;
  bool need_kv = false;
};

void run_block(OpContext& ctx, const ModelConfig& c, const LayerWeights& L, int64_t k, const Tensor& a,
               const StepInput& step, cache::ModelCache& cache, Tensor& out) {
  switch (L.kind) {
    case LayerKind::Mamba: mamba_block(ctx, c, L.mamba, a, step, cache.mamba, k, out); break;
    case LayerKind::Attention: attention_block(ctx, c, L.attention, a, step, cache.kv, k, out); break;
    case LayerKind::Mlp: mlp_block(ctx, L.mlp, a, out); break;
    case LayerKind::Moe: moe_block(ctx, c, L.moe, a, out); break;
  }
}

}  // namespace

double block_band(LayerKind kind, DType act, int64_t fp8_linears) {
  const double per_store = act == DType::F32 ? std::ldexp(1.0, -20) : std::ldexp(1.0, -7);
  return static_cast<double>(storage_points(kind)) * per_store + static_cast<double>(fp8_linears) * std::ldexp(1.0, -4);
}

std::vector<BlockGateRow> run_block_gate(NemotronHModel& m, OpContext& dctx, const BlockGateOptions& o) {
  const ModelConfig& c = m.config();
  if (dctx.device == Device::Host) fail("gate: give a device run (the host is the reference)");
  if (o.prompt_len < 1) fail("gate: the prompt needs at least one token");
  const ModelWeights& dw = m.weights_on(dctx.device);
  const bool host_loaded = m.residency().loaded().embedding.device() == Device::Host;
  const DType act = dw.act_dtype;
  const int64_t T = o.prompt_len, H = c.hidden_size;

  std::vector<int32_t> prompt;
  uint64_t s = o.seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < T; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    prompt.push_back(static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(c.vocab_size)));
  }
  const int32_t next_token = prompt[0];

  OpContext hctx;
  Side dev(m, &dctx, T + 1), host(m, &hctx, T + 1);
  dev.need_kv = host.need_kv = c.num_attention > 0;

  std::vector<BlockGateRow> rows;
  // Host copies of device-made layers, made once and used by both phases.
  std::vector<LayerWeights> host_layers(static_cast<size_t>(c.num_layers()));
  std::vector<bool> have_host(static_cast<size_t>(c.num_layers()), false);
  for (int phase = 0; phase < 2; ++phase) {
    const bool decode = phase == 1;
    const std::vector<int32_t> tokens = decode ? std::vector<int32_t>{next_token} : prompt;
    const int64_t n = static_cast<int64_t>(tokens.size());
    const StepInput dstep = dev.step(tokens, decode ? T : 0);
    const StepInput hstep = host.step(tokens, decode ? T : 0);

    // The device's residual stream drives every block's input.
    Tensor h = Tensor::empty(Shape{n, H}, act, dctx.device);
    ops::EmbeddingArgs emb;
    emb.table = dw.embedding;
    emb.ids = dstep.token_ids();
    emb.out = h;
    ops::run(dctx, emb);
    Tensor residual, mixed = Tensor::empty(Shape{n, H}, act, dctx.device);
    for (int64_t l = 0; l < c.num_layers(); ++l) {
      const LayerWeights& DL = dw.layers[static_cast<size_t>(l)];
      Tensor a = Tensor::empty(Shape{n, H}, act, dctx.device);
      ops::RmsNormArgs norm;
      norm.x = l == 0 ? h : mixed;
      if (l > 0) norm.residual = residual;
      norm.weight = DL.norm;
      norm.eps = c.norm_eps;
      norm.out = a;
      ops::run(dctx, norm);
      if (l == 0) residual = h;

      const int64_t k = c.kind_index[static_cast<size_t>(l)];
      Tensor dout = Tensor::empty(Shape{n, H}, act, dctx.device);
      run_block(dctx, c, DL, k, a, dstep, dev.cache, dout);

      // The reference: the same input on the host with this layer's host weights.
      const auto li = static_cast<size_t>(l);
      if (!host_loaded && !have_host[li]) {
        TransferStats ts;
        host_layers[li] = copy_layer_to(DL, Device::Host, &ts);
        have_host[li] = true;
      }
      const LayerWeights& HL = host_loaded ? m.residency().loaded().layers[li] : host_layers[li];
      const Tensor ha = a.to(Device::Host);
      Tensor hout = Tensor::empty(Shape{n, H}, act, Device::Host);
      run_block(hctx, c, HL, k, ha, hstep, host.cache, hout);

      BlockGateRow row;
      row.layer = l;
      row.kind = DL.kind;
      row.phase = decode ? "decode" : "prefill";
      row.fp8_linears = fp8_on_path(DL);
      row.band = block_band(DL.kind, act, row.fp8_linears);
      compare(dout, hout, &row);
      rows.push_back(row);
      mixed = dout;
    }
  }
  return rows;
}

}  // namespace strata::model
