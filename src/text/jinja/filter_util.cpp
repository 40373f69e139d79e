#include "text/jinja/filter_util.h"

#include <optional>
#include <vector>

#include "text/jinja/access.h"
#include "text/jinja/unicode_chars.h"
#include "text/jinja/utf8.h"

namespace strata::jinja {

Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(to_str(v));
}

Value lower_if_string(const Value& v) {
  if (!v.is_string()) return v;
  return Value::string(utf8::encode(uni::lower(utf8::decode(v.str()))), v.is_markup());
}

std::function<Value(const Value&)> attrgetter(const Value& attribute, const Value* fallback,
                                              bool ignore_case) {
  std::vector<Value> parts;
  if (attribute.is_string()) {
    const std::string& s = attribute.str();
    size_t start = 0;
    while (true) {
      const size_t dot = s.find('.', start);
      const std::string part =
          s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
      const bool digits =
          !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
      parts.push_back(digits && part.size() < 19 ? Value::integer(std::stoll(part))
                                                 : Value::string(part));
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
  } else if (!attribute.is_none() && !attribute.is_undefined()) {
    parts.push_back(attribute);
  }
  std::optional<Value> dflt;
  if (fallback && !fallback->is_none()) dflt = *fallback;
  return [parts, dflt, ignore_case](const Value& item) {
    Value v = item;
    for (const auto& p : parts) {
      v = getitem(v, p);
      if (dflt && v.is_undefined()) v = *dflt;
    }
    return ignore_case ? lower_if_string(v) : v;
  };
}

}  // namespace strata::jinja
