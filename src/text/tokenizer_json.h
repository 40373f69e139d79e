// Typed reads of tokenizer.json / tokenizer_config.json fields that fail with the file and field
// in the message instead of nlohmann's generic type errors.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/check.h"

namespace strata::text {

// The member `key` of object `j`, required. `where` is the path of `j` ("tokenizer.json:
// model").
const nlohmann::json& json_member(const nlohmann::json& j, std::string_view key,
                                  const std::string& where);

std::string json_string(const nlohmann::json& j, std::string_view key, const std::string& where);
bool json_bool(const nlohmann::json& j, std::string_view key, bool fallback,
               const std::string& where);
int64_t json_int(const nlohmann::json& j, std::string_view key, int64_t fallback,
                 const std::string& where);

// The "type" of a component object ("Sequence", "ByteLevel", ...).
std::string json_type(const nlohmann::json& j, const std::string& where);

// The single character of a string field (Metaspace replacement, Strip content).
char32_t json_char(const nlohmann::json& j, std::string_view key, const std::string& where);

}  // namespace strata::text
