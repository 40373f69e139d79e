#include "model/nemotron_h/load.h"

#include "core/log.h"
#include "model/nemotron_h/checkpoint_source.h"

namespace strata::model {

std::unique_ptr<NemotronHModel> load_model(const std::string& dir, Device device, bool sampling) {
  ModelConfig config = ModelConfig::load_dir(dir);
  const CheckpointSource source = CheckpointSource::open(dir);
  ModelWeights weights = load_weights(source, config);
  const WeightLoadReport& r = weights.report;
  log::debug("{}: {} tensors, {:.1f} MiB mapped, {:.1f} MiB viewed, {:.3f} MiB converted, {:.2f} s", dir, r.tensors,
             r.mapped_bytes / 1048576.0, r.viewed_bytes / 1048576.0, r.converted_bytes / 1048576.0, r.seconds);
  auto model = std::make_unique<NemotronHModel>(std::move(config), std::move(weights));
  model->check_kernels(device, sampling);
  if (device != Device::Host) model->weights().to_device(device);
  return model;
}

int64_t parameter_count(const ModelConfig& c) {
  const int64_t H = c.hidden_size;
  int64_t n = c.vocab_size * H + H;  // embedding, norm_f
  if (!c.tie_word_embeddings) n += c.vocab_size * H;
  for (int64_t l = 0; l < c.num_layers(); ++l) {
    n += H;  // pre-mixer norm
    switch (c.layers[static_cast<size_t>(l)]) {
      case LayerKind::Mamba:
        n += c.in_proj_rows * H + c.conv_dim * c.conv_kernel + (c.use_conv_bias ? c.conv_dim : 0) +
             3 * c.mamba_num_heads + c.d_inner + H * c.d_inner;
        break;
      case LayerKind::Attention: n += (c.q_size + 2 * c.kv_size) * H + H * c.q_size; break;
      case LayerKind::Mlp: n += 2 * c.mlp_intermediate(l) * H; break;
      case LayerKind::Moe:
        n += c.n_routed_experts * H + c.n_routed_experts + c.n_routed_experts * 2 * c.moe_intermediate_size * H +
             2 * c.shared_intermediate * H;
        break;
    }
  }
  return n;
}

}  // namespace strata::model
