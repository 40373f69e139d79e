// How Python spells numbers and strings: repr(float) (shortest round-trip digits, exponent form
// outside 1e-4 <= |x| < 1e16), repr(str) (quote choice and escapes), as str(), json.dumps and
// jinja2 output all depend on them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace strata::jinja {

std::string float_repr(double d);  // repr(1.0) == "1.0", repr(1e16) == "1e+16", "nan", "inf"
std::string str_repr(std::string_view s);  // repr('it\'s') == "\"it's\""

}  // namespace strata::jinja
