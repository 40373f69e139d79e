// Tool calls parsed out of a chat completion's content, as vLLM's tool parsers do:
// - "nemotron_json" (Nemotron-Nano-v2's template):
//     <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>
// - "qwen3_coder" (Nemotron-3-Nano's template; vLLM serves it with this parser):
//     <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n</function>\n</tool_call>
// Text outside the markers stays content. A block that does not parse leaves the whole text as
// content (vLLM's behaviour on malformed output); an unclosed block at the end is parsed as if
// closed. Streaming: content streams as it comes. nemotron_json streams each call as vLLM does:
// its id and name once known, then pieces of its arguments as they are generated (a block that
// turns out malformed after a call was streamed cannot be taken back: it is dropped). Other
// parsers hold the text from an opening marker until its closing marker (or the end), then send
// each call as one delta (id, type, name and the full arguments).
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

// A piece of a streamed call: the first carries its id and name (header), later ones more of
// its arguments.
struct ToolCallDelta {
  int32_t index = 0;               // the call's index among the choice's calls
  std::optional<ToolCall> header;  // first delta: id and name (arguments empty)
  std::string arguments;           // a piece of the arguments
};

struct ToolStreamDelta {
  std::string content;
  std::vector<ToolCall> calls;  // complete calls, in order
  int32_t first_index = 0;      // the index of calls[0] among the completion's calls
  std::vector<ToolCallDelta> pieces;  // calls streamed piece by piece
};

class GuidedToolCalls;  // server/guided_tool_calls.h

class ToolParser {
 public:
  // Returns null for an unknown name ("nemotron_json", "qwen3_coder", "qwen3_xml" are known).
  // `tools`: the request's tools (qwen3_coder types parameter values by their schema).
  static std::unique_ptr<ToolParser> create(std::string_view name,
                                            const nlohmann::ordered_json& tools);
  static bool known(std::string_view name);
  virtual ~ToolParser();

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
  // A parser whose blocks are JSON lists of {"name", <key>} streams them piece by piece.
  virtual std::optional<std::string> streamed_arguments_key() const { return std::nullopt; }

 private:
  ToolStreamDelta drain(bool final);
  std::string open_, close_;
  std::string buffer_;
  bool in_call_ = false;
  int32_t calls_emitted_ = 0;
  std::shared_ptr<GuidedToolCalls> streamer_;  // the open block's scanner (streamed parsers)
  size_t fed_ = 0;                             // bytes of the open block fed to it
  int32_t block_base_ = 0;                     // calls before the open block
};

}  // namespace strata::server
