#include "model/nemotron_h/load.h"

#include <chrono>

#include "core/log.h"
#include "io/quant_config.h"
#include "model/nemotron_h/admission.h"
#include "model/nemotron_h/checkpoint_source.h"
#include "model/nemotron_h/dummy_weights.h"
#include "model/nemotron_h/quant_check.h"
#include "ops/cuda/cuda_backend.h"

namespace strata::model {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::unique_ptr<NemotronHModel> load_model(const LoadOptions& o) {
  LoadReport report;
  report.device = std::string(device_name(o.device));
  ModelConfig config;
  ModelWeights weights;
  auto t0 = std::chrono::steady_clock::now();
  if (o.format == LoadFormat::Safetensors) {
    report.source = o.dir;
    config = ModelConfig::load_dir(o.dir);
    const io::QuantConfig quant = io::load_quant_config(o.dir);
    admit_weights(config, o);  // refuse what cannot fit before mapping or uploading anything
    const CheckpointSource source = CheckpointSource::open(o.dir);
    report.phase("open", seconds_since(t0));
    t0 = std::chrono::steady_clock::now();
    weights = load_weights(source, config);
    check_quantization(source, config, quant, weights);
    report.phase("weights", seconds_since(t0));
    const WeightLoadReport& r = weights.report;
    report.tensors = r.tensors;
    report.host_mapped_bytes = r.mapped_bytes;
    report.host_copied_bytes = r.converted_bytes;
  } else {
    report.source = "dummy " + o.dummy_config.source;
    config = o.dummy_config;
    admit_weights(config, o);  // refuse what cannot fit before generating anything
    weights = load_dummy_weights(config, o.dummy, o.device,
                                 o.device == Device::Cuda ? cuda::stream() : nullptr, &report);
    if (o.device == Device::Cuda)
      cuda::synchronize();  // the fills are asynchronous: time them whole
    report.phase("generate", seconds_since(t0));
  }
  auto model = std::make_unique<NemotronHModel>(std::move(config), std::move(weights));
  model->check_kernels(o.device, o.sampling);
  if (o.device != Device::Host) {
    t0 = std::chrono::steady_clock::now();
    WeightResidency& res = model->residency();
    res.on(o.device);
    if (!o.keep_host_weights) res.make_resident(o.device);
    report.phase("upload", seconds_since(t0));
    report.device_uploaded_bytes = res.transfers(o.device).bytes;
    report.staging_peak = res.transfers(o.device).staging_peak;
    report.device_bytes = res.bytes_on(o.device);
  }
  report.host_resident_peak = peak_resident_bytes();
  model->load_report() = report;
  log::debug("{}", report.text());
  return model;
}

std::unique_ptr<NemotronHModel> load_model(const std::string& dir, Device device, bool sampling) {
  LoadOptions o;
  o.dir = dir;
  o.device = device;
  o.sampling = sampling;
  return load_model(o);
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
      case LayerKind::Attention:
        n += (c.q_size + 2 * c.kv_size) * H + H * c.q_size;
        break;
      case LayerKind::Mlp:
        n += 2 * c.mlp_intermediate(l) * H;
        break;
      case LayerKind::Moe:
        n += c.n_routed_experts * H + c.n_routed_experts +
             c.n_routed_experts * 2 * c.moe_intermediate_size * H + 2 * c.shared_intermediate * H;
        break;
    }
  }
  return n;
}

}  // namespace strata::model
