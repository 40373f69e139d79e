#include "server/openai_misc.h"

#include <fmt/format.h>

#include "core/check.h"
#include "server/openai_fields.h"
#include "text/chat_request.h"
#include "text/tokenizer.h"

namespace strata::server {

using detail::Fields;
using detail::ParamError;
using detail::reject;
using json = nlohmann::ordered_json;

namespace {

json parse_object(std::string_view body, const ServingContext& ctx) {
  auto parsed = parse_json_body(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) throw ParamError{*e};
  json j = std::move(std::get<json>(parsed));
  if (!j.is_object()) reject("the request body must be a JSON object");
  if (auto e = check_model(j, ctx)) throw ParamError{*e};
  if (!ctx.tokenizer) reject("the server runs without a tokenizer (--skip-tokenizer-init)");
  return j;
}

json tokenize(std::string_view body, const ServingContext& ctx) {
  const json j = parse_object(body, ctx);
  const Fields f(j);
  std::vector<int32_t> ids;
  if (f.get("messages")) {  // vLLM's chat form
    if (!ctx.chat) reject("this model has no chat template", "messages");
    if (f.get("chat_template"))
      reject("chat_template in a request is not allowed (start the server with --chat-template)",
             "chat_template");
    if (!f.get("messages")->is_array() || f.get("messages")->empty())
      reject("messages must be a non-empty list", "messages");
    text::ChatPromptRequest chat;
    std::string prompt;
    try {
      chat = text::chat_prompt_request_from_json(j);
      prompt = ctx.chat->render(chat);
    } catch (const Error& e) {
      reject(e.what(), "messages");
    }
    ids = ctx.tokenizer->encode(prompt, f.boolean("add_special_tokens").value_or(false));
  } else {  // vLLM's completion form {prompt}, or llama.cpp's {content}
    auto text = f.string("prompt");
    if (!text) text = f.string("content");
    if (!text) reject("prompt (a string) or messages is required", "prompt");
    ids = ctx.tokenizer->encode(*text, f.boolean("add_special_tokens").value_or(true));
  }
  json out = json::object();
  out["count"] = ids.size();
  out["max_model_len"] = ctx.max_model_len;
  out["tokens"] = ids;
  if (f.boolean("return_token_strs").value_or(false)) {
    json strs = json::array();
    for (int32_t id : ids)
      strs.push_back(ctx.tokenizer->id_to_token(id).value_or(""));
    out["token_strs"] = std::move(strs);
  } else {
    out["token_strs"] = nullptr;
  }
  return out;
}

json detokenize(std::string_view body, const ServingContext& ctx) {
  const json j = parse_object(body, ctx);
  const Fields f(j);
  const json* tokens = f.get("tokens");
  if (!tokens || !tokens->is_array()) reject("tokens must be a list of token ids", "tokens");
  if (tokens->size() > static_cast<size_t>(std::max<int64_t>(ctx.max_model_len, 1)) * 4)
    reject("tokens is longer than the model's context allows", "tokens");
  std::vector<int32_t> ids;
  for (const json& t : *tokens) {
    const auto id = detail::as_integer(t);
    if (!id) reject("tokens must be a list of token ids", "tokens");
    if (*id < 0 || *id >= ctx.vocab_size)
      reject(fmt::format("Token id {} is out of vocabulary (vocab size {})", *id, ctx.vocab_size),
             "tokens");
    ids.push_back(static_cast<int32_t>(*id));
  }
  const std::string text = ctx.tokenizer->decode(ids, /*skip_special_tokens=*/false);
  return {{"prompt", text}};
}

}  // namespace

JsonResult handle_tokenize(std::string_view body, const ServingContext& ctx) {
  return detail::guard_request<JsonResult>([&] { return tokenize(body, ctx); });
}

JsonResult handle_detokenize(std::string_view body, const ServingContext& ctx) {
  return detail::guard_request<JsonResult>([&] { return detokenize(body, ctx); });
}

json models_body(const ServingContext& ctx, int64_t created) {
  json permission = {{"id", random_id("modelperm-")},
                     {"object", "model_permission"},
                     {"created", created},
                     {"allow_create_engine", false},
                     {"allow_sampling", true},
                     {"allow_logprobs", true},
                     {"allow_search_indices", false},
                     {"allow_view", true},
                     {"allow_fine_tuning", false},
                     {"organization", "*"},
                     {"group", nullptr},
                     {"is_blocking", false}};
  json card = {{"id", ctx.served_model_name},
               {"object", "model"},
               {"created", created},
               {"owned_by", "strata"},
               {"root", ctx.model_root},
               {"parent", nullptr},
               {"max_model_len", ctx.max_model_len},
               {"permission", json::array({permission})}};
  return {{"object", "list"}, {"data", json::array({card})}};
}

}  // namespace strata::server
