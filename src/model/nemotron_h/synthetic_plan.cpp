#include "model/nemotron_h/synthetic_plan.h"

#include <cmath>

#include "core/check.h"
#include "core/thread_pool.h"
#include "model/nemotron_h/fp8_layout.h"
#include "model/nemotron_h/synthetic_rng.h"

namespace strata::model {
namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s)
    h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

// Activation amax a calibration would see at the input of `module` (see the header).
double expected_input_amax(const std::string& module) {
  const bool down = module.size() >= 9 && module.compare(module.size() - 9, 9, "down_proj") == 0;
  return down ? 36.0 : 6.0;
}

class Planner {
 public:
  Planner(const ModelConfig& c, const SyntheticOptions& o) : c_(c), o_(o) {}

  void symmetric(const std::string& name, const Shape& shape, double std, DType dtype) {
    SyntheticTensor t = base(name, shape, dtype);
    t.kind = SynthKind::Symmetric;
    t.k = synth_symmetric_multiplier(std);
    plan_.push_back(std::move(t));
  }
  void uniform(const std::string& name, const Shape& shape, double lo, double hi, DType dtype) {
    SyntheticTensor t = base(name, shape, dtype);
    t.kind = SynthKind::Uniform;
    t.lo = static_cast<float>(lo);
    t.span = static_cast<float>(hi - lo);
    plan_.push_back(std::move(t));
  }
  void constant(const std::string& name, float value) {
    SyntheticTensor t = base(name, Shape{}, DType::F32);  // ModelOpt writes 0-dim f32 scales
    t.kind = SynthKind::Constant;
    t.value = value;
    plan_.push_back(std::move(t));
  }
  // `module`.weight [out, in] at scale/sqrt(in); FP8 with its two scales when the layout says so.
  void linear(const std::string& module, int64_t out, int64_t in, double scale = 1.0) {
    const double std = scale / std::sqrt(static_cast<double>(in));
    if (!(o_.fp8 && fp8_quantized_module(c_, module))) {
      symmetric(module + ".weight", Shape{out, in}, std, o_.dtype);
      return;
    }
    symmetric(module + ".weight", Shape{out, in}, std, DType::F8E4M3);
    SyntheticTensor& w = plan_.back();
    // weight_scale from the exact bound, so |w / weight_scale| < 448 and nothing saturates.
    const float weight_scale = static_cast<float>(synth_symmetric_bound(w.k) / kFp8E4M3Max);
    w.fp8_inv_scale = 1.0f / weight_scale;
    constant(module + ".weight_scale", weight_scale);
    constant(module + ".input_scale",
             static_cast<float>(expected_input_amax(module) / kFp8E4M3Max));
  }
  void norm(const std::string& name, int64_t n) { uniform(name, Shape{n}, 0.9, 1.1, o_.dtype); }

  std::vector<SyntheticTensor> take() { return std::move(plan_); }

 private:
  SyntheticTensor base(const std::string& name, const Shape& shape, DType dtype) {
    SyntheticTensor t;
    t.name = name;
    t.shape = shape;
    t.dtype = dtype;
    t.seed = ops::splitmix64_mix(o_.seed * 0x9E3779B97F4A7C15ull ^ fnv1a(name));
    return t;
  }

  const ModelConfig& c_;
  const SyntheticOptions& o_;
  std::vector<SyntheticTensor> plan_;
};

}  // namespace

std::vector<SyntheticTensor> synthetic_plan(const ModelConfig& c, const SyntheticOptions& o) {
  if (o.dtype != DType::F32 && o.dtype != DType::BF16)
    fail(
        "synthetic weights of {}: dtype must be f32 or bf16 (FP8 is a layout on top of bf16), got "
        "{}",
        c.source, dtype_name(o.dtype));
  Planner p(c, o);
  const int64_t H = c.hidden_size;
  const double damp = o.residual_damping;
  p.symmetric("backbone.embeddings.weight", Shape{c.vocab_size, H}, 1.0, o.dtype);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string lp = "backbone.layers." + std::to_string(i) + ".";
    const std::string m = lp + "mixer.";
    p.norm(lp + "norm.weight", H);
    switch (c.layers[static_cast<size_t>(i)]) {
      case LayerKind::Mamba: {
        const int64_t Hm = c.mamba_num_heads;
        p.linear(m + "in_proj", c.in_proj_rows, H);
        p.symmetric(m + "conv1d.weight", Shape{c.conv_dim, 1, c.conv_kernel},
                    1.0 / std::sqrt(static_cast<double>(c.conv_kernel)), o.dtype);
        if (c.use_conv_bias) p.symmetric(m + "conv1d.bias", Shape{c.conv_dim}, 0.1, o.dtype);
        p.uniform(m + "dt_bias", Shape{Hm}, -6.0, -2.5, o.dtype);
        p.uniform(m + "A_log", Shape{Hm}, 0.0, std::log(8.0), DType::F32);
        p.uniform(m + "D", Shape{Hm}, 0.5, 1.5, DType::F32);
        p.norm(m + "norm.weight", c.d_inner);
        p.linear(m + "out_proj", H, c.d_inner, damp);
        break;
      }
      case LayerKind::Attention:
        p.linear(m + "q_proj", c.q_size, H);
        p.linear(m + "k_proj", c.kv_size, H);
        p.linear(m + "v_proj", c.kv_size, H);
        p.linear(m + "o_proj", H, c.q_size, damp);
        break;
      case LayerKind::Mlp: {
        const int64_t I = c.mlp_intermediate(i);
        p.linear(m + "up_proj", I, H);
        p.linear(m + "down_proj", H, I, damp);
        break;
      }
      case LayerKind::Moe: {
        p.linear(m + "gate", c.n_routed_experts, H);
        p.symmetric(m + "gate.e_score_correction_bias", Shape{c.n_routed_experts}, 0.05,
                    DType::F32);
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
          const std::string ep = m + "experts." + std::to_string(e) + ".";
          p.linear(ep + "up_proj", c.moe_intermediate_size, H);
          p.linear(ep + "down_proj", H, c.moe_intermediate_size, damp);
        }
        if (c.shared_intermediate > 0) {
          p.linear(m + "shared_experts.up_proj", c.shared_intermediate, H);
          p.linear(m + "shared_experts.down_proj", H, c.shared_intermediate, damp);
        }
        break;
      }
    }
  }
  p.norm("backbone.norm_f.weight", H);
  if (!c.tie_word_embeddings) p.linear("lm_head", c.vocab_size, H);
  return p.take();
}

float synthetic_value(const SyntheticTensor& t, int64_t i) {
  const auto u = static_cast<uint64_t>(i);
  switch (t.kind) {
    case SynthKind::Symmetric:
      return synth_symmetric(t.seed, u, t.k);
    case SynthKind::Uniform:
      return synth_uniform(t.seed, u, t.lo, t.span);
    case SynthKind::Constant:
      return t.value;
  }
  return 0.f;
}

Tensor materialize_synthetic(const SyntheticTensor& t) {
  Tensor out = Tensor::empty(t.shape, t.dtype, Device::Host);
  const int64_t n = t.shape.numel();
  void* base = out.raw();
  parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        if (t.dtype == DType::F8E4M3) {
          auto* q = static_cast<uint8_t*>(base);
          for (int64_t i = b; i < e; ++i)
            q[i] = fp8e4m3_from_f32_sat(synthetic_value(t, i) * t.fp8_inv_scale);
        } else {
          for (int64_t i = b; i < e; ++i)
            store_from_f32(base, t.dtype, static_cast<size_t>(i), synthetic_value(t, i));
        }
      },
      1 << 16);
  return out;
}

}  // namespace strata::model
