#include "text/generation_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "core/check.h"
#include "io/bounded_file.h"
#include "io/json_strict.h"
#include "text/tokenizer.h"

namespace strata::text {
namespace {

nlohmann::json read_json(const std::filesystem::path& path) {
  nlohmann::json j = io::parse_json_file(path.string(), "generation config", io::kConfigMaxBytes);
  if (!j.is_object()) fail("{}: expected a JSON object at the top level", path.string());
  return j;
}

int32_t token_id(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX)
    fail("{}: expected a non-negative token id, found {}", where, v.dump());
  return static_cast<int32_t>(v.get<int64_t>());
}

// "eos_token_id": 2, [2, 11], or null.
std::vector<int32_t> id_list(const nlohmann::json& j, const char* key, const std::string& source) {
  std::vector<int32_t> out;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return out;
  const std::string where = fmt::format("{}: {}", source, key);
  if (it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i)
      out.push_back(token_id((*it)[i], fmt::format("{}[{}]", where, i)));
  } else {
    out.push_back(token_id(*it, where));
  }
  return out;
}

std::optional<int32_t> optional_id(const nlohmann::json& j, const char* key,
                                   const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  return token_id(*it, fmt::format("{}: {}", source, key));
}

template <class T>
std::optional<T> optional_number(const nlohmann::json& j, const char* key,
                                 const std::string& source) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean())
      fail("{}: {}: expected true or false, found {}", source, key, it->dump());
  } else if constexpr (std::is_integral_v<T>) {
    if (!it->is_number_integer())
      fail("{}: {}: expected an integer, found {}", source, key, it->dump());
  } else {
    if (!it->is_number()) fail("{}: {}: expected a number, found {}", source, key, it->dump());
  }
  return it->get<T>();
}

}  // namespace

GenerationConfig GenerationConfig::from_file(const std::filesystem::path& path) {
  const nlohmann::json j = read_json(path);
  const std::string source = path.string();
  GenerationConfig g;
  g.bos_token_id = optional_id(j, "bos_token_id", source);
  g.eos_token_ids = id_list(j, "eos_token_id", source);
  g.pad_token_id = optional_id(j, "pad_token_id", source);
  g.do_sample = optional_number<bool>(j, "do_sample", source);
  g.temperature = optional_number<float>(j, "temperature", source);
  g.top_p = optional_number<float>(j, "top_p", source);
  g.top_k = optional_number<int32_t>(j, "top_k", source);
  g.repetition_penalty = optional_number<float>(j, "repetition_penalty", source);
  g.max_new_tokens = optional_number<int32_t>(j, "max_new_tokens", source);
  if (g.temperature && *g.temperature < 0)
    fail("{}: temperature: must be >= 0, found {}", source, *g.temperature);
  if (g.top_p && (*g.top_p <= 0 || *g.top_p > 1))
    fail("{}: top_p: must be in (0, 1], found {}", source, *g.top_p);
  return g;
}

GenerationConfig GenerationConfig::from_dir(const std::filesystem::path& model_dir) {
  const auto path = model_dir / "generation_config.json";
  if (!std::filesystem::exists(path)) return {};
  return from_file(path);
}

std::vector<int32_t> stop_token_ids(const std::filesystem::path& model_dir,
                                    const Tokenizer* tokenizer, bool chat) {
  std::vector<int32_t> ids = GenerationConfig::from_dir(model_dir).eos_token_ids;
  const auto config = model_dir / "config.json";
  if (std::filesystem::exists(config)) {
    const std::vector<int32_t> more = id_list(read_json(config), "eos_token_id", config.string());
    ids.insert(ids.end(), more.begin(), more.end());
  }
  if (tokenizer) {
    if (const auto eos = tokenizer->eos_token_id()) ids.push_back(*eos);
    // A chat turn ends with <|im_end|> whatever the configs list (spec: Nemotron-H chat).
    if (chat) {
      if (const auto im_end = tokenizer->token_to_id("<|im_end|>")) ids.push_back(*im_end);
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace strata::text
