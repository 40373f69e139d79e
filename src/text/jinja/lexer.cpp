#include "text/jinja/lexer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>

#include "text/jinja/error.h"
#include "text/jinja/string_literal.h"
#include "text/jinja/unicode_chars.h"
#include "text/jinja/utf8.h"

namespace strata::jinja {
namespace {

std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

// Byte length of the Python whitespace character (regex \s) at s[p], or 0.
size_t space_at(std::string_view s, size_t p) {
  if (p >= s.size()) return 0;
  const auto b = static_cast<unsigned char>(s[p]);
  if (b < 0x80) return uni::is_space(b) ? 1 : 0;
  size_t n = (b & 0xe0) == 0xc0 ? 2 : (b & 0xf0) == 0xe0 ? 3 : 4;
  n = std::min(n, s.size() - p);
  const std::u32string cp = utf8::decode(s.substr(p, n));
  return cp.size() == 1 && uni::is_space(cp[0]) ? n : 0;
}

size_t skip_spaces(std::string_view s, size_t p) {
  while (size_t n = space_at(s, p))
    p += n;
  return p;
}

// Python str.rstrip() with no argument.
std::string rstrip_ws(std::string_view s) {
  std::u32string cps = utf8::decode(s);
  while (!cps.empty() && uni::is_space(cps.back()))
    cps.pop_back();
  return utf8::encode(cps);
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

// (\d+_)*\d+ starting at p; returns the end, or p when there is no digit.
size_t scan_digits(std::string_view s, size_t p, bool (*digit)(char) = is_digit) {
  size_t q = p;
  if (q >= s.size() || !digit(s[q])) return p;
  while (true) {
    while (q < s.size() && digit(s[q]))
      ++q;
    if (q + 1 < s.size() && s[q] == '_' && digit(s[q + 1])) {
      ++q;
      continue;
    }
    return q;
  }
}

std::string without_underscores(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '_') out += c;
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, const LexerOptions& options)
      : src_(normalize_newlines(source)), opt_(options) {}

  std::vector<Token> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      const size_t start = next_tag(pos);
      if (start == std::string::npos) {
        emit_data(std::string_view(src_).substr(pos));
        break;
      }
      pos = lex_tag(pos, start);
    }
    tokens_.push_back(Token{Tok::Eof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t next_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return std::string::npos;
  }

  char sign_at(size_t p) const {
    return p < src_.size() && (src_[p] == '-' || src_[p] == '+') ? src_[p] : '\0';
  }

  // Text before a tag, with the tag's whitespace control applied (jinja2's OptionalLStrip).
  void emit_text_before(std::string_view text, char sign, bool is_variable) {
    std::string kept;
    if (sign == '-') {
      kept = rstrip_ws(text);
    } else if (sign != '+' && opt_.lstrip_blocks && !is_variable) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
      const bool only_blanks =
          std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(),
                      [](char c) { return c == ' ' || c == '\t'; });
      kept =
          std::string((l_pos > 0 || line_starting_) && only_blanks ? text.substr(0, l_pos) : text);
    } else {
      kept = std::string(text);
    }
    const int line = line_;
    line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
    if (!kept.empty()) tokens_.push_back(Token{Tok::Data, std::move(kept), line});
  }

  void emit_data(std::string_view text) {
    if (text.empty()) return;
    tokens_.push_back(Token{Tok::Data, std::string(text), line_});
    line_ += static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  }

  // Consumes src_[from, to) as part of a tag: counts lines, remembers whether it ended a line.
  void consume(size_t from, size_t to) {
    line_ += static_cast<int>(std::count(src_.begin() + static_cast<std::ptrdiff_t>(from),
                                         src_.begin() + static_cast<std::ptrdiff_t>(to), '\n'));
    if (to > from) line_starting_ = src_[to - 1] == '\n';
  }

  // Block/comment end: "-X}" strips all following whitespace, "+X}" keeps it, "X}" drops one
  // newline under trim_blocks. Returns the position after the end marker and its whitespace.
  size_t end_of_tag(size_t p, char sign_before) {
    if (sign_before == '-') return skip_spaces(src_, p);
    if (sign_before == '+') return p;
    if (opt_.trim_blocks && p < src_.size() && src_[p] == '\n') return p + 1;
    return p;
  }

  size_t lex_tag(size_t pos, size_t start) {
    const char kind = src_[start + 1];
    const char sign = sign_at(start + 2);
    const std::string_view text = std::string_view(src_).substr(pos, start - pos);
    if (kind == '%') {
      if (size_t raw_end = match_raw_begin(start); raw_end != std::string::npos) {
        emit_text_before(text, sign, false);
        consume(start, raw_end);
        return lex_raw(raw_end);
      }
    }
    emit_text_before(text, sign, kind == '{');
    const size_t body = start + 2 + (sign ? 1 : 0);
    if (kind == '#') return lex_comment(start, body);
    const int line = line_;
    consume(start, body);
    tokens_.push_back(Token{kind == '{' ? Tok::VarBegin : Tok::BlockBegin, "", line});
    return lex_expression(body, kind == '{');
  }

  // {%(-|+|)\s*raw\s*(-%}\s*|%}) at p; returns its end or npos.
  size_t match_raw_begin(size_t p) const {
    size_t q = p + 2;
    if (sign_at(q)) ++q;
    q = skip_spaces(src_, q);
    if (src_.compare(q, 3, "raw") != 0) return std::string::npos;
    q = skip_spaces(src_, q + 3);
    if (src_.compare(q, 3, "-%}") == 0) return skip_spaces(src_, q + 3);
    if (src_.compare(q, 2, "%}") == 0) return q + 2;
    return std::string::npos;
  }

  size_t lex_raw(size_t p) {
    const int start_line = line_;
    for (size_t q = src_.find("{%", p); q != std::string::npos; q = src_.find("{%", q + 1)) {
      size_t r = q + 2;
      const char sign = sign_at(r);
      if (sign) ++r;
      r = skip_spaces(src_, r);
      if (src_.compare(r, 6, "endraw") != 0) continue;
      r = skip_spaces(src_, r + 6);
      size_t end;
      if (src_.compare(r, 3, "+%}") == 0) {
        end = r + 3;
      } else if (src_.compare(r, 3, "-%}") == 0) {
        end = skip_spaces(src_, r + 3);
      } else if (src_.compare(r, 2, "%}") == 0) {
        end = end_of_tag(r + 2, '\0');
      } else {
        continue;
      }
      emit_text_before(std::string_view(src_).substr(p, q - p), sign, false);
      consume(q, end);
      return end;
    }
    syntax_error("Missing end of raw directive", start_line);
  }

  size_t lex_comment(size_t start, size_t body) {
    const int line = line_;
    const size_t close = src_.find("#}", body);
    if (close == std::string::npos) syntax_error("Missing end of comment tag", line);
    const char sign = close > body ? sign_at(close - 1) : '\0';
    const size_t end = end_of_tag(close + 2, sign);
    consume(start, end);
    return end;
  }

  size_t lex_expression(size_t p, bool variable) {
    const int begin_line = line_;
    std::vector<char> balance;
    while (true) {
      if (p >= src_.size()) {
        syntax_error(variable ? "unexpected end of template, expected end of print statement '}}'"
                              : "unexpected end of template, expected end of statement '%}'",
                     begin_line);
      }
      if (balance.empty()) {
        if (size_t end = match_end(p, variable); end != std::string::npos) {
          const int line = line_;
          consume(p, end);
          tokens_.push_back(Token{variable ? Tok::VarEnd : Tok::BlockEnd, "", line});
          return end;
        }
      }
      if (space_at(src_, p) != 0) {
        const size_t q = skip_spaces(src_, p);
        consume(p, q);
        p = q;
        continue;
      }
      p = lex_one(p, balance);
    }
  }

  size_t match_end(size_t p, bool variable) const {
    if (variable) {
      if (src_.compare(p, 3, "-}}") == 0) return skip_spaces(src_, p + 3);
      if (src_.compare(p, 2, "}}") == 0) return p + 2;
      return std::string::npos;
    }
    if (src_.compare(p, 3, "+%}") == 0) return p + 3;
    if (src_.compare(p, 3, "-%}") == 0) return skip_spaces(src_, p + 3);
    if (src_.compare(p, 2, "%}") == 0) {
      return opt_.trim_blocks && p + 2 < src_.size() && src_[p + 2] == '\n' ? p + 3 : p + 2;
    }
    return std::string::npos;
  }

  size_t lex_one(size_t p, std::vector<char>& balance) {
    const int line = line_;
    const char c = src_[p];
    if (size_t end = match_float(p); end != std::string::npos) {
      Token t{Tok::Float, src_.substr(p, end - p), line};
      t.float_value = std::strtod(without_underscores(t.text).c_str(), nullptr);
      tokens_.push_back(std::move(t));
      consume(p, end);
      return end;
    }
    if (is_digit(c)) return lex_integer(p);
    if (is_name_start(c)) {
      size_t q = p + 1;
      while (q < src_.size() && is_name_char(src_[q]))
        ++q;
      tokens_.push_back(Token{Tok::Name, src_.substr(p, q - p), line});
      consume(p, q);
      return q;
    }
    if (c == '\'' || c == '"') return lex_string(p);
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (src_.compare(p, 2, op) == 0) {
        tokens_.push_back(Token{Tok::Op, op, line});
        consume(p, p + 2);
        return p + 2;
      }
    }
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
      syntax_error(fmt::format("unexpected char {} at {}", str_quote_char(c), p), line);
    if (c == '(' || c == '[' || c == '{') {
      balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) syntax_error(fmt::format("unexpected '{}'", c), line);
      if (balance.back() != c)
        syntax_error(fmt::format("unexpected '{}', expected '{}'", c, balance.back()), line);
      balance.pop_back();
    }
    tokens_.push_back(Token{Tok::Op, std::string(1, c), line});
    consume(p, p + 1);
    return p + 1;
  }

  static std::string str_quote_char(char c) { return fmt::format("'{}'", c); }

  // jinja2 float_re: digits, then a fraction and/or an exponent; never right after a '.'.
  size_t match_float(size_t p) const {
    if (!is_digit(src_[p]) || (p > 0 && src_[p - 1] == '.')) return std::string::npos;
    const size_t int_end = scan_digits(src_, p);
    size_t q = int_end;
    size_t frac_end = std::string::npos;
    if (q + 1 < src_.size() && src_[q] == '.' && is_digit(src_[q + 1])) {
      frac_end = scan_digits(src_, q + 1);
      q = frac_end;
    }
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t e = q + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      const size_t exp_end = scan_digits(src_, e);
      if (exp_end != e) return exp_end;
    }
    return frac_end;
  }

  size_t lex_integer(size_t p) {
    const int line = line_;
    auto is_bin = [](char c) { return c == '0' || c == '1'; };
    auto is_oct = [](char c) { return c >= '0' && c <= '7'; };
    auto is_hex = [](char c) {
      return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    };
    size_t end = p + 1;
    int base = 10;
    if (src_[p] == '0' && p + 1 < src_.size()) {
      const char x = static_cast<char>(src_[p + 1] | 0x20);
      bool (*digit)(char) = x == 'b' ? +is_bin : x == 'o' ? +is_oct : x == 'x' ? +is_hex : nullptr;
      if (digit) {
        // 0x(_?[0-9a-f])+
        size_t q = p + 2;
        while (q < src_.size()) {
          if (digit(src_[q])) {
            ++q;
          } else if (src_[q] == '_' && q + 1 < src_.size() && digit(src_[q + 1])) {
            q += 2;
          } else {
            break;
          }
        }
        if (q > p + 2) {
          end = q;
          base = x == 'b' ? 2 : x == 'o' ? 8 : 16;
        }
      }
      if (base == 10) {  // 0(_?0)*
        while (end < src_.size() &&
               (src_[end] == '0' ||
                (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0')))
          end += src_[end] == '_' ? 2 : 1;
      }
    } else if (src_[p] != '0') {
      end = scan_digits(src_, p);
    }
    Token t{Tok::Integer, src_.substr(p, end - p), line};
    const std::string digits = without_underscores(base == 10 ? t.text : t.text.substr(2));
    errno = 0;
    const unsigned long long v = std::strtoull(digits.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(INT64_MAX))
      syntax_error(fmt::format("integer literal {} is too large", t.text), line);
    t.int_value = static_cast<int64_t>(v);
    tokens_.push_back(std::move(t));
    consume(p, end);
    return end;
  }

  size_t lex_string(size_t p) {
    const int line = line_;
    const char quote = src_[p];
    size_t q = p + 1;
    while (q < src_.size() && src_[q] != quote)
      q += src_[q] == '\\' ? 2 : 1;
    if (q >= src_.size()) syntax_error("unexpected end of string", line);
    Token t{Tok::String,
            unescape_string_literal(std::string_view(src_).substr(p + 1, q - p - 1), line), line};
    tokens_.push_back(std::move(t));
    consume(p, q + 1);
    return q + 1;
  }

  std::string src_;
  LexerOptions opt_;
  std::vector<Token> tokens_;
  int line_ = 1;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const LexerOptions& options) {
  if (size_t bad = utf8::first_invalid(source); bad != std::string_view::npos)
    syntax_error(fmt::format("template is not valid UTF-8 (byte offset {})", bad),
                 1 + static_cast<int>(std::count(
                         source.begin(), source.begin() + static_cast<std::ptrdiff_t>(bad), '\n')));
  return Lexer(source, options).run();
}

}  // namespace strata::jinja
