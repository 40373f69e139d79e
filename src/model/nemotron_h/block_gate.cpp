#include "model/nemotron_h/block_gate.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

#include "core/check.h"
#include "engine/executor.h"
#include "model/nemotron_h/blocks.h"

namespace strata::model {
namespace {

// The band of a narrow-activation block is this many times its measured rounding (see
// block_gate.h).
constexpr double kRoundingFactor = 2.0;
// The scale band: this many times the noise a scale component of unbiased errors can show.
constexpr double kScaleFactor = 4.0;
// Prompt tokens the f32-activation host run measures the rounding on.
constexpr int64_t kMeasureTokens = 32;

int64_t storage_points(LayerKind k) {
  switch (k) {
    case LayerKind::Mamba:
      return 5;
    case LayerKind::Attention:
      return 4;
    case LayerKind::Mlp:
      return 3;
    case LayerKind::Moe:
      return 6;
  }
  return 6;
}

bool is_w8a8(const LinearWeight& w) {
  return w.weight.dtype() == DType::F8E4M3 && w.input_scale > 0.f;
}

// The input scale every routed expert's up_proj shares, or 0 when they differ (or are not W8A8).
float shared_expert_input_scale(const std::vector<LinearWeight>& up) {
  if (up.empty() || !is_w8a8(up[0])) return 0.f;
  for (const LinearWeight& w : up)
    if (!is_w8a8(w) || w.input_scale != up[0].input_scale) return 0.f;
  return up[0].input_scale;
}

// W8A8 linears on a token's path through the block whose activation quantization the host
// reference cannot reproduce (see run_block_gate): the routed experts' down_proj (its input
// is made inside moe_experts) and their up_proj when the experts' input scales differ.
int64_t unemulated_fp8(const LayerWeights& L) {
  if (L.kind != LayerKind::Moe || L.moe.up.empty()) return 0;
  int64_t n = 0;
  for (size_t e = 0; e < L.moe.down.size() && n == 0; ++e)
    n = is_w8a8(L.moe.down[e]) ? 1 : 0;
  if (is_w8a8(L.moe.up[0]) && shared_expert_input_scale(L.moe.up) == 0.f) ++n;
  return n;
}

// x as the device multiplies it in a W8A8 linear: e4m3(x / s) * s, in `dtype`.
Tensor fake_quantize(const Tensor& x, float s, DType dtype) {
  Tensor out = Tensor::empty(x.shape(), dtype, Device::Host);
  const int64_t rows = x.dim(0), cols = x.dim(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < cols; ++i) {
      const float v = load_as_f32(x.raw(), x.dtype(), static_cast<size_t>(r * x.stride(0) + i));
      store_from_f32(out.raw(), dtype, static_cast<size_t>(r * cols + i),
                     fp8e4m3_to_f32(fp8e4m3_from_f32_sat(v / s)) * s);
    }
  return out;
}

// The host reference's observer: every W8A8 linear gets the e4m3-quantized activations the
// device multiplies (in f32, so the products are the device's up to f32 rounding), and so do
// the routed experts' up_proj when they share one input scale (in the activation dtype, which
// moe_experts takes: a further 2^-9 relative rounding).
void emulate_w8a8(const char* op, const void* args) {
  const std::string name(op);
  if (name == ops::LinearArgs::kName) {
    auto* a = const_cast<ops::LinearArgs*>(static_cast<const ops::LinearArgs*>(args));
    if (is_w8a8(a->w)) a->x = fake_quantize(a->x, a->w.input_scale, DType::F32);
  } else if (name == ops::MoeExpertsArgs::kName) {
    auto* a = const_cast<ops::MoeExpertsArgs*>(static_cast<const ops::MoeExpertsArgs*>(args));
    if (a->up) {
      const float s = shared_expert_input_scale(*a->up);
      if (s > 0.f) a->x = fake_quantize(a->x, s, a->x.dtype());
    }
  }
}

// A host f32 copy of a host tensor of any float dtype.
Tensor to_f32(const Tensor& x) {
  Tensor out = Tensor::empty(x.shape(), DType::F32, Device::Host);
  const Tensor c = x.contiguous();
  for (int64_t i = 0; i < c.numel(); ++i)
    out.data<float>()[i] = load_as_f32(c.raw(), c.dtype(), static_cast<size_t>(i));
  return out;
}

Tensor to_host(const Tensor& t) {
  return t.device() == Device::Host ? t : t.to(Device::Host);
}

// ||a - b|| / ||b||, max |a - b| and the scale component <a - b, b> / <b, b> over two host
// tensors of the same shape (any float dtype).
void compare(const Tensor& dev_out, const Tensor& host_out, BlockGateRow* row) {
  const Tensor a = to_host(dev_out), b = host_out.contiguous();
  STRATA_CHECK(a.shape() == b.shape());
  double num = 0, den = 0, dot = 0, mx = 0;
  const int64_t n = a.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = load_as_f32(a.raw(), a.dtype(), static_cast<size_t>(i));
    const double y = load_as_f32(b.raw(), b.dtype(), static_cast<size_t>(i));
    if (!std::isfinite(x) || !std::isfinite(y)) {
      row->rel_l2 = INFINITY;
      row->max_abs = INFINITY;
      row->scale = INFINITY;
      row->elements = n;
      return;
    }
    num += (x - y) * (x - y);
    den += y * y;
    dot += (x - y) * y;
    mx = std::max(mx, std::abs(x - y));
  }
  row->rel_l2 = std::sqrt(num / std::max(den, 1e-300));
  row->scale = dot / std::max(den, 1e-300);
  row->max_abs = mx;
  row->elements = n;
}

// One side of the gate: the context its ops run on, and an executor that holds its caches
// (activations and conv states in `act`), its one sequence and builds its steps.
struct Side {
  Side(NemotronHModel& m, OpContext* ctx_, int64_t tokens, DType act)
      : ctx(ctx_),
        ex(m, config(m, ctx_, tokens, act)),
        seq(ex, tokens),
        cache(ex.cache()) {}
  static engine::ExecutorConfig config(const NemotronHModel& m, OpContext* ctx, int64_t tokens,
                                       DType act) {
    engine::ExecutorConfig ec;
    ec.device = ctx->device;
    ec.run_on = ctx;  // the gate's contexts: the caller's device run, the host reference
    ec.max_num_seqs = 1;
    ec.max_model_len = tokens;
    ec.cache_plan = cache::plan_cache_for_tokens(m.config(), 1, tokens, 16, act);
    ec.cuda_graphs = false;
    return ec;
  }
  // The next step of the sequence: `tokens` after everything earlier steps ran.
  engine::StepInput step(const std::vector<int32_t>& tokens) {
    engine::StepInput s = ex.prepare({seq.chunk(tokens)});
    seq.advance(static_cast<int64_t>(tokens.size()));
    return s;
  }
  OpContext* ctx;
  engine::Executor ex;
  engine::ExecutorSequence seq;
  cache::ModelCache& cache;
};

void run_block(OpContext& ctx, const ModelConfig& c, const LayerWeights& L, int64_t k,
               const BlockInput& in, const engine::StepInput& step, cache::ModelCache& cache,
               Tensor& out) {
  switch (L.kind) {
    case LayerKind::Mamba:
      mamba_block(ctx, c, L.mamba, in, step, cache.mamba, k, out);
      break;
    case LayerKind::Attention:
      attention_block(ctx, c, L.attention, in, step, cache.kv, k, out);
      break;
    case LayerKind::Mlp:
      mlp_block(ctx, L.mlp, in, out);
      break;
    case LayerKind::Moe:
      moe_block(ctx, c, L.moe, in, out);
      break;
  }
}

}  // namespace

double block_band(LayerKind kind, DType act, int64_t fp8_linears, double measured_rounding) {
  const double fp8 = static_cast<double>(fp8_linears) * std::ldexp(1.0, -4);
  if (act == DType::F32)
    return static_cast<double>(storage_points(kind)) * std::ldexp(1.0, -20) + fp8;
  return std::max(kRoundingFactor * measured_rounding, std::ldexp(1.0, -9)) + fp8;
}

double scale_band(double band, double measured_scale, int64_t elements, int64_t fp8_linears) {
  // An unemulated W8A8 quantization (the experts' down-projection input, quantized inside the
  // device's experts op) may shift a block's output systematically, not only add noise: relu²
  // activations are one-sided and saturate at 448 x scale. Measured on Nemotron-3-Nano FP8 MoE
  // prefill blocks (H200, 32 tokens): -0.9e-3 to -1.4e-3. Each such linear is allowed 2^-8
  // (1/16 of its L2 allowance of 2^-4); an injected 1% scale defect stays out of band.
  return measured_scale + kScaleFactor * 0.5 * band / std::sqrt(static_cast<double>(elements)) +
         static_cast<double>(fp8_linears) * std::ldexp(1.0, -8) + std::ldexp(1.0, -24);
}

std::vector<BlockGateRow> run_block_gate(NemotronHModel& m, OpContext& dctx,
                                         const BlockGateOptions& o) {
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

  OpContext hctx, hctx32;
  hctx.observer = hctx32.observer = emulate_w8a8;
  Side dev(m, &dctx, T + 1, act), host(m, &hctx, T + 1, act);
  // The measured perturbation (bf16 and other narrow activations): the host reference again with
  // f32 activations on the same input and weights, over the prompt's first kMeasureTokens tokens
  // (the outputs of a causal block's first rows depend on those rows only), once per layer in the
  // prefill; the decode row uses its layer's measurement. This keeps the extra host work to a
  // fraction of the reference's.
  const int64_t T32 = std::min(T, kMeasureTokens);
  std::unique_ptr<Side> host32;
  if (act != DType::F32) {
    host32 = std::make_unique<Side>(m, &hctx32, T32, DType::F32);
  }
  std::vector<double> layer_rounding(static_cast<size_t>(c.num_layers()), 0.0),
      layer_rounding_scale(static_cast<size_t>(c.num_layers()), 0.0);

  std::vector<BlockGateRow> rows;
  // Host copies of device-made layers, made once and used by both phases.
  std::vector<LayerWeights> host_layers(static_cast<size_t>(c.num_layers()));
  std::vector<bool> have_host(static_cast<size_t>(c.num_layers()), false);
  for (int phase = 0; phase < 2; ++phase) {
    const bool decode = phase == 1;
    const std::vector<int32_t> tokens = decode ? std::vector<int32_t>{next_token} : prompt;
    const int64_t n = static_cast<int64_t>(tokens.size());
    const engine::StepInput dstep = dev.step(tokens);  // prefill at 0, then decode at T
    const engine::StepInput hstep = host.step(tokens);
    std::optional<engine::StepInput> h32step;
    if (host32 && !decode)
      h32step = host32->step(std::vector<int32_t>(prompt.begin(), prompt.begin() + T32));

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
      norm.out = a;  // kept: the host reference starts from it
      // As the forward: the block's first W8A8 linears take the norm's e4m3 copy.
      const float q_scale = fuse_w8a8_quant(dctx) ? layer_input_q_scale(DL) : 0.f;
      if (q_scale > 0.f) {
        norm.out_q = Tensor::empty(Shape{n, H}, DType::F8E4M3, dctx.device);
        norm.out_q_scale = q_scale;
      }
      ops::run(dctx, norm);
      if (l == 0) residual = h;

      const int64_t k = c.kind_index[static_cast<size_t>(l)];
      Tensor dout = Tensor::empty(Shape{n, H}, act, dctx.device);
      run_block(dctx, c, DL, k, BlockInput(a, norm.out_q, q_scale, act), dstep, dev.cache, dout);

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
      if (h32step) {
        const Tensor ha32 = to_f32(ha.slice(0, 0, T32));
        Tensor hout32 = Tensor::empty(Shape{T32, H}, DType::F32, Device::Host);
        run_block(hctx32, c, HL, k, ha32, *h32step, host32->cache, hout32);
        BlockGateRow r32;
        compare(hout.slice(0, 0, T32), hout32, &r32);
        layer_rounding[li] = r32.rel_l2;
        layer_rounding_scale[li] = std::abs(r32.scale);
      }
      row.rounding = layer_rounding[li];
      row.rounding_scale = layer_rounding_scale[li];
      row.layer = l;
      row.kind = DL.kind;
      row.phase = decode ? "decode" : "prefill";
      row.fp8_linears = unemulated_fp8(DL);
      row.band = block_band(DL.kind, act, row.fp8_linears, row.rounding);
      row.scale_band = scale_band(row.band, row.rounding_scale, n * H, row.fp8_linears);
      compare(dout, hout, &row);
      rows.push_back(row);
      mixed = dout;
    }
  }
  return rows;
}

}  // namespace strata::model
