// JSON in and out of template values. Input: the request's messages/tools (nlohmann ordered_json,
// so objects keep the client's key order, as Python's json.loads does). Output: Python's
// json.dumps(x, ensure_ascii, indent, separators, sort_keys), byte for byte, which is what
// transformers' `tojson` filter calls.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace strata::jinja {

// Throws TemplateError for what Python could not represent the same way (integers beyond int64,
// nesting deeper than max_depth).
Value from_json(const nlohmann::ordered_json& j, int max_depth = 512);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;  // json.dumps(indent=N) -> N spaces; a str is used as is
  std::optional<std::string> item_separator;  // default ", " without indent, "," with it
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Throws TemplateError "Object of type X is not JSON serializable" like Python's TypeError.
std::string json_dumps(const Value& v, const JsonDumpOptions& options, int max_depth = 512);

// The JSON string literal of a UTF-8 string (with quotes), as json.dumps writes it.
void json_quote(std::string& out, std::string_view s, bool ensure_ascii);

}  // namespace strata::jinja
