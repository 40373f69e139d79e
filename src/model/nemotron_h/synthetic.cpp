#include "model/nemotron_h/synthetic.h"

#include <cmath>
#include <functional>

namespace strata::model {

uint64_t SplitMix::next() {
  uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double SplitMix::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double SplitMix::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

namespace {

class Maker {
 public:
  Maker(const SyntheticOptions& o, TensorMapSource* out) : o_(o), out_(out), rng_(o.seed) {}

  // A tensor of `shape` and `dtype` whose elements are gen().
  void add(const std::string& name, const Shape& shape, DType dtype, const std::function<double()>& gen) {
    Tensor t = Tensor::empty(shape, dtype);
    for (int64_t i = 0; i < t.numel(); ++i) store_from_f32(t.raw(), dtype, static_cast<size_t>(i), static_cast<float>(gen()));
    out_->add(name, std::move(t));
  }
  void normal(const std::string& name, const Shape& shape, double std, DType dtype) {
    add(name, shape, dtype, [&] { return std * rng_.normal(); });
  }
  void uniform(const std::string& name, const Shape& shape, double lo, double hi, DType dtype) {
    add(name, shape, dtype, [&] { return lo + (hi - lo) * rng_.uniform(); });
  }
  // Linear [out, in] at 1/sqrt(fan_in), times `scale`.
  void linear(const std::string& name, int64_t out, int64_t in, double scale = 1.0) {
    normal(name, Shape{out, in}, scale / std::sqrt(static_cast<double>(in)), o_.dtype);
  }
  void norm(const std::string& name, int64_t n) { uniform(name, Shape{n}, 0.9, 1.1, o_.dtype); }

 private:
  const SyntheticOptions& o_;
  TensorMapSource* out_;
  SplitMix rng_;
};

}  // namespace

TensorMapSource make_synthetic_weights(const ModelConfig& c, const SyntheticOptions& o) {
  TensorMapSource src("synthetic " + c.source);
  Maker mk(o, &src);
  const int64_t H = c.hidden_size;
  const double damp = o.residual_damping;
  mk.normal("backbone.embeddings.weight", Shape{c.vocab_size, H}, 1.0, o.dtype);
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    const std::string p = "backbone.layers." + std::to_string(i) + ".";
    const std::string m = p + "mixer.";
    mk.norm(p + "norm.weight", H);
    switch (c.layers[static_cast<size_t>(i)]) {
      case LayerKind::Mamba: {
        const int64_t Hm = c.mamba_num_heads;
        mk.linear(m + "in_proj.weight", c.in_proj_rows, H);
        mk.normal(m + "conv1d.weight", Shape{c.conv_dim, 1, c.conv_kernel},
                  1.0 / std::sqrt(static_cast<double>(c.conv_kernel)), o.dtype);
        if (c.use_conv_bias) mk.normal(m + "conv1d.bias", Shape{c.conv_dim}, 0.1, o.dtype);
        // softplus(dt + dt_bias) spreads over ~1e-3 .. 1e-1 with dt ~ N(0, 1).
        mk.uniform(m + "dt_bias", Shape{Hm}, -6.0, -2.5, o.dtype);
        mk.uniform(m + "A_log", Shape{Hm}, 0.0, std::log(8.0), DType::F32);  // A in [-8, -1]
        mk.uniform(m + "D", Shape{Hm}, 0.5, 1.5, DType::F32);
        mk.norm(m + "norm.weight", c.d_inner);
        mk.linear(m + "out_proj.weight", H, c.d_inner, damp);
        break;
      }
      case LayerKind::Attention:
        mk.linear(m + "q_proj.weight", c.q_size, H);
        mk.linear(m + "k_proj.weight", c.kv_size, H);
        mk.linear(m + "v_proj.weight", c.kv_size, H);
        mk.linear(m + "o_proj.weight", H, c.q_size, damp);
        break;
      case LayerKind::Mlp: {
        const int64_t I = c.mlp_intermediate(i);
        mk.linear(m + "up_proj.weight", I, H);
        mk.linear(m + "down_proj.weight", H, I, damp);
        break;
      }
      case LayerKind::Moe: {
        mk.linear(m + "gate.weight", c.n_routed_experts, H);
        mk.normal(m + "gate.e_score_correction_bias", Shape{c.n_routed_experts}, 0.05, DType::F32);
        for (int64_t e = 0; e < c.n_routed_experts; ++e) {
          const std::string ep = m + "experts." + std::to_string(e) + ".";
          mk.linear(ep + "up_proj.weight", c.moe_intermediate_size, H);
          mk.linear(ep + "down_proj.weight", H, c.moe_intermediate_size, damp);
        }
        if (c.shared_intermediate > 0) {
          mk.linear(m + "shared_experts.up_proj.weight", c.shared_intermediate, H);
          mk.linear(m + "shared_experts.down_proj.weight", H, c.shared_intermediate, damp);
        }
        break;
      }
    }
  }
  mk.norm("backbone.norm_f.weight", H);
  if (!c.tie_word_embeddings) mk.linear("lm_head.weight", c.vocab_size, H);
  return src;
}

}  // namespace strata::model
