// Template string literals unescape the way jinja2 does it:
// value.encode("ascii", "backslashreplace").decode("unicode-escape"), i.e. Python's escape
// sequences (\n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh \ooo \a \b \f \v \r, backslash-newline), with
// unknown escapes such as \d kept as written.
#pragma once

#include <string>
#include <string_view>

namespace strata::jinja {

// `raw` is the text between the quotes. Throws TemplateError (Syntax) at `line` for malformed
// \x / \u / \U escapes, \N{...} (unsupported) and escapes that make a lone surrogate.
std::string unescape_string_literal(std::string_view raw, int line);

}  // namespace strata::jinja
