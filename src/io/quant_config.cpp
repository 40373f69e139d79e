#include "io/quant_config.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/check.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "io/module_pattern.h"

namespace strata::io {

namespace {

using nlohmann::json;

constexpr int64_t kNvfp4GroupSize = 16;
constexpr int kConfigMaxDepth = 64;  // config.json nests a little; this only stops abuse

// Settings read from one place; `algo_given` is false for config.json's bare
// {"quant_method": "modelopt"}, which leaves the algorithm to hf_quant_config.json.
struct Parsed {
  QuantConfig cfg;
  bool algo_given = true;
};

std::string upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// A field that may be absent or null; otherwise must be a string.
std::optional<std::string> opt_string(const json& obj, const char* key, std::string_view file,
                                      std::string_view where) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const json& v = obj[key];
  if (!v.is_string())
    fail("{}: {}{} is a JSON {}, not a string", file, where, key, json_type_name(v));
  return v.get<std::string>();
}

QuantAlgo weight_algo(const std::string& name, std::string_view file, std::string_view field) {
  const std::string u = upper(name);
  if (u == "FP8") return QuantAlgo::FP8;
  if (u == "NVFP4") return QuantAlgo::NVFP4;
  fail("{}: {} {} is not supported: strata runs ModelOpt FP8 (per-tensor) and NVFP4 checkpoints",
       file, field, quote_name(name));
}

QuantAlgo kv_algo(const std::string& name, std::string_view file, std::string_view field) {
  if (upper(name) == "FP8") return QuantAlgo::FP8;
  fail("{}: {} {} is not supported: the KV cache is FP8 or unquantized", file, field,
       quote_name(name));
}

std::vector<std::string> exclude_list(const json& obj, const char* key, std::string_view file,
                                      std::string_view where) {
  std::vector<std::string> out;
  if (!obj.contains(key) || obj[key].is_null()) return out;
  const json& v = obj[key];
  if (!v.is_array())
    fail("{}: {}{} is a JSON {}, not a list of module names", file, where, key, json_type_name(v));
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string())
      fail("{}: {}{}[{}] is a JSON {}, not a string", file, where, key, i, json_type_name(v[i]));
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

// NVFP4 fixes the block at 16 elements; a file saying otherwise describes another format.
int64_t group_size_for(QuantAlgo algo, const json& obj, std::string_view file,
                       std::string_view where) {
  if (algo != QuantAlgo::NVFP4) return 0;
  if (!obj.contains("group_size") || obj["group_size"].is_null()) return kNvfp4GroupSize;
  const json& g = obj["group_size"];
  if (!g.is_number_integer())
    fail("{}: {}group_size is a JSON {}, not an integer", file, where, json_type_name(g));
  if (g.get<int64_t>() != kNvfp4GroupSize)
    fail("{}: {}group_size {} is not supported: NVFP4 uses blocks of {}", file, where,
         g.get<int64_t>(), kNvfp4GroupSize);
  return kNvfp4GroupSize;
}

std::string producer_of(const json& root) {
  if (!root.contains("producer")) return "";
  const json& p = root["producer"];
  if (p.is_string()) return p.get<std::string>();
  if (!p.is_object()) return "";
  std::string s;
  for (const char* key : {"name", "version"})
    if (p.contains(key) && p[key].is_string())
      s += (s.empty() ? "" : " ") + p[key].get<std::string>();
  return s;
}

// The {"quant_algo", "kv_cache_quant_algo", "group_size", "exclude_modules"} object of
// hf_quant_config.json; `where` is its path for messages ("quantization.").
QuantConfig parse_modelopt_section(const json& q, std::string_view file, std::string_view where) {
  if (!q.is_object())
    fail("{}: {} is a JSON {}, not an object", file, std::string(where.substr(0, where.size() - 1)),
         json_type_name(q));
  QuantConfig cfg;
  const auto algo = opt_string(q, "quant_algo", file, where);
  if (!algo || algo->empty()) fail("{}: {}quant_algo is missing", file, where);
  cfg.algo = weight_algo(*algo, file, fmt::format("{}quant_algo", where));
  if (const auto kv = opt_string(q, "kv_cache_quant_algo", file, where))
    cfg.kv_cache_algo = kv_algo(*kv, file, fmt::format("{}kv_cache_quant_algo", where));
  cfg.group_size = group_size_for(cfg.algo, q, file, where);
  cfg.exclude_modules = exclude_list(q, "exclude_modules", file, where);
  cfg.source = std::string(file);
  return cfg;
}

Parsed parse_config_json_section(const json& qc, std::string_view file) {
  constexpr std::string_view where = "quantization_config.";
  if (!qc.is_object())
    fail("{}: quantization_config is a JSON {}, not an object", file, json_type_name(qc));
  const auto method = opt_string(qc, "quant_method", file, where);
  if (!method) fail("{}: quantization_config has no quant_method", file);
  std::string lower = *method;
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("modelopt", 0) != 0)
    fail(
        "{}: quantization_config.quant_method {} is not supported: strata reads ModelOpt "
        "(\"modelopt\") FP8 and NVFP4 checkpoints",
        file, quote_name(*method));

  Parsed out;
  if (qc.contains("quantization")) {
    out.cfg = parse_modelopt_section(qc["quantization"], file, "quantization_config.quantization.");
    out.cfg.producer = producer_of(qc);
    return out;
  }
  const auto algo = opt_string(qc, "quant_algo", file, where);
  if (!algo || algo->empty()) {
    out.algo_given = false;
    out.cfg.source = std::string(file);
    return out;
  }
  QuantConfig& cfg = out.cfg;
  cfg.algo = weight_algo(*algo, file, "quantization_config.quant_algo");
  if (const auto kv = opt_string(qc, "kv_cache_quant_algo", file, where)) {
    cfg.kv_cache_algo = kv_algo(*kv, file, "quantization_config.kv_cache_quant_algo");
  } else if (qc.contains("kv_cache_scheme") && !qc["kv_cache_scheme"].is_null()) {
    // compressed-tensors spelling: {"type": "float", "num_bits": 8} is FP8
    const json& s = qc["kv_cache_scheme"];
    const bool fp8 =
        s.is_object() && s.value("type", json()) == "float" && s.value("num_bits", json()) == 8;
    if (!fp8)
      fail(
          "{}: quantization_config.kv_cache_scheme {} is not supported: the KV cache is FP8 "
          "({{\"type\": \"float\", \"num_bits\": 8}}) or unquantized",
          file,
          s.is_object() || s.is_array() ? "(" + std::string(json_type_name(s)) + ")" : s.dump());
    cfg.kv_cache_algo = QuantAlgo::FP8;
  }
  cfg.group_size = group_size_for(cfg.algo, qc, file, where);
  cfg.exclude_modules = qc.contains("exclude_modules")
                            ? exclude_list(qc, "exclude_modules", file, where)
                            : exclude_list(qc, "ignore", file, where);
  cfg.producer = producer_of(qc);
  cfg.source = std::string(file);
  return out;
}

}  // namespace

std::string_view quant_algo_name(QuantAlgo a) {
  switch (a) {
    case QuantAlgo::None:
      return "none";
    case QuantAlgo::FP8:
      return "FP8";
    case QuantAlgo::NVFP4:
      return "NVFP4";
  }
  return "?";
}

bool QuantConfig::is_excluded(std::string_view module) const {
  for (const auto& pat : exclude_modules) {
    if (module == pat) return true;
    if (module.find(pat) != std::string_view::npos) return true;
    // vLLM rewrites "x*" (no dot before the star) as "x" and "x.*" before matching.
    if (pat.size() >= 2 && pat.back() == '*' && pat[pat.size() - 2] != '.' &&
        module.find(std::string_view(pat).substr(0, pat.size() - 1)) != std::string_view::npos)
      return true;
    if (glob_match(pat, module)) return true;
  }
  return false;
}

std::string QuantConfig::describe() const {
  if (algo == QuantAlgo::None && kv_cache_algo == QuantAlgo::None) return "unquantized";
  std::string s(quant_algo_name(algo));
  if (group_size) s += fmt::format(" (group {})", group_size);
  s += fmt::format(", KV cache {}", kv_cache_algo == QuantAlgo::None
                                        ? "unquantized"
                                        : quant_algo_name(kv_cache_algo));
  s += fmt::format(", {} excluded pattern(s)", exclude_modules.size());
  if (!source.empty()) s += ", from " + source;
  if (!producer.empty()) s += " (" + producer + ")";
  return s;
}

QuantConfig parse_hf_quant_config(std::string_view json_text, std::string_view file) {
  const json root = parse_json_strict(json_text, file, kConfigMaxDepth);
  if (!root.is_object()) fail("{}: is a JSON {}, not an object", file, json_type_name(root));
  if (!root.contains("quantization")) fail("{}: has no \"quantization\" object", file);
  QuantConfig cfg = parse_modelopt_section(root["quantization"], file, "quantization.");
  cfg.producer = producer_of(root);
  return cfg;
}

QuantConfig parse_quantization_config(const json& qc, std::string_view file) {
  Parsed p = parse_config_json_section(qc, file);
  if (!p.algo_given)
    fail(
        "{}: quantization_config names no quant_algo (ModelOpt keeps it in hf_quant_config.json; "
        "load the directory instead)",
        file);
  return std::move(p.cfg);
}

QuantConfig load_quant_config(const std::string& dir) {
  namespace fs = std::filesystem;
  const std::string config_path = (fs::path(dir) / "config.json").string();
  const std::string hf_path = (fs::path(dir) / "hf_quant_config.json").string();
  std::error_code ec;

  std::optional<Parsed> from_config;
  if (fs::is_regular_file(config_path, ec)) {
    const json root = parse_json_strict(
        read_text_file(config_path, "model config", kConfigMaxBytes), config_path, kConfigMaxDepth);
    if (root.is_object() && root.contains("quantization_config") &&
        !root["quantization_config"].is_null())
      from_config = parse_config_json_section(root["quantization_config"], config_path);
  }
  std::optional<QuantConfig> from_hf;
  if (fs::is_regular_file(hf_path, ec))
    from_hf = parse_hf_quant_config(read_text_file(hf_path, "quantization config", kConfigMaxBytes),
                                    hf_path);

  if (from_config && from_config->algo_given) {
    const QuantConfig& a = from_config->cfg;
    if (from_hf && (from_hf->algo != a.algo || from_hf->kv_cache_algo != a.kv_cache_algo))
      fail("{} and {} disagree: quant_algo {} vs {}, KV cache {} vs {}", config_path, hf_path,
           quant_algo_name(a.algo), quant_algo_name(from_hf->algo),
           quant_algo_name(a.kv_cache_algo), quant_algo_name(from_hf->kv_cache_algo));
    return a;
  }
  if (from_hf) return *from_hf;
  if (from_config)
    fail(
        "{}: quantization_config says quant_method \"modelopt\" but names no quant_algo, and "
        "there is no {}",
        config_path, hf_path);
  return QuantConfig{};
}

}  // namespace strata::io
