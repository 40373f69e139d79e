// Strict JSON for files strata reads (safetensors headers, shard indexes, quantization configs).
// nlohmann::json keeps the last of two equal keys without a word and accepts any nesting depth;
// a file that says two different things under one name, or that nests deeper than its schema
// allows, is an error here, reported with `what` (the file, or "FILE: header") in the message.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace strata::io {

// Parses `text` as one JSON value. Throws strata::Error naming `what` on a syntax error, invalid
// UTF-8, a duplicate key in any object, or nesting deeper than `max_depth` (the top-level value
// is depth 1, so `{"a": [1]}` has depth 2).
nlohmann::json parse_json_strict(std::string_view text, std::string_view what, int max_depth);

// Reads a whole (small) file as text; throws naming the path when it cannot be read.
std::string read_text_file(const std::string& path);

// A name from a file, for an error message: JSON-quoted (so control characters and newlines are
// escaped and the message stays on one line) and cut to 200 bytes with "..." when longer.
std::string quote_name(std::string_view name);

// JSON type for messages: "object", "array", "string", "number", "boolean", "null".
std::string_view json_type_name(const nlohmann::json& j);

}  // namespace strata::io
