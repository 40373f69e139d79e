#include "model/nemotron_h/fp8_calibration.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "engine/executor.h"

namespace strata::model {
namespace {

// max |t| over a 2-D row view (any float dtype, row stride >= width).
float amax_rows(const Tensor& t, int64_t row_begin = 0, int64_t rows = -1) {
  const int64_t n = rows < 0 ? t.dim(0) - row_begin : rows;
  float m = 0.f;
  for (int64_t r = row_begin; r < row_begin + n; ++r)
    for (int64_t i = 0; i < t.dim(1); ++i)
      m = std::max(
          m, std::abs(load_as_f32(t.raw(), t.dtype(), static_cast<size_t>(r * t.stride(0) + i))));
  return m;
}

struct Recorder {
  std::map<const void*, std::string> linear_by_weight;  // weight data -> module
  std::map<const void*, std::string> experts_by_list;   // &moe.up -> "backbone.layers.L.mixer."
  std::map<std::string, float> amax;

  void note(const std::string& module, float v) {
    float& a = amax[module];
    a = std::max(a, v);
  }

  void on_linear(const ops::LinearArgs& a) {
    auto it = linear_by_weight.find(a.w.weight.raw());
    if (it != linear_by_weight.end()) note(it->second, amax_rows(a.x));
  }

  void on_experts(const ops::MoeExpertsArgs& a) {
    auto it = experts_by_list.find(a.up);
    if (it == experts_by_list.end()) return;
    const std::string& prefix = it->second;
    const int64_t T = a.x.dim(0), K = a.ids.dim(1);
    OpContext plain;  // no observer: the recomputation below is not part of the forward
    for (int64_t t = 0; t < T; ++t) {
      const Tensor row = a.x.slice(0, t, 1);
      const float x_amax = amax_rows(row);
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = a.ids.data<int32_t>()[t * K + j];
        if (e < 0 || e >= static_cast<int32_t>(a.up->size())) continue;
        const std::string ep = prefix + "experts." + std::to_string(e) + ".";
        note(ep + "up_proj", x_amax);
        // down_proj's input: relu²(up_proj(x)), each stored in the activation dtype.
        const LinearWeight& up = (*a.up)[static_cast<size_t>(e)];
        ops::LinearArgs l;
        l.x = row;
        l.w = up;
        l.out = Tensor::empty(Shape{1, up.out_features()}, a.x.dtype());
        ops::run(plain, l);
        ops::Relu2Args r;
        r.x = l.out;
        r.out = l.out;
        ops::run(plain, r);
        note(ep + "down_proj", amax_rows(l.out));
      }
    }
  }
};

}  // namespace

std::vector<std::vector<int32_t>> calibration_prompts(int64_t vocab, int64_t count,
                                                      int64_t length) {
  std::vector<std::vector<int32_t>> out;
  uint64_t s = 0x5DEECE66Dull;
  for (int64_t p = 0; p < count; ++p) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < length; ++i) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      ids.push_back(static_cast<int32_t>((s >> 33) % static_cast<uint64_t>(vocab)));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

std::map<std::string, float> calibrate_input_amax(
    NemotronHModel& m, const std::vector<std::vector<int32_t>>& prompts) {
  const ModelConfig& c = m.config();
  const ModelWeights& w = m.weights_on(Device::Host);
  Recorder rec;
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const LayerWeights& L = w.layers[static_cast<size_t>(i)];
    const std::string p = "backbone.layers." + std::to_string(i) + ".mixer.";
    auto add = [&](const LinearWeight& lw, const char* name) {
      rec.linear_by_weight[lw.weight.raw()] = p + name;
    };
    switch (L.kind) {
      case LayerKind::Mamba:
        add(L.mamba.in_proj, "in_proj");
        add(L.mamba.out_proj, "out_proj");
        break;
      case LayerKind::Attention:
        add(L.attention.q_proj, "q_proj");
        add(L.attention.k_proj, "k_proj");
        add(L.attention.v_proj, "v_proj");
        add(L.attention.o_proj, "o_proj");
        break;
      case LayerKind::Mlp:
        add(L.mlp.up, "up_proj");
        add(L.mlp.down, "down_proj");
        break;
      case LayerKind::Moe:
        add(L.moe.router, "gate");
        rec.experts_by_list[&L.moe.up] = p;
        if (L.moe.has_shared) {
          add(L.moe.shared.up, "shared_experts.up_proj");
          add(L.moe.shared.down, "shared_experts.down_proj");
        }
        break;
    }
  }
  if (!w.tied_lm_head) rec.linear_by_weight[w.lm_head.weight.raw()] = "lm_head";

  int64_t longest = 1;
  for (const auto& ids : prompts) longest = std::max(longest, static_cast<int64_t>(ids.size()));
  engine::ExecutorConfig ec;  // the host reference: calibration reads the activations there
  ec.device = Device::Host;
  ec.max_num_seqs = 1;
  ec.max_model_len = longest;
  ec.cache_plan = cache::plan_cache_for_tokens(c, 1, longest, 16, m.act_dtype());
  ec.cuda_graphs = false;
  engine::Executor ex(m, ec);
  ex.context().observer = [&](const char* op, const void* args) {
    const std::string name(op);
    if (name == ops::LinearArgs::kName) rec.on_linear(*static_cast<const ops::LinearArgs*>(args));
    if (name == ops::MoeExpertsArgs::kName)
      rec.on_experts(*static_cast<const ops::MoeExpertsArgs*>(args));
  };
  for (const auto& ids : prompts) {
    engine::ExecutorSequence seq(ex, static_cast<int64_t>(ids.size()));
    seq.forward(ids, engine::LogitRows::LastPerSequence);
  }
  return rec.amax;
}

}  // namespace strata::model
