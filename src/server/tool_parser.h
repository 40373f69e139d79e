// Tool calls parsed out of a chat completion's content, as vLLM's tool parsers do:
// - "nemotron_json" (Nemotron-Nano-v2's template):
//     <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>
// - "qwen3_coder" (Nemotron-3-Nano's template; vLLM serves it with this parser):
//     <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n</function>\n</tool_call>
// Text outside the markers stays content. A block that does not parse leaves the whole text as
// content (vLLM's behaviour on malformed output); an unclosed block at the end is parsed as if
// closed. Streaming: content streams as it comes; the
// text from an opening marker is held until its closing marker (or the end), then each call is
// sent as one delta (id, type, name and the full arguments), which OpenAI clients accumulate.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace strata::server {

struct ToolCall {
  std::string id;  // "chatcmpl-tool-<hex>"
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
  // Returns null for an unknown name ("nemotron_json", "qwen3_coder", "qwen3_xml" are known).
  // `tools`: the request's tools (qwen3_coder types parameter values by their schema).
  static std::unique_ptr<ToolParser> create(std::string_view name,
                                            const nlohmann::ordered_json& tools);
  static bool known(std::string_view name);
  virtual ~ToolParser() = default;

  // The whole content at once (non-streaming).
  ToolParseResult parse(std::string_view text) const;
  // Streaming: content deltas in, content and complete calls out.
  ToolStreamDelta push(std::string_view delta);
  ToolStreamDelta finish();
  int32_t calls_emitted() const { return calls_emitted_; }

 protected:
  ToolParser(std::string open, std::string close)
      : open_(std::move(open)), close_(std::move(close)) {}
  // The calls in the text between one pair of markers; nullopt when it does not parse.
  virtual std::optional<std::vector<ToolCall>> parse_block(std::string_view inner) const = 0;

 private:
  ToolStreamDelta drain(bool final);
  std::string open_, close_;
  std::string buffer_;
  bool in_call_ = false;
  int32_t calls_emitted_ = 0;
};

}  // namespace strata::server
