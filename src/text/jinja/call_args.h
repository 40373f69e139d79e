// Arguments of a call from a template (`f(a, b, key=c)`), and binding them to a builtin's named
// parameters with Python's rules: positional first, then keywords; too many, unknown or repeated
// arguments are TypeErrors.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace strata::jinja {

struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;
};

class Params {
 public:
  // `fn` names the function in messages ("filter 'join'", "str.split").
  Params(std::string_view fn, const CallArgs& call, std::initializer_list<const char*> names);

  bool has(size_t i) const { return given_[i]; }
  const Value& operator[](size_t i) const { return values_[i]; }  // Undefined when not given
  Value get(size_t i, Value fallback) const { return given_[i] ? values_[i] : std::move(fallback); }

 private:
  std::vector<Value> values_;
  std::vector<bool> given_;
};

// For builtins that take no keywords (most str methods): throws if any were passed.
void reject_kwargs(std::string_view fn, const CallArgs& call);
// Throws unless min <= number of positional arguments <= max.
void expect_args(std::string_view fn, const CallArgs& call, size_t min, size_t max);

}  // namespace strata::jinja
