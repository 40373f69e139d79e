#include "chat_request.h"

#include "core/check.h"
#include "io/json_strict.h"
#include "text/chat_template.h"

namespace strata::cli {

ChatRequest parse_chat_request(std::string_view json_text, bool keep_argument_strings) {
  const nlohmann::ordered_json request =
      io::parse_ordered_json_strict(json_text, "stdin: the request", io::kRequestJsonMaxDepth);
  if (!request.is_object()) fail("stdin: the request must be a JSON object");
  if (!request.contains("messages")) fail("stdin: the request has no \"messages\"");
  ChatRequest r;
  r.messages =
      keep_argument_strings ? request["messages"] : parse_tool_call_arguments(request["messages"]);
  r.tools = request.value("tools", nlohmann::ordered_json());
  r.kwargs = request.value("chat_template_kwargs", nlohmann::ordered_json());
  if (request.contains("documents") && !request["documents"].is_null()) {
    if (r.kwargs.is_null()) r.kwargs = nlohmann::ordered_json::object();
    if (r.kwargs.is_object() && !r.kwargs.contains("documents"))
      r.kwargs["documents"] = request["documents"];
  }
  if (request.contains("add_generation_prompt")) {
    if (!request["add_generation_prompt"].is_boolean())
      fail("stdin: \"add_generation_prompt\" must be true or false");
    r.add_generation_prompt = request["add_generation_prompt"].get<bool>();
  }
  return r;
}

}  // namespace strata::cli
