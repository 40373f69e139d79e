#include "text/jinja/string_literal.h"

#include <fmt/format.h>

#include "text/jinja/error.h"
#include "text/jinja/utf8.h"

namespace strata::jinja {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string unescape_string_literal(std::string_view raw, int line) {
  std::string out;
  out.reserve(raw.size());
  size_t i = 0;
  while (i < raw.size()) {
    const char c = raw[i];
    if (c != '\\' || i + 1 >= raw.size()) {
      out += c;
      ++i;
      continue;
    }
    const char e = raw[i + 1];
    i += 2;
    switch (e) {
      case '\n':
        continue;  // backslash-newline continues the line
      case '\\':
        out += '\\';
        continue;
      case '\'':
        out += '\'';
        continue;
      case '"':
        out += '"';
        continue;
      case 'a':
        out += '\a';
        continue;
      case 'b':
        out += '\b';
        continue;
      case 'f':
        out += '\f';
        continue;
      case 'n':
        out += '\n';
        continue;
      case 'r':
        out += '\r';
        continue;
      case 't':
        out += '\t';
        continue;
      case 'v':
        out += '\v';
        continue;
      case 'N':
        syntax_error("\\N{...} escapes are not supported in template strings", line);
      default:
        break;
    }
    if (e >= '0' && e <= '7') {
      unsigned v = static_cast<unsigned>(e - '0');
      for (int k = 0; k < 2 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++k, ++i)
        v = v * 8 + static_cast<unsigned>(raw[i] - '0');
      utf8::append(out, v);
      continue;
    }
    const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
    if (digits == 0) {  // unknown escape: Python keeps the backslash
      out += '\\';
      out += e;
      continue;
    }
    char32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i) {
      const int h = i < raw.size() ? hex_value(raw[i]) : -1;
      if (h < 0) syntax_error(fmt::format("truncated \\{} escape in string literal", e), line);
      v = v * 16 + static_cast<char32_t>(h);
    }
    if (v > 0x10ffff) syntax_error("\\U escape beyond U+10FFFF in string literal", line);
    if (v >= 0xd800 && v <= 0xdfff)
      syntax_error("string literal escape makes a lone surrogate, which UTF-8 cannot hold", line);
    utf8::append(out, v);
  }
  return out;
}

}  // namespace strata::jinja
