// Sampling parameters and token-id lists from JSON with vLLM's field names and types (the
// `--prompts-file` lines of `strata generate`, run-batch bodies, the server's requests).
// Fields that are absent keep the defaults given; present fields are type- and range-checked,
// and errors name `where` and the field.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace strata::engine {

// Reads temperature, top_p, top_k (-1 = off), min_p, max_tokens, min_tokens, seed, n, stop
// (string or list), stop_token_ids, ignore_eos, presence_penalty, frequency_penalty,
// repetition_penalty, logit_bias ({"id": bias}), logprobs (integer), include_stop_str_in_output,
// skip_special_tokens. Other fields are ignored.
SamplingParams sampling_params_from_json(const nlohmann::json& obj, SamplingParams defaults,
                                         const std::string& where);

// A JSON array of non-negative 32-bit integers.
std::vector<int32_t> token_ids_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace strata::engine
