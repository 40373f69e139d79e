#include "model/nemotron_h/quant_check.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/log.h"
#include "model/nemotron_h/fp8_layout.h"

namespace strata::model {
namespace {

// The linear weights of the model by module name (checkpoint names without ".weight").
std::vector<std::pair<std::string, const LinearWeight*>> linears_by_module(const ModelConfig& c,
                                                                           const ModelWeights& w) {
  std::vector<std::pair<std::string, const LinearWeight*>> out;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerWeights& L = w.layers[static_cast<size_t>(i)];
    const std::string m = "backbone.layers." + std::to_string(i) + ".mixer.";
    switch (L.kind) {
      case LayerKind::Mamba:
        out.emplace_back(m + "in_proj", &L.mamba.in_proj);
        out.emplace_back(m + "out_proj", &L.mamba.out_proj);
        break;
      case LayerKind::Attention:
        out.emplace_back(m + "q_proj", &L.attention.q_proj);
        out.emplace_back(m + "k_proj", &L.attention.k_proj);
        out.emplace_back(m + "v_proj", &L.attention.v_proj);
        out.emplace_back(m + "o_proj", &L.attention.o_proj);
        break;
      case LayerKind::Mlp:
        out.emplace_back(m + "up_proj", &L.mlp.up);
        out.emplace_back(m + "down_proj", &L.mlp.down);
        break;
      case LayerKind::Moe:
        out.emplace_back(m + "gate", &L.moe.router);
        for (size_t e = 0; e < L.moe.up.size(); ++e) {
          out.emplace_back(m + "experts." + std::to_string(e) + ".up_proj", &L.moe.up[e]);
          out.emplace_back(m + "experts." + std::to_string(e) + ".down_proj", &L.moe.down[e]);
        }
        if (L.moe.has_shared) {
          out.emplace_back(m + "shared_experts.up_proj", &L.moe.shared.up);
          out.emplace_back(m + "shared_experts.down_proj", &L.moe.shared.down);
        }
        break;
    }
  }
  if (!w.tied_lm_head) out.emplace_back("lm_head", &w.lm_head);
  return out;
}

float read_scale(const TensorSource& src, const std::string& name) {
  const Tensor t = src.get(name);
  if (t.numel() != 1 || !is_float(t.dtype()) || t.device() != Device::Host)
    fail("{}: tensor {}: expected one float scale, found {}", src.describe(), name, t.str());
  const float v = load_as_f32(t.raw(), t.dtype(), 0);
  if (!(v > 0.f) || !std::isfinite(v))
    fail("{}: tensor {}: scale must be positive and finite, found {}", src.describe(), name, v);
  return v;
}

}  // namespace

void check_quantization(const TensorSource& source, const ModelConfig& c, const io::QuantConfig& q,
                        ModelWeights& w) {
  if (q.algo == io::QuantAlgo::NVFP4)
    fail("{}: quant_algo NVFP4 ({}): NVFP4 checkpoints are not supported yet (FP8 and BF16 are)",
         source.describe(), q.source);
  const auto linears = linears_by_module(c, w);
  int64_t fp8 = 0;
  for (const auto& [module, lw] : linears) {
    if (lw->weight.dtype() != DType::F8E4M3) continue;
    ++fp8;
    if (q.algo != io::QuantAlgo::FP8)
      fail(
          "{}: tensor {}.weight is f8e4m3 but the checkpoint declares no FP8 quantization (no "
          "hf_quant_config.json "
          "and no quantization_config with quant_algo FP8 in config.json)",
          source.describe(), module);
    if (q.is_excluded(module))
      fail("{}: tensor {}.weight is f8e4m3 but {} lists the module in exclude_modules",
           source.describe(), module, q.source);
    if (!(lw->input_scale > 0.f))
      fail(
          "{}: tensor {}.input_scale is missing: quant_algo FP8 ({}) is static per-tensor W8A8 and "
          "needs it",
          source.describe(), module, q.source);
  }
  if (q.algo == io::QuantAlgo::FP8)
    log::info(
        "{}: FP8 (ModelOpt, {}): {} of {} linears in e4m3 (W8A8 on the device, W8A16 on the host), "
        "the rest {}",
        source.describe(), q.source, fp8, linears.size(), dtype_name(w.act_dtype));

  // FP8 KV-cache scales.
  int64_t kv_scales = 0;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights& L = w.layers[static_cast<size_t>(i)];
    if (L.kind != LayerKind::Attention) continue;
    const std::string m = "backbone.layers." + std::to_string(i) + ".mixer.";
    for (auto [name, dst] : {std::pair{m + "k_proj.k_scale", &L.attention.k_scale},
                             std::pair{m + "v_proj.v_scale", &L.attention.v_scale}}) {
      if (!source.has(name)) continue;
      *dst = read_scale(source, name);
      ++kv_scales;
      auto& u = w.report.unexpected;
      u.erase(std::remove(u.begin(), u.end(), name), u.end());
    }
  }
  if (q.kv_cache_algo == io::QuantAlgo::FP8 || kv_scales > 0)
    log::info(
        "{}: the checkpoint asks for an FP8 KV cache ({} k/v scales read); strata keeps the KV "
        "cache in {}",
        source.describe(), kv_scales, dtype_name(w.act_dtype));
}

}  // namespace strata::model
