#include "model/nemotron_h/quantize_fp8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "core/check.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "io/bounded_file.h"
#include "io/checkpoint.h"
#include "io/checkpoint_writer.h"
#include "io/json_strict.h"
#include "io/modelopt_export.h"
#include "io/quant_config.h"
#include "model/nemotron_h/checkpoint_source.h"
#include "model/nemotron_h/admission.h"
#include "model/nemotron_h/fp8_calibration.h"
#include "model/nemotron_h/fp8_layout.h"

namespace strata::model {
namespace {

namespace fs = std::filesystem;

Tensor scalar_f32(float v) {
  Tensor t = Tensor::empty(Shape{}, DType::F32);
  t.data<float>()[0] = v;
  return t;
}

// (weight_scale, e4m3 weight) of a float weight [N, K].
std::pair<float, Tensor> quantize_weight(const Tensor& w) {
  const Tensor src = w.contiguous();
  const int64_t n = src.numel();
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i)
    amax = std::max(amax, std::abs(load_as_f32(src.raw(), src.dtype(), static_cast<size_t>(i))));
  const float scale = amax > 0.f ? amax / kFp8E4M3Max : 1.f;  // an all-zero weight stays zero
  Tensor q = Tensor::empty(src.shape(), DType::F8E4M3);
  auto* qp = q.data<uint8_t>();
  parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i)
          qp[i] = fp8e4m3_from_f32_sat(load_as_f32(src.raw(), src.dtype(), static_cast<size_t>(i)) /
                                       scale);
      },
      1 << 16);
  return {scale, q};
}

// "backbone.layers.L.mixer.experts.E.up_proj" -> ("backbone.layers.L.mixer.experts.", "up_proj"),
// else empty.
std::pair<std::string, std::string> expert_key(const std::string& module) {
  const size_t at = module.find(".experts.");
  if (at == std::string::npos) return {};
  const size_t dot = module.find('.', at + 9);
  if (dot == std::string::npos) return {};
  return {module.substr(0, at + 9), module.substr(dot + 1)};
}

void copy_side_files(const std::string& in, const std::string& out) {
  for (const auto& e : fs::directory_iterator(in)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    if (name == "config.json" || name == "hf_quant_config.json" ||
        name == "model.safetensors.index.json" || e.path().extension() == ".safetensors")
      continue;
    std::error_code ec;
    fs::copy_file(e.path(), fs::path(out) / name, fs::copy_options::overwrite_existing, ec);
    if (ec) fail("quantize: cannot copy {} to {}: {}", e.path().string(), out, ec.message());
  }
}

}  // namespace

QuantizeSummary quantize_fp8(const std::string& in_dir, const std::string& out_dir,
                             const QuantizeOptions& o) {
  if (fs::exists(out_dir) && !fs::is_empty(out_dir))
    fail("quantize: {} exists and is not empty", out_dir);
  const ModelConfig config = ModelConfig::load_dir(in_dir);
  const io::QuantConfig existing = io::load_quant_config(in_dir);
  if (existing.quantized())
    fail("quantize: {} is already quantized ({} in {})", in_dir, io::quant_algo_name(existing.algo),
         existing.source);
  {  // Admission: the input is mapped and calibrated on the host (caches admit themselves).
    LoadOptions host;
    host.dir = in_dir;
    admit_weights(config, host);
  }
  const CheckpointSource source = CheckpointSource::open(in_dir);
  for (const std::string& n : source.names()) {
    const DType d = source.checkpoint().info(n).dtype;
    if (d == DType::F8E4M3 || d == DType::U8)
      fail("quantize: {}: tensor {} is already {} (quantize takes a BF16 or F32 checkpoint)",
           in_dir, n, dtype_name(d));
  }

  // Calibration on the host forward.
  const auto t0 = std::chrono::steady_clock::now();
  std::map<std::string, float> amax;
  {
    NemotronHModel m(config, load_weights(source, config));
    amax = calibrate_input_amax(
        m, calibration_prompts(config.vocab_size, o.calib_sequences, o.calib_length));
  }
  log::info("quantize: calibrated {} linear inputs over {} x {} tokens in {:.1f} s", amax.size(),
            o.calib_sequences, o.calib_length,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // Uncalibrated experts take the largest amax of the same projection in their layer.
  std::map<std::string, float> layer_expert_max;  // "prefix|proj" -> max
  for (const auto& [module, v] : amax) {
    const auto [prefix, proj] = expert_key(module);
    if (!prefix.empty())
      layer_expert_max[prefix + "|" + proj] = std::max(layer_expert_max[prefix + "|" + proj], v);
  }

  // The output tensors, in the input's order: quantized linears become weight + 2 scales.
  std::set<std::string> quantize;  // modules
  for (const std::string& m : linear_modules(config))
    if (fp8_quantized_module(config, m) && source.has(m + ".weight")) quantize.insert(m);
  struct Out {
    std::string name, module;
    enum Kind { Copy, Weight, WeightScale, InputScale } kind;
    size_t nbytes;
  };
  std::vector<Out> outs;
  QuantizeSummary sum;
  for (const std::string& n : source.names()) {
    const io::TensorInfo& info = source.checkpoint().info(n);
    sum.bytes_in += info.nbytes;
    const std::string module =
        n.size() > 7 && n.compare(n.size() - 7, 7, ".weight") == 0 ? n.substr(0, n.size() - 7) : "";
    if (!module.empty() && quantize.count(module)) {
      outs.push_back({n, module, Out::Weight, static_cast<size_t>(info.shape.numel())});
      outs.push_back({module + ".weight_scale", module, Out::WeightScale, 4});
      outs.push_back({module + ".input_scale", module, Out::InputScale, 4});
    } else {
      outs.push_back({n, "", Out::Copy, info.nbytes});
    }
  }
  std::map<std::string, float> input_scale;
  for (const std::string& m : quantize) {
    float a = amax.count(m) ? amax.at(m) : 0.f;
    if (!(a > 0.f)) {
      const auto [prefix, proj] = expert_key(m);
      const auto it = layer_expert_max.find(prefix + "|" + proj);
      if (prefix.empty() || it == layer_expert_max.end() || !(it->second > 0.f))
        fail(
            "quantize: no calibration input reached {} (and no expert of its layer to borrow from)",
            m);
      a = it->second;
      ++sum.uncalibrated;
    }
    input_scale[m] = a / kFp8E4M3Max;
  }
  std::map<std::string, float> weight_scale;
  std::vector<io::TensorToWrite> list;
  for (const Out& x : outs)
    list.push_back({x.name, x.nbytes});
  const auto written = io::write_checkpoint(out_dir, list,
                                            [&](size_t i) -> Tensor {
                                              const Out& x = outs[i];
                                              switch (x.kind) {
                                                case Out::Copy: {
                                                  ++sum.kept;
                                                  const Tensor t = source.get(x.name);
                                                  return t.contiguous();
                                                }
                                                case Out::Weight: {
                                                  auto [scale, q] =
                                                      quantize_weight(source.get(x.name));
                                                  weight_scale[x.module] = scale;
                                                  ++sum.quantized;
                                                  return q;
                                                }
                                                case Out::WeightScale:
                                                  return scalar_f32(weight_scale.at(x.module));
                                                case Out::InputScale:
                                                  return scalar_f32(input_scale.at(x.module));
                                              }
                                              return Tensor();
                                            },
                                            o.max_shard_bytes, {{"format", "pt"}});
  sum.bytes_out = written.total_bytes;

  io::ModeloptExport e;
  e.exclude_modules = fp8_excluded_modules(config);
  e.producer_name = "strata quantize";
  nlohmann::ordered_json cfg =
      io::parse_ordered_json_strict(io::read_text_file((fs::path(in_dir) / "config.json").string(),
                                                       "model config", io::kConfigMaxBytes),
                                    "config.json", io::kFileJsonMaxDepth);
  cfg["quantization_config"] =
      nlohmann::ordered_json::parse(io::quantization_config_json(e).dump());
  io::write_text_file((fs::path(out_dir) / "hf_quant_config.json").string(),
                      io::hf_quant_config_json(e).dump(2) + "\n");
  copy_side_files(in_dir, out_dir);
  io::write_text_file((fs::path(out_dir) / "config.json").string(), cfg.dump(2) + "\n");
  return sum;
}

}  // namespace strata::model
