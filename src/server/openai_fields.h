// Typed reads of request fields for the protocol layer (internal to src/server/openai_*.cpp).
// A field that is absent or null reads as nullopt; a field of the wrong type or out of range
// throws ParamError, which the parse functions turn into the 400 they return (nothing escapes).
#pragma once

#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "engine/sampling_params.h"
#include "server/openai_errors.h"
#include "server/openai_protocol.h"

namespace strata::server::detail {

using json = nlohmann::ordered_json;

struct ParamError {
  ApiError error;
};

// Runs a request parser: a ParamError is its own 4xx, a strata::Error or a JSON error a 400, and
// nothing else escapes (out of memory or an unexpected exception become a 500 naming it).
template <class Result, class Fn>
Result guard_request(Fn&& fn) {
  try {
    return fn();
  } catch (const ParamError& e) {
    return e.error;
  } catch (const Error& e) {
    return bad_request(e.what());
  } catch (const nlohmann::json::exception& e) {
    return bad_request(std::string("invalid request: ") + e.what());
  } catch (const std::bad_alloc&) {
    return internal_error("out of memory while parsing the request");
  } catch (const std::exception& e) {
    return internal_error(std::string("unexpected error while parsing the request: ") + e.what());
  }
}
[[noreturn]] void reject(std::string message, std::string param = {});

class Fields {
 public:
  explicit Fields(const json& object) : obj_(object) {}
  // Present and not null.
  const json* get(const char* name) const;
  std::optional<bool> boolean(const char* name) const;
  // An integer (an integral float such as 2.0 is accepted, as pydantic does) in [lo, hi].
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) const;
  // A finite number in [lo, hi].
  std::optional<double> number(const char* name, double lo, double hi) const;
  std::optional<std::string> string(const char* name) const;

 private:
  const json& obj_;
};

// An integer value of a JSON element, or nullopt when it is not one.
std::optional<int64_t> as_integer(const json& v);

// The sampling fields both endpoints share (vLLM's SamplingParams names, ranges and messages),
// with the server's generation_config defaults under the request's values. Sets out.max_tokens
// only when the request gives it (`*requested_max_tokens`); the caller resolves the default
// against the prompt length.
void parse_sampling(const Fields& f, Endpoint endpoint, const ServingContext& ctx,
                    engine::SamplingParams& out, std::optional<int64_t>* requested_max_tokens);

// stream / stream_options / n / return_token_ids / request_id into the plan, and the fields
// strata refuses (echo, suffix, best_of > 1, beam search, prompt_logprobs, guided decoding,
// response_format other than text, priority, ...).
void parse_common_plan(const Fields& f, const ServingContext& ctx, ResponsePlan& plan);

// max_tokens against the context (vLLM's _validate_input and get_max_tokens): a prompt of
// max_model_len tokens or more, or prompt + max_tokens beyond it, is a 400.
int64_t resolve_max_tokens(int64_t prompt_len, std::optional<int64_t> requested,
                           std::optional<int64_t> endpoint_default, const ServingContext& ctx);

// Token ids of a prompt: in [0, vocab_size).
void check_token_ids(const std::vector<int32_t>& ids, const ServingContext& ctx, const char* param);

}  // namespace strata::server::detail
