#include "server/tool_parser.h"

#include <algorithm>
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

// Nemotron-Nano-v2: <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL>. Arguments
// are the model's own text of the value (what streaming sends piece by piece), or the decoded
// text when the model wrote them as a JSON string.
class NemotronJsonParser final : public ToolParser {
 public:
  NemotronJsonParser() : ToolParser("<TOOLCALL>", "</TOOLCALL>") {}

 protected:
  std::optional<std::string> streamed_arguments_key() const override { return "arguments"; }
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
// parse, else kept as strings.
class Qwen3CoderParser final : public ToolParser {
 public:
  explicit Qwen3CoderParser(json tools)
      : ToolParser("<tool_call>", "</tool_call>"), tools_(std::move(tools)) {}

 protected:
  std::optional<std::vector<ToolCall>> parse_block(std::string_view inner) const override {
    std::vector<ToolCall> calls;
    size_t at = 0;
    while (true) {
      const size_t fn = inner.find("<function=", at);
      if (fn == std::string_view::npos) break;
      const size_t name_end = inner.find('>', fn);
      if (name_end == std::string_view::npos) return std::nullopt;
      const std::string name(inner.substr(fn + 10, name_end - fn - 10));
      size_t fn_end = inner.find("</function>", name_end);
      if (fn_end == std::string_view::npos) fn_end = inner.size();  // unclosed: to the end
      const std::string_view body = inner.substr(name_end + 1, fn_end - name_end - 1);
      json args = json::object();
      size_t p = 0;
      while (true) {
        const size_t ps = body.find("<parameter=", p);
        if (ps == std::string_view::npos) break;
        const size_t key_end = body.find('>', ps);
        if (key_end == std::string_view::npos) return std::nullopt;
        const std::string key(body.substr(ps + 11, key_end - ps - 11));
        size_t pe = body.find("</parameter>", key_end);
        if (pe == std::string_view::npos) {  // unclosed: up to the next parameter or the end
          pe = body.find("<parameter=", key_end);
          if (pe == std::string_view::npos) pe = body.size();
        }
        std::string value(body.substr(key_end + 1, pe - key_end - 1));
        if (value.starts_with("\n")) value.erase(0, 1);
        if (value.ends_with("\n")) value.pop_back();
        args[key] = typed_value(name, key, value);
        p = pe;
      }
      calls.push_back(make_call(name, dump(args)));
      at = fn_end;
      if (at >= inner.size()) break;
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
    if (auto key = streamed_arguments_key()) {
      // Stream what the block holds so far (less a possible start of the closing marker).
      if (!streamer_) {
        streamer_ = std::make_shared<GuidedToolCalls>(std::nullopt, *key);
        fed_ = 0;
        block_base_ = calls_emitted_;
      }
      const size_t upto = close != std::string::npos ? close
                          : final ? buffer_.size()
                                  : std::max(open_.size(),
                                             buffer_.size() - partial_suffix(buffer_, close_));
      if (upto > open_.size() + fed_) {
        for (ToolCallDelta& d : streamer_->push(std::string_view(buffer_).substr(
                 open_.size() + fed_, upto - open_.size() - fed_))) {
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
