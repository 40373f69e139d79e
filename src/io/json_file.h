// Writes a JSON value to a file (benchmark rows): pretty-printed, newline-terminated, every
// write checked; throws naming the file on failure.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace strata::io {

void write_json_file(const std::string& path, const nlohmann::json& value);

}  // namespace strata::io
