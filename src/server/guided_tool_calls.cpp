#include "server/guided_tool_calls.h"

#include <nlohmann/json.hpp>

#include "server/openai_protocol.h"

namespace strata::server {

namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}

}  // namespace

GuidedToolCalls::GuidedToolCalls(std::optional<std::string> named, std::string args_key)
    : named_(std::move(named)), args_key_(std::move(args_key)) {}

std::vector<ToolCallDelta> GuidedToolCalls::push(std::string_view text) {
  std::vector<ToolCallDelta> out;
  if (named_) {
    if (text.empty() && named_started_) return out;
    ToolCallDelta d;
    if (!named_started_) {
      d.header = ToolCall{random_id("chatcmpl-tool-"), *named_, ""};
      named_started_ = true;
      calls_ = 1;
    }
    d.arguments = std::string(text);
    out.push_back(std::move(d));
    return out;
  }
  for (char c : text)
    scan(c, out);
  flush_arguments(out);
  return out;
}

void GuidedToolCalls::begin_call(std::string name, std::vector<ToolCallDelta>& out) {
  ToolCallDelta d;
  d.index = calls_++;
  d.header = ToolCall{random_id("chatcmpl-tool-"), std::move(name), ""};
  out.push_back(std::move(d));
  element_call_begun_ = true;
}

void GuidedToolCalls::flush_arguments(std::vector<ToolCallDelta>& out) {
  if (!element_call_begun_ || args_pending_.empty()) return;
  // One delta per call and push: pieces join the delta already made for this call.
  if (out.empty() || out.back().index != calls_ - 1) {
    ToolCallDelta d;
    d.index = calls_ - 1;
    out.push_back(std::move(d));
  }
  out.back().arguments += args_pending_;
  args_pending_.clear();
}

void GuidedToolCalls::scan(char c, std::vector<ToolCallDelta>& out) {
  if (depth_ == 0 && c == '{') scan('[', out);  // one bare call: as a list of one
  if (in_string_) {
    if (in_params_ && args_string_ && depth_ == params_depth_) {
      args_raw_.push_back(c);
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        // Arguments given as a JSON string: their decoded text.
        in_string_ = in_params_ = args_string_ = false;
        after_colon_ = false;
        const auto v = nlohmann::json::parse(args_raw_, nullptr, false);
        if (v.is_string()) args_pending_ += v.get<std::string>();
      }
      return;
    }
    if (in_params_) args_pending_.push_back(c);
    if (escape_) {
      escape_ = false;
      string_.push_back(c);
    } else if (c == '\\') {
      escape_ = true;
      string_.push_back(c);
    } else if (c != '"') {
      string_.push_back(c);
    } else {
      in_string_ = false;
      if (in_params_) return;
      if (in_name_) {
        in_name_ = false;
        after_colon_ = false;
        const auto v = nlohmann::json::parse("\"" + string_ + "\"", nullptr, false);
        if (v.is_string() && !element_call_begun_) {
          name_ = v.get<std::string>();
          begin_call(*name_, out);
          flush_arguments(out);
        }
      } else if (depth_ == 2 && !after_colon_) {
        key_ = string_;
      }
    }
    return;
  }
  if (!in_params_ && depth_ == 2 && after_colon_ && key_ == args_key_ && !is_ws(c)) {
    in_params_ = true;
    params_depth_ = depth_;
    args_seen_ = true;
    if (c == '"') {
      args_string_ = true;
      args_raw_.assign(1, c);
      in_string_ = true;
      return;
    }
  }
  if (in_params_) {
    const bool closer = c == '}' || c == ']';
    const bool ends_scalar = c == ',' && depth_ == params_depth_;
    if ((closer && depth_ - 1 < params_depth_) || ends_scalar) {
      in_params_ = false;  // the byte belongs to the element: handled below
      after_colon_ = false;
    } else {
      args_pending_.push_back(c);
      if (c == '"') {
        in_string_ = true;
        string_.clear();
      } else if (c == '{' || c == '[') {
        ++depth_;
      } else if (closer && --depth_ == params_depth_) {
        in_params_ = false;
        after_colon_ = false;
      }
      return;
    }
  }
  switch (c) {
    case '"':
      in_string_ = true;
      string_.clear();
      in_name_ = depth_ == 2 && after_colon_ && key_ == "name";
      return;
    case ':':
      if (depth_ == 2) after_colon_ = true;
      return;
    case ',':
      if (depth_ == 2) {
        after_colon_ = false;
        key_.clear();
      }
      return;
    case '{':
    case '[':
      if (++depth_ == 2) {  // a new element
        name_.reset();
        args_pending_.clear();
        args_seen_ = false;
        element_call_begun_ = false;
        key_.clear();
        after_colon_ = false;
      }
      return;
    case '}':
    case ']':
      if (depth_-- == 2) {  // the element ends: what it holds goes out now
        if (element_call_begun_ && !args_seen_) args_pending_ = "{}";
        flush_arguments(out);
      }
      return;
    default:
      return;
  }
}

std::vector<ToolCall> GuidedToolCalls::parse(std::optional<std::string> named,
                                             std::string_view text, std::string args_key) {
  GuidedToolCalls g(std::move(named), std::move(args_key));
  std::vector<ToolCall> calls;
  for (ToolCallDelta& d : g.push(text)) {
    if (d.header) calls.push_back(std::move(*d.header));
    if (d.index < static_cast<int32_t>(calls.size()))
      calls[static_cast<size_t>(d.index)].arguments += d.arguments;
  }
  return calls;
}

}  // namespace strata::server
