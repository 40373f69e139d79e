// The small OpenAI / vLLM endpoints, transport-independent: /tokenize (vLLM's completion form
// {prompt} and chat form {messages}, plus llama.cpp's {content}), /detokenize, /v1/models.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "server/openai_errors.h"
#include "server/openai_protocol.h"

namespace strata::server {

using JsonResult = std::variant<nlohmann::ordered_json, ApiError>;

// {count, max_model_len, tokens[, token_strs]}.
JsonResult handle_tokenize(std::string_view body, const ServingContext& ctx);
// {"prompt": text} (also "content", llama.cpp's name).
JsonResult handle_detokenize(std::string_view body, const ServingContext& ctx);
// {"object": "list", "data": [ModelCard]} with id, object, created, owned_by, root, parent,
// max_model_len, permission.
nlohmann::ordered_json models_body(const ServingContext& ctx, int64_t created);

}  // namespace strata::server
