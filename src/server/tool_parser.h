// Tool calls parsed out of a chat completion's content, as vLLM's tool parsers do:
// - "nemotron_json" (Nemotron-Nano-v2's template):
//     <TOOLCALL>[{"name": "f", "arguments": {...}}, ...]</TOOLCALL>
// - "qwen3_coder" (Nemotron-3-Nano's template; vLLM serves it with this parser):
//     <tool_call>\n<function=f>\n<parameter=k>\nvalue\n</parameter>\n</function>\n</tool_call>
// Text outside the markers stays content. A block that does not parse leaves the whole text as
// content (vLLM's behaviour on malformed output); an unclosed block at the end is parsed as if
// closed. Streaming: content streams as it comes, and each call as vLLM streams it: its id and
// name once known, then pieces of its arguments (nemotron_json: as they are generated;
// qwen3_coder: one piece per parameter once its value has ended, then the closing brace). A
// block that turns out malformed after a call was streamed cannot be taken back: it is dropped.
// The concatenated pieces equal the non-streamed arguments.
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

// Streams the calls of one open block: its text in (in pieces), call deltas out. `complete`:
// the block has ended (its closing marker or the end of the output): finish any open call.
class BlockStreamer {
 public:
  virtual ~BlockStreamer() = default;
  virtual std::vector<ToolCallDelta> push(std::string_view text, bool complete) = 0;
  virtual int32_t calls() const = 0;  // calls whose header went out
};

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
  // The streamer of one block (made when a block opens).
  virtual std::unique_ptr<BlockStreamer> make_streamer() const = 0;

 private:
  ToolStreamDelta drain(bool final);
  std::string open_, close_;
  std::string buffer_;
  bool in_call_ = false;
  int32_t calls_emitted_ = 0;
  std::unique_ptr<BlockStreamer> streamer_;  // the open block's scanner
  size_t fed_ = 0;                             // bytes of the open block fed to it
  int32_t block_base_ = 0;                     // calls before the open block
};

}  // namespace strata::server
