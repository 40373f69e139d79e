#include "io/modelopt_export.h"

namespace strata::io {
namespace {

nlohmann::json kv_algo(const ModeloptExport& e) {
  return e.kv_cache_quant_algo.empty() ? nlohmann::json(nullptr)
                                       : nlohmann::json(e.kv_cache_quant_algo);
}

}  // namespace

nlohmann::json hf_quant_config_json(const ModeloptExport& e) {
  nlohmann::json j;
  j["producer"] = {{"name", e.producer_name}, {"version", e.producer_version}};
  j["quantization"] = {{"quant_algo", e.quant_algo},
                       {"kv_cache_quant_algo", kv_algo(e)},
                       {"exclude_modules", e.exclude_modules}};
  return j;
}

nlohmann::json quantization_config_json(const ModeloptExport& e) {
  nlohmann::json j;
  j["quant_method"] = "modelopt";
  j["quant_algo"] = e.quant_algo;
  j["kv_cache_quant_algo"] = kv_algo(e);
  j["exclude_modules"] = e.exclude_modules;
  j["producer"] = {{"name", e.producer_name}, {"version", e.producer_version}};
  return j;
}

}  // namespace strata::io
