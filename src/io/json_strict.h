// Strict JSON for files strata reads (safetensors headers, shard indexes, quantization configs).
// nlohmann::json keeps the last of two equal keys without a word and accepts any nesting depth;
// a file that says two different things under one name, or that nests deeper than its schema
// allows, is an error here, reported with `what` (the file, or "FILE: header") in the message.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::io {

// Parses `text` as one JSON value. Throws strata::Error naming `what` on a syntax error, invalid
// UTF-8, a duplicate key in any object, or nesting deeper than `max_depth` (the top-level value
// is depth 1, so `{"a": [1]}` has depth 2).
nlohmann::json parse_json_strict(std::string_view text, std::string_view what, int max_depth);
// The same, keeping keys in document order (chat requests, tokenizer_config.json).
nlohmann::ordered_json parse_ordered_json_strict(std::string_view text, std::string_view what,
                                                 int max_depth);

// Nesting limits for the JSON strict reads, all far below what the stack holds (nlohmann's
// parser is iterative, but code that walks a parsed value, such as the chat template renderer,
// recurses). Requests carry tool schemas, which nest more than files do.
inline constexpr int kFileJsonMaxDepth = 64;     // config.json, tokenizer.json, ...
inline constexpr int kRequestJsonMaxDepth = 64;  // an OpenAI chat request, an id list

// Duplicate keys are refused everywhere (files and requests): nlohmann keeps the last value and
// Python's json keeps the last too, but serde (HF tokenizers, TGI) refuses a repeated field, so a
// document with two values under one name means different things to different readers.

// Reads a whole regular file as text through read_regular_file (io/bounded_file.h): `what` names
// what it is read as and `max_bytes` bounds it; throws naming the path and the limit.
std::string read_text_file(const std::string& path, std::string_view what = "file",
                           uint64_t max_bytes = 256ull << 20);

// parse_json_strict of read_text_file(path, what, max_bytes), with the path in messages.
nlohmann::json parse_json_file(const std::string& path, std::string_view what, uint64_t max_bytes,
                               int max_depth = kFileJsonMaxDepth);

// Byte offset of the first byte that is not RFC 3629 UTF-8 (overlong forms, surrogates and code
// points above U+10FFFF included), or npos when `s` is valid.
size_t first_invalid_utf8(std::string_view s);

// A name from a file, for an error message: JSON-quoted (so control characters and newlines are
// escaped and the message stays on one line) and cut to 200 bytes with "..." when longer.
std::string quote_name(std::string_view name);

// JSON type for messages: "object", "array", "string", "number", "boolean", "null".
std::string_view json_type_name(const nlohmann::json& j);

}  // namespace strata::io
