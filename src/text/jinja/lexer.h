// Splits template source into tokens exactly the way jinja2's lexer does for the environment
// transformers builds: `{{ }}`, `{% %}`, `{# #}`, `{% raw %}`, whitespace control with `-` and `+`,
// trim_blocks (drop the first newline after a block or comment tag) and lstrip_blocks (drop the
// spaces and tabs before a block or comment tag that starts a line), newlines normalized to \n and
// one trailing newline dropped (keep_trailing_newline=False).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::jinja {

enum class Tok : uint8_t {
  Data,        // literal template text
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // text holds the unescaped value
  Integer,
  Float,
  Op,  // text holds the operator: + - * / // % ** ~ == != < <= > >= = . : | , ( ) [ ] { }
  Eof,
};

struct Token {
  Tok type;
  std::string text;
  int line;
  int64_t int_value = 0;
  double float_value = 0.0;
};

struct LexerOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Throws TemplateError (Kind::Syntax) with the line of the problem.
std::vector<Token> tokenize(std::string_view source, const LexerOptions& options = {});

}  // namespace strata::jinja
