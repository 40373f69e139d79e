#include "engine/sampling_json.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "core/check.h"

namespace strata::engine {

namespace {

// Integers only (JSON 3 or 3.0 both arrive as numbers; a fraction or a bool is refused).
int64_t as_int(const nlohmann::json& v, const std::string& where, const char* field, int64_t lo,
               int64_t hi) {
  int64_t x = 0;
  if (v.is_number_integer()) {
    x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
            ? INT64_MAX
            : v.get<int64_t>();
  } else if (v.is_number_float() && std::isfinite(v.get<double>()) &&
             std::trunc(v.get<double>()) == v.get<double>() && std::fabs(v.get<double>()) < 9e18) {
    x = static_cast<int64_t>(v.get<double>());
  } else {
    fail("{}: {} must be an integer", where, field);
  }
  if (x < lo || x > hi) fail("{}: {} must be in [{}, {}], got {}", where, field, lo, hi, x);
  return x;
}

float as_float(const nlohmann::json& v, const std::string& where, const char* field) {
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    fail("{}: {} must be a finite number", where, field);
  const double d = v.get<double>();
  if (std::fabs(d) > std::numeric_limits<float>::max())
    fail("{}: {} is out of range ({})", where, field, d);
  return static_cast<float>(d);
}

bool as_bool(const nlohmann::json& v, const std::string& where, const char* field) {
  if (!v.is_boolean()) fail("{}: {} must be true or false", where, field);
  return v.get<bool>();
}

}  // namespace

std::vector<int32_t> token_ids_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_array()) fail("{}: expected an array of token ids", where);
  std::vector<int32_t> ids;
  ids.reserve(j.size());
  for (const auto& v : j)
    ids.push_back(static_cast<int32_t>(as_int(v, where, "a token id", 0, INT32_MAX)));
  return ids;
}

SamplingParams sampling_params_from_json(const nlohmann::json& o, SamplingParams p,
                                         const std::string& where) {
  if (!o.is_object()) fail("{}: expected a JSON object", where);
  auto has = [&](const char* k) { return o.contains(k) && !o[k].is_null(); };
  if (has("temperature")) p.temperature = as_float(o["temperature"], where, "temperature");
  if (has("top_p")) p.top_p = as_float(o["top_p"], where, "top_p");
  if (has("top_k")) {
    const int64_t k = as_int(o["top_k"], where, "top_k", -1, INT32_MAX);
    p.top_k = k < 0 ? 0 : static_cast<int32_t>(k);  // vLLM: -1 (and 0) disable top-k
  }
  if (has("min_p")) p.min_p = as_float(o["min_p"], where, "min_p");
  if (has("max_tokens")) p.max_tokens = as_int(o["max_tokens"], where, "max_tokens", 1, INT32_MAX);
  if (has("min_tokens")) p.min_tokens = as_int(o["min_tokens"], where, "min_tokens", 0, INT32_MAX);
  if (has("seed"))
    p.seed = static_cast<uint64_t>(as_int(o["seed"], where, "seed", INT64_MIN, INT64_MAX));
  if (has("n")) p.n = static_cast<int32_t>(as_int(o["n"], where, "n", 1, 128));
  if (has("stop")) {
    const auto& s = o["stop"];
    p.stop.clear();
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      for (const auto& x : s) {
        if (!x.is_string()) fail("{}: stop must be a string or a list of strings", where);
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      fail("{}: stop must be a string or a list of strings", where);
    }
  }
  if (has("stop_token_ids")) p.stop_token_ids = token_ids_from_json(o["stop_token_ids"], where + ": stop_token_ids");
  if (has("ignore_eos")) p.ignore_eos = as_bool(o["ignore_eos"], where, "ignore_eos");
  if (has("presence_penalty"))
    p.presence_penalty = as_float(o["presence_penalty"], where, "presence_penalty");
  if (has("frequency_penalty"))
    p.frequency_penalty = as_float(o["frequency_penalty"], where, "frequency_penalty");
  if (has("repetition_penalty"))
    p.repetition_penalty = as_float(o["repetition_penalty"], where, "repetition_penalty");
  if (has("logit_bias")) {
    const auto& b = o["logit_bias"];
    if (!b.is_object()) fail("{}: logit_bias must be an object of token id -> bias", where);
    p.logit_bias.clear();
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& key = it.key();
      int64_t id = -1;
      const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (ec != std::errc() || end != key.data() + key.size() || id < 0 || id > INT32_MAX)
        fail("{}: logit_bias key {:?} is not a token id", where, key);
      p.logit_bias.emplace_back(static_cast<int32_t>(id), as_float(it.value(), where, "a logit_bias value"));
    }
  }
  if (has("logprobs")) p.logprobs = static_cast<int32_t>(as_int(o["logprobs"], where, "logprobs", 0, 1000));
  if (has("include_stop_str_in_output"))
    p.include_stop_str_in_output =
        as_bool(o["include_stop_str_in_output"], where, "include_stop_str_in_output");
  if (has("skip_special_tokens"))
    p.skip_special_tokens = as_bool(o["skip_special_tokens"], where, "skip_special_tokens");
  return p;
}

}  // namespace strata::engine
