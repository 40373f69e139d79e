// The quantization metadata of a ModelOpt-format checkpoint, as `strata quantize` and
// `strata make-checkpoint --dtype fp8` write it (spec/nemotron_h.md section 2.2):
//   hf_quant_config.json: {"producer": {"name", "version"},
//                          "quantization": {"quant_algo", "kv_cache_quant_algo",
//                          "exclude_modules"}}
//   config.json["quantization_config"]: {"quant_method": "modelopt", "quant_algo",
//                                        "kv_cache_quant_algo", "exclude_modules", "producer"}
// Both say the same thing, so a reader of either file (vLLM reads hf_quant_config.json when
// present, transformers the config.json entry) sees one layout.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace strata::io {

struct ModeloptExport {
  std::string quant_algo = "FP8";
  std::string kv_cache_quant_algo;  // empty = null (KV cache not quantized)
  std::vector<std::string> exclude_modules;
  std::string producer_name = "strata";
  std::string producer_version = "0";
};

nlohmann::json hf_quant_config_json(const ModeloptExport& e);
nlohmann::json quantization_config_json(const ModeloptExport& e);

}  // namespace strata::io
