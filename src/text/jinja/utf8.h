// UTF-8 <-> code points. Template values are UTF-8 std::strings, but Python indexes, slices and
// measures str by code point, so every such operation decodes to a std::u32string first.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata::jinja::utf8 {

// Byte offset of the first ill-formed sequence (overlong, surrogate, > U+10FFFF, truncated), or
// std::string_view::npos when the whole string is well-formed.
size_t first_invalid(std::string_view s);
inline bool valid(std::string_view s) {
  return first_invalid(s) == std::string_view::npos;
}

// Decoding assumes well-formed input (every string inside the interpreter is); a stray byte
// decodes as U+FFFD rather than reading past the end.
std::u32string decode(std::string_view s);
void append(std::string& out, char32_t cp);
std::string encode(std::u32string_view cps);

// Number of code points (Python len()).
size_t length(std::string_view s);

}  // namespace strata::jinja::utf8
