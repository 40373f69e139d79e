// libFuzzer target: an OpenAI chat request (JSON text, as `strata chat-template` reads it on
// stdin) -> parsed request -> prompt rendered by a fixed small template with tight limits. Any
// outcome but a prompt or strata::Error is a bug. The request parsing is one function,
// strata::cli::parse_chat_request (tools/strata/chat_request.cpp): repoint here if it moves.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat_request.h"
#include "core/check.h"
#include "text/chat_template.h"

namespace {

// Touches what real templates touch: roles, string and list contents, tool calls, tools, kwargs.
constexpr const char* kTemplate =
    "{%- if tools %}{{ tools | tojson }}{% endif -%}"
    "{%- for m in messages -%}"
    "<|{{ m.role }}|>"
    "{%- if m.content is string %}{{ m.content }}"
    "{%- elif m.content is iterable %}{% for c in m.content %}{{ c.text }}{% endfor %}{% endif -%}"
    "{%- for t in m.tool_calls or [] %}{{ t.function.name }}{{ t.function.arguments | tojson }}"
    "{%- endfor %}\n"
    "{%- endfor -%}"
    "{%- if enable_thinking is defined %}{{ enable_thinking }}{% endif -%}"
    "{%- if add_generation_prompt %}<|assistant|>{% endif %}";

const strata::ChatTemplate& chat_template() {
  strata::jinja::Limits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_alloc_bytes = 16 << 20;
  static const strata::ChatTemplate t(kTemplate, limits, "fuzz template");
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const strata::ChatTemplate& t = chat_template();
  for (bool keep : {false, true}) {
    try {
      const strata::cli::ChatRequest r = strata::cli::parse_chat_request(text, keep);
      (void)t.render(r.messages, r.tools, r.add_generation_prompt, r.kwargs, "<s>", "</s>");
    } catch (const strata::Error&) {
    }
  }
  return 0;
}
