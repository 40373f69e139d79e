// Helpers shared by the filter families: jinja2's soft_str and make_attrgetter.
#pragma once

#include <functional>
#include <string>

#include "text/jinja/value.h"

namespace strata::jinja {

// jinja2 soft_str: a str (Markup stays Markup) as is, anything else through str().
Value soft_str(const Value& v);

// jinja2 make_attrgetter: "a.b.0" looks up item a, then b, then 0 (digits become indexes), each
// with environment.getitem; a missing result becomes `fallback` when one is given; ignore_case
// lowercases string results (for sort/unique/min/max without case_sensitive).
std::function<Value(const Value&)> attrgetter(const Value& attribute,
                                              const Value* fallback = nullptr,
                                              bool ignore_case = false);

Value lower_if_string(const Value& v);

}  // namespace strata::jinja
