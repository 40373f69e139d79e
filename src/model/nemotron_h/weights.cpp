// Loading ModelWeights from a TensorSource (spec 2.1 names and shapes).
#include "model/nemotron_h/weights.h"

#include <chrono>
#include <cmath>
#include <set>

#include "core/check.h"
#include "core/log.h"

namespace strata::model {
namespace {

// Fetches tensors by name, checks shapes and dtypes, converts where the engine needs another
// dtype, and remembers what was used so the rest can be reported.
class WeightReader {
 public:
  WeightReader(const TensorSource& src, std::string prefix, DType act, WeightLoadReport* report)
      : src_(src), prefix_(std::move(prefix)), act_(act), report_(report) {}

  const std::string& prefix() const { return prefix_; }
  bool has(const std::string& name) const { return src_.has(name); }
  int stored_rank(const std::string& name) const {
    return src_.has(name) ? src_.get(name).rank() : -1;
  }

  // The tensor as stored, shape-checked. `expected` may hold -1 for "any" in one dimension.
  Tensor raw(const std::string& name, const Shape& expected) {
    if (!src_.has(name))
      fail("{}: missing tensor {} (expected shape {})", src_.describe(), name, expected.str());
    Tensor t = src_.get(name);
    bool ok = t.rank() == expected.rank();
    for (int i = 0; ok && i < t.rank(); ++i)
      ok = expected[i] < 0 || expected[i] == t.dim(i);
    if (!ok)
      fail("{}: tensor {}: expected shape {}, found {}", src_.describe(), name, expected.str(),
           t.shape().str());
    // Device tensors (dummy weights generated on the device) are taken as they are; only
    // host tensors can be converted (see convert).
    used_.insert(name);
    ++report_->tensors;
    return t;
  }

  // A float tensor in dtype `want` (a converted copy when stored otherwise).
  Tensor as(const std::string& name, const Shape& expected, DType want) {
    Tensor t = raw(name, expected);
    if (!is_float(t.dtype()) || t.dtype() == DType::F8E4M3)
      fail("{}: tensor {}: expected a float tensor (bf16, f16 or f32), found {}", src_.describe(),
           name, dtype_name(t.dtype()));
    if (t.dtype() == want) {
      report_->viewed_bytes += t.nbytes();
      return t;
    }
    return convert(t, want);
  }
  Tensor act(const std::string& name, const Shape& expected) { return as(name, expected, act_); }

  // `base`.weight [out, in] as a linear weight: bf16/f32/f16 in the activation dtype, or f8e4m3
  // with its per-tensor scales (ModelOpt FP8).
  LinearWeight linear(const std::string& base, int64_t out, int64_t in) {
    const std::string name = base + ".weight";
    LinearWeight w;
    if (src_.has(name) && src_.get(name).dtype() == DType::F8E4M3) {
      w.weight = raw(name, Shape{out, in});
      report_->viewed_bytes += w.weight.nbytes();
      w.weight_scale = scalar(base + ".weight_scale", true);
      w.input_scale = src_.has(base + ".input_scale") ? scalar(base + ".input_scale", true) : 0.f;
      return w;
    }
    if (src_.has(name) && src_.get(name).dtype() == DType::U8)
      fail("{}: tensor {} is NVFP4-packed (u8); NVFP4 checkpoints are not supported yet",
           src_.describe(), name);
    w.weight = act(name, Shape{out, in});
    return w;
  }

  // A one-element f32 scale (shape [] or [1]); must be positive and finite.
  float scalar(const std::string& name, bool positive) {
    if (!src_.has(name)) fail("{}: missing tensor {} (an FP8 scale)", src_.describe(), name);
    Tensor t = src_.get(name);
    if (t.numel() != 1 || !is_float(t.dtype()))
      fail("{}: tensor {}: expected one float scale, found {}", src_.describe(), name, t.str());
    used_.insert(name);
    ++report_->tensors;
    const float v = load_as_f32(t.raw(), t.dtype(), 0);
    if (positive && (!(v > 0.f) || !std::isfinite(v)))
      fail("{}: tensor {}: scale must be positive and finite, found {}", src_.describe(), name, v);
    return v;
  }

  Tensor convert(const Tensor& t, DType want) {
    if (t.device() != Device::Host)
      fail("{}: tensor {} is {} on the device; the model needs {} (no device-side conversion)",
           src_.describe(), t.str(), dtype_name(t.dtype()), dtype_name(want));
    const Tensor src = t.contiguous();
    Tensor out = Tensor::empty(t.shape(), want, Device::Host);
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i)
      store_from_f32(out.raw(), want, static_cast<size_t>(i),
                     load_as_f32(src.raw(), src.dtype(), static_cast<size_t>(i)));
    report_->converted_bytes += out.nbytes();
    return out;
  }

  // A tensor created by the loader (not read from the source).
  void count_created(const Tensor& t) { report_->converted_bytes += t.nbytes(); }

  const std::set<std::string>& used() const { return used_; }

 private:
  const TensorSource& src_;
  std::string prefix_;
  DType act_;
  WeightLoadReport* report_;
  std::set<std::string> used_;
};

// The checkpoint's top-level prefix: `backbone.` (official), `model.` (HF in-memory names) or none.
std::string detect_prefix(const TensorSource& src) {
  for (const char* p : {"backbone.", "model.", ""})
    for (const char* e : {"embeddings.weight", "embedding.weight", "embed_tokens.weight"})
      if (src.has(std::string(p) + e)) return p;
  fail(
      "{}: no embedding tensor (looked for backbone.embeddings.weight and "
      "backbone.embedding.weight)",
      src.describe());
}

std::string embedding_name(const TensorSource& src, const std::string& prefix) {
  for (const char* e : {"embeddings.weight", "embedding.weight", "embed_tokens.weight"})
    if (src.has(prefix + e)) return prefix + e;
  fail("{}: no embedding tensor under {}", src.describe(), prefix);
}

MambaWeights load_mamba(WeightReader& r, const ModelConfig& c, const std::string& m) {
  MambaWeights w;
  w.in_proj = r.linear(m + "in_proj", c.in_proj_rows, c.hidden_size);
  // Conv1d weight [C, 1, K] (PyTorch depthwise layout) viewed as [C, K]; [C, K] also accepted.
  const std::string conv = m + "conv1d.weight";
  Tensor cw;
  if (r.stored_rank(conv) != 2) {
    cw = r.act(conv, Shape{c.conv_dim, 1, c.conv_kernel});
  } else {
    cw = r.act(conv, Shape{c.conv_dim, c.conv_kernel});
  }
  w.conv_weight = cw.contiguous().reshape(Shape{c.conv_dim, c.conv_kernel});
  if (c.use_conv_bias) {
    w.conv_bias = r.act(m + "conv1d.bias", Shape{c.conv_dim});
  } else {
    w.conv_bias = Tensor::zeros(Shape{c.conv_dim}, w.conv_weight.dtype());
    r.count_created(w.conv_bias);
  }
  w.dt_bias = r.act(m + "dt_bias", Shape{c.mamba_num_heads});
  // A = -exp(A_log) in f32, once (vLLM does the same at load).
  const Tensor a_log = r.as(m + "A_log", Shape{c.mamba_num_heads}, DType::F32);
  w.A = Tensor::empty(Shape{c.mamba_num_heads}, DType::F32);
  for (int64_t h = 0; h < c.mamba_num_heads; ++h)
    w.A.data<float>()[h] = -std::exp(a_log.data<float>()[h]);
  r.count_created(w.A);
  w.D = r.act(m + "D", Shape{c.mamba_num_heads});
  w.norm = r.act(m + "norm.weight", Shape{c.d_inner});
  w.out_proj = r.linear(m + "out_proj", c.hidden_size, c.d_inner);
  return w;
}

AttentionWeights load_attention(WeightReader& r, const ModelConfig& c, const std::string& m) {
  AttentionWeights w;
  w.q_proj = r.linear(m + "q_proj", c.q_size, c.hidden_size);
  w.k_proj = r.linear(m + "k_proj", c.kv_size, c.hidden_size);
  w.v_proj = r.linear(m + "v_proj", c.kv_size, c.hidden_size);
  w.o_proj = r.linear(m + "o_proj", c.hidden_size, c.q_size);
  return w;
}

MlpWeights load_mlp(WeightReader& r, const ModelConfig& c, const std::string& m, int64_t width) {
  MlpWeights w;
  w.up = r.linear(m + "up_proj", width, c.hidden_size);
  w.down = r.linear(m + "down_proj", c.hidden_size, width);
  return w;
}

MoeWeights load_moe(WeightReader& r, const ModelConfig& c, const std::string& m) {
  MoeWeights w;
  const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size, H = c.hidden_size;
  w.router = r.linear(m + "gate", E, H);
  w.correction_bias = r.as(m + "gate.e_score_correction_bias", Shape{E}, DType::F32);
  // Official layout: one tensor per expert. HF-native in-memory layout: fused [E, I, H] / [E, H,
  // I].
  const std::string fused_up = m + "experts.up_proj", fused_down = m + "experts.down_proj";
  if (!r.has(m + "experts.0.up_proj.weight") && r.has(fused_up)) {
    const Tensor up = r.act(fused_up, Shape{E, I, H});
    const Tensor down = r.act(fused_down, Shape{E, H, I});
    for (int64_t e = 0; e < E; ++e) {
      w.up.push_back(LinearWeight{up.select(e)});
      w.down.push_back(LinearWeight{down.select(e)});
    }
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::string ep = m + "experts." + std::to_string(e) + ".";
      w.up.push_back(r.linear(ep + "up_proj", I, H));
      w.down.push_back(r.linear(ep + "down_proj", H, I));
    }
  }
  w.has_shared = c.shared_intermediate > 0;
  if (w.has_shared) w.shared = load_mlp(r, c, m + "shared_experts.", c.shared_intermediate);
  return w;
}

}  // namespace

ModelWeights load_weights(const TensorSource& source, const ModelConfig& c) {
  const auto t0 = std::chrono::steady_clock::now();
  ModelWeights w;
  const std::string prefix = detect_prefix(source);
  const std::string emb_name = embedding_name(source, prefix);
  const Tensor emb_raw = source.get(emb_name);
  if (c.dtype) {
    w.act_dtype = *c.dtype;
  } else {  // no torch_dtype: run in the embedding's dtype
    w.act_dtype = (emb_raw.dtype() == DType::F32) ? DType::F32 : DType::BF16;
  }
  WeightReader r(source, prefix, w.act_dtype, &w.report);

  w.embedding = r.act(emb_name, Shape{c.vocab_size, c.hidden_size});
  for (int64_t i = 0; i < c.num_layers(); ++i) {
    LayerWeights L;
    L.kind = c.layers[static_cast<size_t>(i)];
    const std::string lp = prefix + "layers." + std::to_string(i) + ".";
    L.norm = r.act(lp + "norm.weight", Shape{c.hidden_size});
    const std::string m = lp + "mixer.";
    switch (L.kind) {
      case LayerKind::Mamba:
        L.mamba = load_mamba(r, c, m);
        break;
      case LayerKind::Attention:
        L.attention = load_attention(r, c, m);
        break;
      case LayerKind::Mlp:
        L.mlp = load_mlp(r, c, m, c.mlp_intermediate(i));
        break;
      case LayerKind::Moe:
        L.moe = load_moe(r, c, m);
        break;
    }
    w.layers.push_back(std::move(L));
  }
  w.norm_f = r.act(prefix + "norm_f.weight", Shape{c.hidden_size});
  if (c.tie_word_embeddings) {
    w.lm_head.weight = w.embedding;
    w.tied_lm_head = true;
  } else {
    if (!source.has("lm_head.weight"))
      fail("{}: missing tensor lm_head.weight (tie_word_embeddings is false)", source.describe());
    w.lm_head = r.linear("lm_head", c.vocab_size, c.hidden_size);
  }

  for (const std::string& n : source.names()) {
    if (r.used().count(n)) continue;
    if (n.rfind("mtp.", 0) == 0 || n.rfind(prefix + "mtp.", 0) == 0) {
      ++w.report.ignored_mtp;
    } else if (!(c.tie_word_embeddings && n == "lm_head.weight")) {
      w.report.unexpected.push_back(n);
    }
  }
  if (!w.report.unexpected.empty()) {
    std::string list;
    for (size_t i = 0; i < w.report.unexpected.size() && i < 5; ++i)
      list += " " + w.report.unexpected[i];
    log::warn("{}: {} tensors are not used by the model:{}{}", source.describe(),
              w.report.unexpected.size(), list, w.report.unexpected.size() > 5 ? " ..." : "");
  }
  w.report.mapped_bytes = source.mapped_bytes();
  w.report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return w;
}

void ModelWeights::to_device(Device device) {
  for_each_tensor([&](const std::string&, Tensor& t) {
    if (t.defined() && t.device() != device) t = t.contiguous().to(device);
  });
}

size_t ModelWeights::bytes() {
  size_t b = 0;
  for_each_tensor([&](const std::string&, Tensor& t) { b += t.nbytes(); });
  return b;
}

}  // namespace strata::model
