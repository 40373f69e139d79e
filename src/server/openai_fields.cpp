#include "server/openai_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace strata::server::detail {

void reject(std::string message, std::string param) {
  throw ParamError{bad_request(std::move(message), std::move(param))};
}

namespace {

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::array:
      return "a list";
    case json::value_t::object:
      return "an object";
    default:
      return "null";
  }
}

}  // namespace

std::optional<int64_t> as_integer(const json& v) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

const json* Fields::get(const char* name) const {
  auto it = obj_.find(name);
  if (it == obj_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<bool> Fields::boolean(const char* name) const {
  const json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean())
    reject(fmt::format("{} must be a boolean, got {}", name, type_name(*v)), name);
  return v->get<bool>();
}

std::optional<int64_t> Fields::integer(const char* name, int64_t lo, int64_t hi) const {
  const json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    reject(fmt::format("{} must be an integer, got {}", name, type_name(*v)), name);
  const auto i = as_integer(*v);
  if (!i) reject(fmt::format("{} must be an integer in [{}, {}]", name, lo, hi), name);
  if (*i < lo || *i > hi)
    reject(fmt::format("{} must be in [{}, {}], got {}", name, lo, hi, *i), name);
  return i;
}

std::optional<double> Fields::number(const char* name, double lo, double hi) const {
  const json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number())
    reject(fmt::format("{} must be a number, got {}", name, type_name(*v)), name);
  const double d = v->get<double>();
  if (!std::isfinite(d)) reject(fmt::format("{} must be a finite number", name), name);
  if (d < lo || d > hi)
    reject(fmt::format("{} must be in [{}, {}], got {}", name, lo, hi, d), name);
  return d;
}

std::optional<std::string> Fields::string(const char* name) const {
  const json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_string())
    reject(fmt::format("{} must be a string, got {}", name, type_name(*v)), name);
  return v->get<std::string>();
}

namespace {

constexpr double kHuge = 3.4e38;          // float range: larger values are refused, not wrapped
constexpr float kMinTemperature = 0.01f;  // vLLM raises (0, 0.01) to 0.01

std::vector<std::string> parse_stop(const Fields& f, const ServingContext& ctx) {
  const json* v = f.get("stop");
  std::vector<std::string> stops;
  if (!v) return stops;
  if (v->is_string()) {
    stops.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > ctx.max_stop_strings)
      reject(
          fmt::format("stop may hold at most {} strings, got {}", ctx.max_stop_strings, v->size()),
          "stop");
    for (const json& s : *v) {
      if (!s.is_string()) reject("stop must be a string or a list of strings", "stop");
      stops.push_back(s.get<std::string>());
    }
  } else {
    reject("stop must be a string or a list of strings", "stop");
  }
  for (const std::string& s : stops) {
    if (s.empty()) reject("stop strings must not be empty", "stop");
    if (s.size() > ctx.max_stop_bytes)
      reject(fmt::format("a stop string may be at most {} bytes", ctx.max_stop_bytes), "stop");
  }
  return stops;
}

std::vector<int32_t> parse_id_list(const Fields& f, const char* name, const ServingContext& ctx) {
  const json* v = f.get(name);
  std::vector<int32_t> ids;
  if (!v) return ids;
  if (!v->is_array()) reject(fmt::format("{} must be a list of token ids", name), name);
  if (v->size() > 4096) reject(fmt::format("{} may hold at most 4096 ids", name), name);
  for (const json& x : *v) {
    const auto i = as_integer(x);
    if (!i) reject(fmt::format("{} must be a list of token ids", name), name);
    if (*i < 0 || *i >= ctx.vocab_size)
      reject(fmt::format("{}: token id {} is out of vocabulary (vocab size {})", name, *i,
                         ctx.vocab_size),
             name);
    ids.push_back(static_cast<int32_t>(*i));
  }
  return ids;
}

std::vector<std::pair<int32_t, float>> parse_logit_bias(const Fields& f,
                                                        const ServingContext& ctx) {
  const json* v = f.get("logit_bias");
  std::vector<std::pair<int32_t, float>> out;
  if (!v) return out;
  if (!v->is_object()) reject("logit_bias must be an object of token id -> bias", "logit_bias");
  if (v->size() > ctx.max_logit_bias)
    reject(fmt::format("logit_bias may hold at most {} entries", ctx.max_logit_bias), "logit_bias");
  for (const auto& [key, bias] : v->items()) {
    int64_t id = -1;
    size_t used = 0;
    try {
      id = std::stoll(key, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != key.size())
      reject("logit_bias keys must be token ids, got \"" + key.substr(0, 32) + "\"", "logit_bias");
    if (id < 0 || id >= ctx.vocab_size)
      reject(fmt::format("logit_bias: token id {} is out of vocabulary (vocab size {})", id,
                         ctx.vocab_size),
             "logit_bias");
    if (!bias.is_number() || !std::isfinite(bias.get<double>()))
      reject("logit_bias values must be finite numbers", "logit_bias");
    // OpenAI's range; vLLM clamps to it.
    const double b = std::clamp(bias.get<double>(), -100.0, 100.0);
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return out;
}

}  // namespace

void parse_sampling(const Fields& f, Endpoint endpoint, const ServingContext& ctx,
                    engine::SamplingParams& out, std::optional<int64_t>* requested_max_tokens) {
  const text::GenerationConfig& g = ctx.generation_defaults;
  if (g.temperature) out.temperature = *g.temperature;
  if (g.top_p) out.top_p = *g.top_p;
  if (g.top_k) out.top_k = *g.top_k > 0 ? *g.top_k : 0;
  if (g.repetition_penalty) out.repetition_penalty = *g.repetition_penalty;

  if (auto t = f.number("temperature", 0.0, kHuge)) {
    out.temperature = static_cast<float>(*t);
    if (out.temperature > 0.f && out.temperature < kMinTemperature)
      out.temperature = kMinTemperature;
  }
  if (auto v = f.number("top_p", 0.0, 1.0)) {
    if (*v <= 0.0) reject(fmt::format("top_p must be in (0, 1], got {}", *v), "top_p");
    out.top_p = static_cast<float>(*v);
  }
  if (auto v = f.integer("top_k", -1, std::numeric_limits<int32_t>::max()))
    out.top_k = *v <= 0 ? 0 : static_cast<int32_t>(*v);
  if (auto v = f.number("min_p", 0.0, 1.0)) out.min_p = static_cast<float>(*v);
  if (auto v = f.number("presence_penalty", -2.0, 2.0))
    out.presence_penalty = static_cast<float>(*v);
  if (auto v = f.number("frequency_penalty", -2.0, 2.0))
    out.frequency_penalty = static_cast<float>(*v);
  if (auto v = f.number("repetition_penalty", 0.0, kHuge)) {
    if (*v <= 0.0)
      reject(fmt::format("repetition_penalty must be greater than zero, got {}", *v),
             "repetition_penalty");
    out.repetition_penalty = static_cast<float>(*v);
  }
  if (auto v = f.integer("seed", std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max()))
    out.seed = static_cast<uint64_t>(*v);

  // max_completion_tokens (chat) wins over the deprecated max_tokens.
  std::optional<int64_t> max_tokens;
  if (endpoint == Endpoint::ChatCompletions)
    max_tokens = f.integer("max_completion_tokens", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max());
  const char* max_name = max_tokens ? "max_completion_tokens" : "max_tokens";
  if (!max_tokens)
    max_tokens = f.integer("max_tokens", std::numeric_limits<int64_t>::min(),
                           std::numeric_limits<int64_t>::max());
  if (max_tokens && *max_tokens < 1)
    reject(fmt::format("{} must be at least 1, got {}", max_name, *max_tokens), max_name);
  *requested_max_tokens = max_tokens;

  if (auto v = f.integer("min_tokens", 0, std::numeric_limits<int64_t>::max())) {
    if (max_tokens && *v > *max_tokens)
      reject(fmt::format("min_tokens must be less than or equal to max_tokens={}, got {}",
                         *max_tokens, *v),
             "min_tokens");
    out.min_tokens = *v;
  }
  if (auto v = f.boolean("ignore_eos")) out.ignore_eos = *v;
  out.stop = parse_stop(f, ctx);
  out.stop_token_ids = parse_id_list(f, "stop_token_ids", ctx);
  if (auto v = f.boolean("include_stop_str_in_output")) out.include_stop_str_in_output = *v;
  if (auto v = f.boolean("skip_special_tokens")) out.skip_special_tokens = *v;
  if (auto v = f.boolean("spaces_between_special_tokens")) out.spaces_between_special_tokens = *v;
  out.logit_bias = parse_logit_bias(f, ctx);

  // Logprobs: an int for completions; a bool plus top_logprobs for chat.
  if (endpoint == Endpoint::Completions) {
    if (const json* v = f.get("logprobs");
        v && v->is_number() && as_integer(*v) && *as_integer(*v) > ctx.max_logprobs)
      reject(fmt::format("logprobs must be at most max_logprobs={}, got {}", ctx.max_logprobs,
                         *as_integer(*v)),
             "logprobs");
    if (auto v = f.integer("logprobs", 0, ctx.max_logprobs))
      out.logprobs = static_cast<int32_t>(*v);
  } else {
    const bool want = f.boolean("logprobs").value_or(false);
    const json* top = f.get("top_logprobs");
    if (top) {
      const auto k = as_integer(*top);
      if (!top->is_number() || !k) reject("top_logprobs must be an integer", "top_logprobs");
      if (*k < 0 && *k != -1)
        reject(fmt::format("top_logprobs must be a non-negative value or -1, got {}", *k),
               "top_logprobs");
      if (!want)
        reject("when using `top_logprobs`, `logprobs` must be set to true", "top_logprobs");
      if (*k == -1 || *k > ctx.max_logprobs)
        reject(fmt::format("top_logprobs must be at most max_logprobs={}, got {}", ctx.max_logprobs,
                           *k),
               "top_logprobs");
      out.logprobs = static_cast<int32_t>(*k);
    } else if (want) {
      out.logprobs = 0;
    }
  }
  if (f.get("prompt_logprobs"))
    reject("prompt_logprobs is not supported by strata", "prompt_logprobs");
  out.detokenize = ctx.tokenizer != nullptr;
}

void parse_common_plan(const Fields& f, const ServingContext& ctx, ResponsePlan& plan) {
  plan.stream = f.boolean("stream").value_or(false);
  if (const json* so = f.get("stream_options")) {
    if (!so->is_object()) reject("stream_options must be an object", "stream_options");
    if (!plan.stream)
      reject("Stream options can only be defined when `stream=True`.", "stream_options");
    const Fields sf(*so);
    plan.include_usage = sf.boolean("include_usage").value_or(true);
    plan.continuous_usage_stats = sf.boolean("continuous_usage_stats").value_or(false);
  }
  if (auto n = f.get("n")) {
    const auto v = as_integer(*n);
    if (!n->is_number() || !v) reject("n must be an integer", "n");
    if (*v < 1) reject(fmt::format("n must be at least 1, got {}", *v), "n");
    if (*v > ctx.max_n) reject(fmt::format("n must be at most {}, got {}", ctx.max_n, *v), "n");
    plan.n = static_cast<int32_t>(*v);
  }
  plan.return_token_ids = f.boolean("return_token_ids").value_or(false);
  plan.return_tokens_as_token_ids = f.boolean("return_tokens_as_token_ids").value_or(false);

  // What strata does not do: refused by name instead of silently ignored.
  if (f.boolean("echo").value_or(false)) reject("echo is not supported by strata", "echo");
  if (f.get("suffix")) reject("suffix is not currently supported", "suffix");
  if (auto b = f.integer("best_of", 0, std::numeric_limits<int64_t>::max()); b && *b > 1)
    reject("best_of is not supported by strata (use n)", "best_of");
  if (f.boolean("use_beam_search").value_or(false))
    reject("beam search is not supported by strata", "use_beam_search");
  if (f.get("prompt_embeds")) reject("prompt_embeds is not supported by strata", "prompt_embeds");
  for (const char* name :
       {"structured_outputs", "guided_json", "guided_regex", "guided_choice", "guided_grammar",
        "allowed_token_ids", "bad_words", "logits_processors"}) {
    const json* v = f.get(name);
    if (v && !(v->is_array() && v->empty()) && !(v->is_object() && v->empty()))
      reject(fmt::format("{} is not supported by strata (no guided decoding)", name), name);
  }
  if (const json* rf = f.get("response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      reject("response_format must be an object with a \"type\"", "response_format");
    const std::string type = (*rf)["type"].get<std::string>();
    if (type != "text")
      reject("response_format \"" + type.substr(0, 64) +
                 "\" is not supported by strata (no guided decoding); use \"text\"",
             "response_format");
  }
  if (auto p = f.integer("priority", std::numeric_limits<int64_t>::min(),
                         std::numeric_limits<int64_t>::max());
      p && *p != 0)
    reject("Priority scheduling is not enabled.", "priority");
}

int64_t resolve_max_tokens(int64_t prompt_len, std::optional<int64_t> requested,
                           std::optional<int64_t> endpoint_default, const ServingContext& ctx) {
  if (prompt_len >= ctx.max_model_len)
    reject(fmt::format("This model's maximum context length is {} tokens. However, your request "
                       "has {} input tokens. Please reduce the length of the input messages.",
                       ctx.max_model_len, prompt_len),
           "input_tokens");
  const int64_t room = ctx.max_model_len - prompt_len;
  const std::optional<int64_t> asked = requested ? requested : endpoint_default;
  if (asked && *asked > room)
    reject(
        fmt::format("'max_tokens' or 'max_completion_tokens' is too large: {}. This model's "
                    "maximum context length is {} tokens and your request has {} input "
                    "tokens ({} > {} - {}).",
                    *asked, ctx.max_model_len, prompt_len, *asked, ctx.max_model_len, prompt_len),
        "max_tokens");
  int64_t max_tokens = asked.value_or(room);
  if (!requested && ctx.generation_defaults.max_new_tokens &&
      *ctx.generation_defaults.max_new_tokens > 0)
    max_tokens = std::min<int64_t>(max_tokens, *ctx.generation_defaults.max_new_tokens);
  return max_tokens;
}

void check_token_ids(const std::vector<int32_t>& ids, const ServingContext& ctx,
                     const char* param) {
  for (int32_t id : ids)
    if (id < 0 || id >= ctx.vocab_size)
      reject(fmt::format("Token id {} is out of vocabulary (vocab size {})", id, ctx.vocab_size),
             param);
}

}  // namespace strata::server::detail
