#include "server/tool_parser.h"

#include <algorithm>
#include <functional>
#include <optional>

#include "server/guided_tool_calls.h"
#include "server/openai_protocol.h"

namespace strata::server {

using json = nlohmann::ordered_json;

namespace {

size_t partial_suffix(std::string_view text, std::string_view marker) {
  for (size_t len = std::min(text.size(), marker.size() - 1); len > 0; --len)
    if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
  return 0;
}

std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

ToolCall make_call(std::string name, std::string arguments) {
  return ToolCall{random_id("chatcmpl-tool-"), std::move(name), std::move(arguments)};
}

// JSON text as Python's json.dumps writes it (", " and ": " separators, non-ASCII kept): the
// arguments text vLLM's qwen3_coder parser produces.
std::string python_dump(const json& j) {
  if (j.is_object()) {
    std::string s = "{";
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it != j.begin()) s += ", ";
      s += dump(json(it.key())) + ": " + python_dump(it.value());
    }
    return s + "}";
  }
  if (j.is_array()) {
    std::string s = "[";
    for (size_t i = 0; i < j.size(); ++i)
      s += (i ? ", " : "") + python_dump(j[i]);
    return s + "]";
  }
  return dump(j);
}

// Nemotron's JSON blocks through the guided-decoding scanner (arguments under "arguments").
class JsonBlockStreamer final : public BlockStreamer {
 public:
  JsonBlockStreamer() : scanner_(std::nullopt, "arguments") {}
  std::vector<ToolCallDelta> push(std::string_view text, bool) override {
    return scanner_.push(text);
  }
  int32_t calls() const override { return scanner_.calls(); }

 private:
  GuidedToolCalls scanner_;
};

// Nemotron-Nano-v2: <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>. Arguments
// are the model's own text of the value (what streaming sends piece by piece), or the decoded
// text when the model wrote them as a JSON string.
class NemotronJsonParser final : public ToolParser {
 public:
  NemotronJsonParser() : ToolParser("<TOOLCALL>", "</TOOLCALL>") {}

 protected:
  std::unique_ptr<BlockStreamer> make_streamer() const override {
    return std::make_unique<JsonBlockStreamer>();
  }
  std::optional<std::vector<ToolCall>> parse_block(std::string_view inner) const override {
    json list;
    try {
      list = json::parse(inner.begin(), inner.end());
    } catch (const json::exception&) {
      return std::nullopt;
    }
    if (list.is_object()) list = json::array({list});
    if (!list.is_array()) return std::nullopt;
    std::vector<ToolCall> calls;
    for (const json& item : list) {
      if (!item.is_object() || !item.contains("name") || !item["name"].is_string())
        return std::nullopt;
      std::string arguments = "{}";
      if (item.contains("arguments") && !item["arguments"].is_null()) {
        const json& a = item["arguments"];
        arguments = a.is_string() ? a.get<std::string>() : dump(a);
      }
      calls.push_back(make_call(item["name"].get<std::string>(), std::move(arguments)));
    }
    // The same text the streamed pieces carry (the list is valid JSON, so the scanner finds
    // every call).
    const std::vector<ToolCall> raw = GuidedToolCalls::parse(std::nullopt, inner, "arguments");
    if (raw.size() == calls.size())
      for (size_t i = 0; i < calls.size(); ++i) calls[i].arguments = raw[i].arguments;
    return calls;
  }
};

// Nemotron-3-Nano (vLLM's qwen3_coder format):
// <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>\n</tool_call>
// Values are typed by the tool's JSON schema when it names a type, else read as JSON when they
// parse, else kept as strings. A parameter ends at </parameter>, at the next <parameter= or at
// </function>; a function at </function> or the end of its block.
using TypedValue = std::function<json(const std::string& function, const std::string& key,
                                      const std::string& value)>;

class Qwen3CoderStreamer final : public BlockStreamer {
 public:
  explicit Qwen3CoderStreamer(TypedValue typed) : typed_(std::move(typed)) {}

  std::vector<ToolCallDelta> push(std::string_view text, bool complete) override {
    text_.append(text);
    std::vector<ToolCallDelta> out;
    while (true) {
      if (!in_function_) {
        const size_t fn = text_.find("<function=", at_);
        if (fn == std::string::npos) break;
        const size_t name_end = text_.find('>', fn);
        if (name_end == std::string::npos) break;
        function_ = text_.substr(fn + 10, name_end - fn - 10);
        ToolCallDelta d;
        d.index = calls_++;
        d.header = make_call(function_, "");
        out.push_back(std::move(d));
        in_function_ = true;
        params_ = 0;
        at_ = name_end + 1;
        continue;
      }
      const size_t fn_end = text_.find("</function>", at_);
      const size_t ps = text_.find("<parameter=", at_);
      if (ps != std::string::npos && (fn_end == std::string::npos || ps < fn_end)) {
        const size_t key_end = text_.find('>', ps);
        if (key_end == std::string::npos) break;
        const size_t stops[] = {text_.find("</parameter>", key_end),
                                text_.find("<parameter=", key_end), fn_end};
        size_t pe = std::string::npos;
        for (size_t e : stops) pe = std::min(pe, e);
        if (pe == std::string::npos && !complete) break;  // the value may go on
        if (pe == std::string::npos) pe = text_.size();
        std::string value = text_.substr(key_end + 1, pe - key_end - 1);
        if (value.starts_with("\n")) value.erase(0, 1);
        if (value.ends_with("\n")) value.pop_back();
        const std::string key = text_.substr(ps + 11, key_end - ps - 11);
        out.push_back(piece((params_++ == 0 ? "{" : ", ") + dump(json(key)) + ": " +
                            python_dump(typed_(function_, key, value))));
        at_ = text_.compare(pe, 12, "</parameter>") == 0 ? pe + 12 : pe;
        continue;
      }
      if (fn_end == std::string::npos && !complete) break;
      out.push_back(piece(params_ == 0 ? "{}" : "}"));
      in_function_ = false;
      at_ = fn_end == std::string::npos ? text_.size() : fn_end + 11;
      if (fn_end == std::string::npos) break;
    }
    if (complete && in_function_) {  // the block ended inside a parameter's name
      out.push_back(piece(params_ == 0 ? "{}" : "}"));
      in_function_ = false;
    }
    return out;
  }
  int32_t calls() const override { return calls_; }

 private:
  ToolCallDelta piece(std::string arguments) const {
    ToolCallDelta d;
    d.index = calls_ - 1;
    d.arguments = std::move(arguments);
    return d;
  }
  TypedValue typed_;
  std::string text_;
  size_t at_ = 0;
  bool in_function_ = false;
  std::string function_;
  int params_ = 0;
  int32_t calls_ = 0;
};

class Qwen3CoderParser final : public ToolParser {
 public:
  explicit Qwen3CoderParser(json tools)
      : ToolParser("<tool_call>", "</tool_call>"), tools_(std::move(tools)) {}

 protected:
  std::unique_ptr<BlockStreamer> make_streamer() const override {
    return std::make_unique<Qwen3CoderStreamer>(
        [this](const std::string& f, const std::string& k, const std::string& v) {
          return typed_value(f, k, v);
        });
  }
  // The calls of a whole block: the streamer's pieces joined, so streamed and non-streamed
  // arguments are the same text. A block with no complete <function=NAME> does not parse.
  std::optional<std::vector<ToolCall>> parse_block(std::string_view inner) const override {
    std::vector<ToolCall> calls;
    for (ToolCallDelta& d : make_streamer()->push(inner, true)) {
      if (d.header) {
        calls.push_back(std::move(*d.header));
      } else {
        calls[static_cast<size_t>(d.index)].arguments += d.arguments;
      }
    }
    if (calls.empty()) return std::nullopt;
    return calls;
  }

 private:
  json typed_value(const std::string& function, const std::string& key,
                   const std::string& value) const {
    std::string type;
    if (tools_.is_array()) {
      for (const json& t : tools_) {
        const json& fn = t.contains("function") ? t["function"] : t;
        if (!fn.is_object() || fn.value("name", "") != function) continue;
        const json* props = nullptr;
        if (fn.contains("parameters") && fn["parameters"].is_object() &&
            fn["parameters"].contains("properties") && fn["parameters"]["properties"].is_object())
          props = &fn["parameters"]["properties"];
        if (props && props->contains(key) && (*props)[key].is_object() &&
            (*props)[key].contains("type") && (*props)[key]["type"].is_string())
          type = (*props)[key]["type"].get<std::string>();
      }
    }
    if (type == "string") return value;
    try {
      json parsed = json::parse(value);
      if (type == "integer" && !parsed.is_number_integer()) return value;
      if (type == "number" && !parsed.is_number()) return value;
      if (type == "boolean" && !parsed.is_boolean()) return value;
      return parsed;
    } catch (const json::exception&) {
      return value;
    }
  }
  json tools_;
};

}  // namespace

bool ToolParser::known(std::string_view name) {
  return name == "nemotron_json" || name == "qwen3_coder" || name == "qwen3_xml";
}

std::unique_ptr<ToolParser> ToolParser::create(std::string_view name, const json& tools) {
  if (name == "nemotron_json") return std::make_unique<NemotronJsonParser>();
  if (name == "qwen3_coder" || name == "qwen3_xml")
    return std::make_unique<Qwen3CoderParser>(tools);
  return nullptr;
}

ToolParser::~ToolParser() = default;

ToolParseResult ToolParser::parse(std::string_view text) const {
  ToolParseResult out;
  size_t at = 0;
  while (at < text.size()) {
    const size_t open = text.find(open_, at);
    if (open == std::string_view::npos) break;
    const size_t inner_from = open + open_.size();
    size_t close = text.find(close_, inner_from);
    const bool closed = close != std::string_view::npos;
    if (!closed) close = text.size();
    auto calls = parse_block(text.substr(inner_from, close - inner_from));
    if (!calls) return ToolParseResult{std::string(text), {}};  // malformed: all content
    out.content.append(text.substr(at, open - at));
    for (ToolCall& c : *calls)
      out.calls.push_back(std::move(c));
    at = closed ? close + close_.size() : text.size();
  }
  if (at < text.size()) out.content.append(text.substr(at));
  return out;
}

ToolStreamDelta ToolParser::push(std::string_view delta) {
  buffer_.append(delta);
  return drain(false);
}

ToolStreamDelta ToolParser::finish() {
  return drain(true);
}

ToolStreamDelta ToolParser::drain(bool final) {
  ToolStreamDelta out;
  out.first_index = calls_emitted_;
  while (!buffer_.empty()) {
    if (!in_call_) {
      const size_t open = buffer_.find(open_);
      if (open != std::string::npos) {
        out.content.append(buffer_, 0, open);
        buffer_.erase(0, open);
        in_call_ = true;
        continue;
      }
      const size_t keep = final ? 0 : partial_suffix(buffer_, open_);
      out.content.append(buffer_, 0, buffer_.size() - keep);
      buffer_.erase(0, buffer_.size() - keep);
      break;
    }
    const size_t close = buffer_.find(close_, open_.size());
    {
      // Stream what the block holds so far (less a possible start of the closing marker).
      if (!streamer_) {
        streamer_ = make_streamer();
        fed_ = 0;
        block_base_ = calls_emitted_;
      }
      const bool complete = close != std::string::npos || final;
      const size_t upto = close != std::string::npos ? close
                          : final ? buffer_.size()
                                  : std::max(open_.size(),
                                             buffer_.size() - partial_suffix(buffer_, close_));
      if (upto > open_.size() + fed_ || complete) {
        const size_t from = std::min(open_.size() + fed_, upto);
        for (ToolCallDelta& d :
             streamer_->push(std::string_view(buffer_).substr(from, upto - from), complete)) {
          d.index += block_base_;
          if (d.header) ++calls_emitted_;  // counted once its name is out
          out.pieces.push_back(std::move(d));
        }
        fed_ = upto - open_.size();
      }
    }
    if (close == std::string::npos && !final) break;  // wait for the end of the call
    const size_t end = close == std::string::npos ? buffer_.size() : close + close_.size();
    const std::string_view inner = std::string_view(buffer_).substr(
        open_.size(), (close == std::string::npos ? buffer_.size() : close) - open_.size());
    auto calls = parse_block(inner);
    const int32_t streamed = streamer_ ? streamer_->calls() : 0;
    streamer_.reset();
    if (streamed > 0) {
      // Already sent piece by piece (and counted).
    } else if (calls) {
      for (ToolCall& c : *calls)
        out.calls.push_back(std::move(c));
      calls_emitted_ += static_cast<int32_t>(calls->size());
    } else {
      out.content.append(buffer_, 0, end);  // malformed: it was text after all
    }
    buffer_.erase(0, end);
    in_call_ = false;
  }
  return out;
}

}  // namespace strata::server
