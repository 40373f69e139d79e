#include "text/tokenizer_json.h"

#include "text/unicode.h"

namespace strata::text {

const nlohmann::json& json_member(const nlohmann::json& j, std::string_view key,
                                  const std::string& where) {
  if (!j.is_object()) fail("{}: expected a JSON object, found {}", where, j.type_name());
  const auto it = j.find(key);
  if (it == j.end()) fail("{}: missing field '{}'", where, key);
  return *it;
}

std::string json_string(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const nlohmann::json& v = json_member(j, key, where);
  if (!v.is_string()) fail("{}.{}: expected a string, found {}", where, key, v.type_name());
  return v.get<std::string>();
}

bool json_bool(const nlohmann::json& j, std::string_view key, bool fallback,
               const std::string& where) {
  if (!j.is_object()) fail("{}: expected a JSON object, found {}", where, j.type_name());
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean())
    fail("{}.{}: expected true or false, found {}", where, key, it->type_name());
  return it->get<bool>();
}

int64_t json_int(const nlohmann::json& j, std::string_view key, int64_t fallback,
                 const std::string& where) {
  if (!j.is_object()) fail("{}: expected a JSON object, found {}", where, j.type_name());
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number_integer())
    fail("{}.{}: expected an integer, found {}", where, key, it->dump());
  return it->get<int64_t>();
}

std::string json_type(const nlohmann::json& j, const std::string& where) {
  return json_string(j, "type", where);
}

char32_t json_char(const nlohmann::json& j, std::string_view key, const std::string& where) {
  const std::string s = json_string(j, key, where);
  size_t i = 0;
  if (s.empty() || !utf8_is_valid(s) || (utf8_next(s, i), i != s.size()))
    fail("{}.{}: expected exactly one character, found \"{}\"", where, key, s);
  i = 0;
  return utf8_next(s, i);
}

}  // namespace strata::text
