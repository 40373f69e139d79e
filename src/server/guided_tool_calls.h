// Tool calls out of a guided (grammar-constrained) chat completion, as vLLM returns them:
// - a named tool_choice: the whole output is the function's arguments (one call);
// - tool_choice "required": the output is [{"name": N, "parameters": {...}}, ...], one call per
//   element, its arguments the raw text of "parameters".
// Streaming follows vLLM: a call's first delta carries its id, type and name, later deltas
// carry pieces of its arguments as they are generated. The non-streamed calls are what the
// streamed deltas concatenate to (the same scanner reads the whole text at once).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_parser.h"

namespace strata::server {

class GuidedToolCalls {
 public:
  // `named`: the function's name for a named tool_choice; nullopt for an array of calls whose
  // arguments are under `args_key` ("parameters" for "required"; "arguments" in Nemotron's
  // <TOOLCALL> blocks, which may also hold one bare object and give arguments as a JSON
  // string: its decoded text is sent once the string ends). A call without arguments gets "{}".
  explicit GuidedToolCalls(std::optional<std::string> named, std::string args_key = "parameters");
  // Streaming: the next piece of the output in, tool-call deltas out (in order).
  std::vector<ToolCallDelta> push(std::string_view text);
  // The calls of a whole output (non-streaming); a cut output gives the calls begun so far.
  static std::vector<ToolCall> parse(std::optional<std::string> named, std::string_view text,
                                     std::string args_key = "parameters");
  int32_t calls() const { return calls_; }

 private:
  void scan(char c, std::vector<ToolCallDelta>& out);
  void begin_call(std::string name, std::vector<ToolCallDelta>& out);
  void flush_arguments(std::vector<ToolCallDelta>& out);

  std::optional<std::string> named_;
  std::string args_key_;
  bool named_started_ = false;
  // "required": a scanner of the array, its strings, and each element's keys.
  int depth_ = 0;
  bool in_string_ = false, escape_ = false;
  std::string string_;               // the raw bytes of the string being read (depth 2 keys)
  std::string key_;                  // the element's current key
  bool after_colon_ = false;         // a depth-2 value is due or running
  bool in_params_ = false;           // inside the element's "parameters" value
  int params_depth_ = 0;             // depth at which the parameters value started
  bool in_name_ = false;             // inside the element's "name" string
  std::optional<std::string> name_;  // the element's name once read
  std::string args_pending_;         // arguments not sent yet (the name is not known yet)
  bool args_string_ = false;         // the arguments value is a JSON string
  std::string args_raw_;             // its raw text until it ends
  bool args_seen_ = false;           // the element has arguments
  int32_t calls_ = 0;                // calls begun
  bool element_call_begun_ = false;
};

}  // namespace strata::server
