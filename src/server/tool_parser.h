// Tool calls parsed out of a chat completion's content, as vLLM's tool parsers do:
// - "nemotron_json" (Nemotron-Nano-v2's template):
//     <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>
// - "qwen3_coder" (Nemotron-3-Nano's template; vLLM serves it with this parser):
//     <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n</function>\n</tool_call>
// Text outside the markers stays content. A call that does not parse leaves the whole text as
// content (vLLM's behaviour on malformed output). Streaming: content streams as it comes; the
// text from an opening marker is held until its closing marker (or the end), then each call is
// sent as one delta (id, type, name and the full arguments), which OpenAI clients accumulate.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::server {

struct ToolCall {
  std::string id;         // "chatcmpl-tool-<hex>"
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ToolParseResult {
  std::string content;  // the text outside tool-call markers (may be empty)
  std::vector<ToolCall> calls;
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCall> calls;  // complete calls, in order
  int32_t first_index = 0;      // the index of calls[0] among the completion's calls
};

class ToolParser {
 public:
  // Returns null for an unknown name. `tools`: the request's tools (names are checked against
  // it when non-empty: a call to an unknown function is left as content).
  static std::unique_ptr<ToolParser> create(std::string_view name,
                                            const nlohmann::ordered_json& tools);
  static bool known(std::string_view name);
  virtual ~ToolParser() = default;

  // The whole content at once (non-streaming).
  virtual ToolParseResult parse(std::string_view text) const = 0;
  // Streaming: content deltas in, content and complete calls out.
  ToolStreamDelta push(std::string_view delta);
  ToolStreamDelta finish();
  int32_t calls_emitted() const { return calls_emitted_; }

 protected:
  ToolParser(std::string open, std::string close) : open_(std::move(open)), close_(std::move(close)) {}
  std::string open_, close_;

 private:
  ToolStreamDelta drain(bool final);
  std::string buffer_;
  bool in_call_ = false;
  int32_t calls_emitted_ = 0;
};

}  // namespace strata::server
