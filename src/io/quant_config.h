// ModelOpt quantization settings of a checkpoint (spec/nemotron_h.md 2.2, 2.3), read from
// hf_quant_config.json or from config.json's "quantization_config", as vLLM reads them
// (vllm/model_executor/layers/quantization/modelopt.py):
//
//   hf_quant_config.json  {"producer": {"name": "modelopt", "version": "0.29.0"},
//                          "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8",
//                                           "group_size": 16, "exclude_modules": [...]}}
//   config.json           "quantization_config": {"quant_method": "modelopt", "quant_algo": ...,
//                          "kv_cache_quant_algo": ... | "kv_cache_scheme": {"type": "float",
//                          "num_bits": 8}, "exclude_modules" | "ignore": [...], "group_size": ...}
//                          (or the hf_quant_config.json layout nested under "quantization")
//
// Algorithm names are case-insensitive (vLLM upper-cases them). strata runs "FP8" (per-tensor
// static weight and activation scales) and "NVFP4" (W4A4, e4m3 block scales every 16 elements);
// every other ModelOpt algorithm (FP8_PER_CHANNEL_PER_TOKEN, FP8_PB_WO, W4A16_NVFP4, MXFP8,
// MIXED_PRECISION, W4A16_AWQ, W4A8_AWQ, INT8_SQ, ...) and every non-ModelOpt quant_method is an
// error naming the algorithm and the file. The KV cache may be FP8 or unquantized.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::io {

enum class QuantAlgo : uint8_t { None, FP8, NVFP4 };
std::string_view quant_algo_name(QuantAlgo a);  // "none", "FP8", "NVFP4"

struct QuantConfig {
  QuantAlgo algo = QuantAlgo::None;           // how the weights of Linear layers are stored
  QuantAlgo kv_cache_algo = QuantAlgo::None;  // None or FP8
  int64_t group_size = 0;  // NVFP4: elements per e4m3 scale along K (always 16); 0 otherwise
  std::vector<std::string> exclude_modules;  // patterns, as written in the file
  std::string producer;                      // e.g. "modelopt 0.29.0"; empty when not given
  std::string source;  // the file these settings came from; empty for an unquantized model

  bool quantized() const { return algo != QuantAlgo::None; }
  // True when the module (a checkpoint name without ".weight", e.g.
  // "backbone.layers.4.mixer.in_proj") stays unquantized. vLLM's rules, in order: equal to a
  // pattern; a pattern is a substring of the name (its legacy rule for older ModelOpt exports,
  // where "x*" also counts as "x"); the name matches a pattern as a wildcard (glob_match).
  bool is_excluded(std::string_view module) const;
  // One line for `strata inspect`: "NVFP4 (group 16), KV cache FP8, 42 excluded patterns,
  // from DIR/hf_quant_config.json (modelopt 0.29.0)".
  std::string describe() const;
};

// The text of an hf_quant_config.json; `file` names it in messages.
QuantConfig parse_hf_quant_config(std::string_view json_text, std::string_view file);

// The "quantization_config" object of a config.json. Throws when it names no algorithm (ModelOpt
// then keeps it in hf_quant_config.json: use load_quant_config).
QuantConfig parse_quantization_config(const nlohmann::json& qc, std::string_view file);

// The settings of the checkpoint in `dir`. Like vLLM, config.json's quantization_config wins
// when it names an algorithm; when it only says quant_method "modelopt", hf_quant_config.json
// must give the rest. When both name algorithms they must agree (else an error naming both
// files). Neither present: an unquantized config.
QuantConfig load_quant_config(const std::string& dir);

}  // namespace strata::io
