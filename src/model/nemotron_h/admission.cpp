#include "model/nemotron_h/admission.h"

#include <filesystem>

#include "core/dtype.h"

namespace strata::model {

double parameter_count_f64(const ModelConfig& c) {
  const double H = static_cast<double>(c.hidden_size);
  const double V = static_cast<double>(c.vocab_size);
  double n = V * H + H;  // embedding, norm_f
  if (!c.tie_word_embeddings) n += V * H;
  for (int64_t l = 0; l < c.num_layers(); ++l) {
    n += H;  // pre-mixer norm
    switch (c.layers[static_cast<size_t>(l)]) {
      case LayerKind::Mamba:
        n += double(c.in_proj_rows) * H + double(c.conv_dim) * double(c.conv_kernel) +
             (c.use_conv_bias ? double(c.conv_dim) : 0.0) + 3.0 * double(c.mamba_num_heads) +
             double(c.d_inner) + H * double(c.d_inner);
        break;
      case LayerKind::Attention:
        n += (double(c.q_size) + 2.0 * double(c.kv_size)) * H + H * double(c.q_size);
        break;
      case LayerKind::Mlp:
        n += 2.0 * double(c.mlp_intermediate(l)) * H;
        break;
      case LayerKind::Moe: {
        const double E = double(c.n_routed_experts);
        n += E * H + E + E * 2.0 * double(c.moe_intermediate_size) * H +
             2.0 * double(c.shared_intermediate) * H;
        break;
      }
    }
  }
  return n;
}

uint64_t safetensors_bytes_in(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  uint64_t total = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() != ".safetensors") continue;
    const auto size = it->file_size(ec);
    if (!ec) total += size;
    ec.clear();
  }
  return total;
}

namespace {

// Saturating: an absurd config gives "needs 1e+12 GiB", never a wrapped small number.
uint64_t to_bytes(double b) {
  return b >= 1.8e19 ? UINT64_MAX : static_cast<uint64_t>(b);
}

}  // namespace

ResourceNeed weights_need(const ModelConfig& config, const LoadOptions& o) {
  ResourceNeed need;
  if (o.format == LoadFormat::Dummy) {
    const double per = o.dummy.fp8 ? 1.0 : static_cast<double>(dtype_size(o.dummy.dtype));
    const uint64_t bytes = to_bytes(parameter_count_f64(config) * per);
    if (o.device == Device::Host) {
      need.host_bytes = bytes;
    } else {
      need.device_bytes = bytes;
      if (o.keep_host_weights) need.host_bytes = bytes;
    }
  } else {
    const uint64_t files = safetensors_bytes_in(o.dir);
    need.mapped_bytes = files;
    if (o.device != Device::Host) need.device_bytes = files;
  }
  return need;
}

void admit_weights(const ModelConfig& config, const LoadOptions& o) {
  const std::string what = o.format == LoadFormat::Dummy
                               ? fmt::format("dummy weights for {} ({:.3g} parameters)",
                                             config.source, parameter_count_f64(config))
                               : fmt::format("the weights of {}", o.dir);
  check_fits(weights_need(config, o), what);
}

}  // namespace strata::model
