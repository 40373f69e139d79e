// The typed weights of a Nemotron-H model (spec section 2.1), loaded from a TensorSource.
//
// Tensors stay views of the checkpoint mapping (no host copy) except where the engine needs a
// different form, each counted in the load report: A = -exp(A_log) (f32, computed once), and a
// float tensor whose stored dtype differs from the model's activation dtype (converted once,
// as vLLM converts parameters to the model dtype at load; the MoE correction bias stays f32).
//
// Quantized weights: a linear stored as f8e4m3 (ModelOpt FP8) is kept as is with its
// `.weight_scale` / `.input_scale` scalars in LinearWeight; NVFP4 (u8) is refused by name.
//
// Device residency: every tensor is reachable through for_each_tensor(name, Tensor&), so an
// upload pass can replace each one in place with a device copy (to_device does the plain one).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "model/nemotron_h/config.h"
#include "model/nemotron_h/tensor_source.h"
#include "ops/ops.h"

namespace strata::model {

using ops::LinearWeight;

struct MambaWeights {
  LinearWeight in_proj;   // [in_proj_rows, H]: rows z | x | B | C | dt
  Tensor conv_weight;     // [conv_dim, K] act (checkpoint [conv_dim, 1, K] viewed)
  Tensor conv_bias;       // [conv_dim] act (zeros when use_conv_bias = false)
  Tensor dt_bias;         // [Hm] act
  Tensor A;               // [Hm] f32 = -exp(A_log)
  Tensor D;               // [Hm] act
  Tensor norm;            // [d_inner] act, the gated grouped RMSNorm weight
  LinearWeight out_proj;  // [H, d_inner]
};

struct AttentionWeights {
  LinearWeight q_proj;  // [n_heads*hd, H]
  LinearWeight k_proj;  // [n_kv*hd, H]
  LinearWeight v_proj;  // [n_kv*hd, H]
  LinearWeight o_proj;  // [H, n_heads*hd]
  // FP8 KV-cache scales of a ModelOpt checkpoint (k_proj.k_scale / v_proj.v_scale), 0 when
  // absent. Read and validated; the KV cache itself is kept in the activation dtype.
  float k_scale = 0.f, v_scale = 0.f;
};

struct MlpWeights {
  LinearWeight up;    // [I, H]
  LinearWeight down;  // [H, I]
};

struct MoeWeights {
  LinearWeight router;             // [E, H] (act, or f32 when stored so)
  Tensor correction_bias;          // [E] f32 (selection only)
  std::vector<LinearWeight> up;    // E x [moe_I, H]
  std::vector<LinearWeight> down;  // E x [H, moe_I]
  bool has_shared = false;
  MlpWeights shared;  // [shared_I, H] / [H, shared_I]
};

struct LayerWeights {
  LayerKind kind = LayerKind::Mamba;
  Tensor norm;  // [H] act, the pre-mixer RMSNorm
  // Only the member of `kind` is filled.
  MambaWeights mamba;
  AttentionWeights attention;
  MlpWeights mlp;
  MoeWeights moe;
};

struct WeightLoadReport {
  int64_t tensors = 0;                  // tensors used
  size_t viewed_bytes = 0;              // bytes used as views of the source (no copy)
  size_t converted_bytes = 0;           // bytes of host copies made (dtype conversions, A)
  size_t mapped_bytes = 0;              // the source's mapped file bytes
  int64_t ignored_mtp = 0;              // mtp.* tensors skipped
  std::vector<std::string> unexpected;  // tensors the model does not use
  double seconds = 0;
};

struct ModelWeights {
  DType act_dtype = DType::BF16;
  Tensor embedding;  // [V, H] act
  std::vector<LayerWeights> layers;
  Tensor norm_f;         // [H] act
  LinearWeight lm_head;  // [V, H] (the embedding when tie_word_embeddings)
  bool tied_lm_head = false;
  WeightLoadReport report;

  // Calls f(name, Tensor&) for every tensor (checkpoint-style names; A is "<layer>.mixer.A").
  // The tied lm_head is visited once, under the embedding's name.
  template <class F>
  void for_each_tensor(F&& f);
  // Replaces every tensor by a copy on `device` (the simple upload pass).
  void to_device(Device device);
  Device device() const { return embedding.device(); }
  size_t bytes();  // every tensor once (the tied lm_head counted with the embedding)
};

// Loads and validates every tensor the config needs. Throws strata::Error naming the tensor
// and the expected and found shape or dtype. Unexpected tensors are logged (warn) and listed in
// the report; `mtp.*` (multi-token-prediction heads) are ignored.
ModelWeights load_weights(const TensorSource& source, const ModelConfig& config);

// ---- implementation of the template ----

template <class F>
void ModelWeights::for_each_tensor(F&& f) {
  f(std::string("embeddings.weight"), embedding);
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerWeights& L = layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    f(p + "norm.weight", L.norm);
    switch (L.kind) {
      case LayerKind::Mamba:
        f(p + "mixer.in_proj.weight", L.mamba.in_proj.weight);
        f(p + "mixer.conv1d.weight", L.mamba.conv_weight);
        f(p + "mixer.conv1d.bias", L.mamba.conv_bias);
        f(p + "mixer.dt_bias", L.mamba.dt_bias);
        f(p + "mixer.A", L.mamba.A);
        f(p + "mixer.D", L.mamba.D);
        f(p + "mixer.norm.weight", L.mamba.norm);
        f(p + "mixer.out_proj.weight", L.mamba.out_proj.weight);
        break;
      case LayerKind::Attention:
        f(p + "mixer.q_proj.weight", L.attention.q_proj.weight);
        f(p + "mixer.k_proj.weight", L.attention.k_proj.weight);
        f(p + "mixer.v_proj.weight", L.attention.v_proj.weight);
        f(p + "mixer.o_proj.weight", L.attention.o_proj.weight);
        break;
      case LayerKind::Mlp:
        f(p + "mixer.up_proj.weight", L.mlp.up.weight);
        f(p + "mixer.down_proj.weight", L.mlp.down.weight);
        break;
      case LayerKind::Moe:
        f(p + "mixer.gate.weight", L.moe.router.weight);
        f(p + "mixer.gate.e_score_correction_bias", L.moe.correction_bias);
        for (size_t e = 0; e < L.moe.up.size(); ++e) {
          const std::string ep = p + "mixer.experts." + std::to_string(e) + ".";
          f(ep + "up_proj.weight", L.moe.up[e].weight);
          f(ep + "down_proj.weight", L.moe.down[e].weight);
        }
        if (L.moe.has_shared) {
          f(p + "mixer.shared_experts.up_proj.weight", L.moe.shared.up.weight);
          f(p + "mixer.shared_experts.down_proj.weight", L.moe.shared.down.weight);
        }
        break;
    }
  }
  f(std::string("norm_f.weight"), norm_f);
  if (tied_lm_head) {
    lm_head.weight = embedding;  // follows the embedding wherever it was moved
  } else {
    f(std::string("lm_head.weight"), lm_head.weight);
  }
}

}  // namespace strata::model
