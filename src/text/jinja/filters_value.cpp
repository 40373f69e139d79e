// Filters on single values: default, int, float, abs, round, attr, and transformers' tojson.
#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "text/jinja/access.h"
#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/methods.h"
#include "text/jinja/renderer.h"
#include "text/jinja/unicode_chars.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_json.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {
namespace {

std::string strip_ws(const std::string& s) {
  std::u32string cps = utf8::decode(s);
  size_t b = 0, e = cps.size();
  while (b < e && uni::is_space(cps[b]))
    ++b;
  while (e > b && uni::is_space(cps[e - 1]))
    --e;
  return utf8::encode(cps.substr(b, e - b));
}

// Digits of `base` with single underscores between them (Python's int() literal rules).
std::optional<std::string> clean_digits(const std::string& s, size_t from, int base,
                                        bool underscore_first) {
  std::string out;
  bool prev_digit = underscore_first;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '_') {
      if (!prev_digit) return std::nullopt;
      prev_digit = false;
      continue;
    }
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'z') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'Z') d = c - 'A' + 10;
    if (d < 0 || d >= base) return std::nullopt;
    out += c;
    prev_digit = true;
  }
  if (out.empty() || !prev_digit) return std::nullopt;
  return out;
}

// Python int(text, base); nullopt where Python raises ValueError.
std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  const std::string s = strip_ws(text);
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  int b = static_cast<int>(base);
  bool prefixed = false;
  if (s.size() >= i + 2 && s[i] == '0') {
    const char x = static_cast<char>(s[i + 1] | 0x20);
    const int pb = x == 'x' ? 16 : x == 'o' ? 8 : x == 'b' ? 2 : 0;
    if (pb && (b == 0 || b == pb)) {
      b = pb;
      i += 2;
      prefixed = true;
    }
  }
  if (b == 0) {
    b = 10;
    // base 0: a decimal literal may not have leading zeros (except zero itself)
    const auto d = clean_digits(s, i, 10, false);
    if (d && d->size() > 1 && (*d)[0] == '0' && d->find_first_not_of('0') != std::string::npos)
      return std::nullopt;
  }
  const auto digits = clean_digits(s, i, b, prefixed);
  if (!digits) return std::nullopt;
  errno = 0;
  const unsigned long long v = std::strtoull(digits->c_str(), nullptr, b);
  if (errno == ERANGE || v > static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()))
    runtime_error(fmt::format("int(): {} does not fit in 64 bits", text));
  return neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
}

// Python float(text); nullopt where Python raises ValueError.
std::optional<double> parse_float(const std::string& text) {
  std::string s = strip_ws(text);
  std::string lower;
  for (char c : s)
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t i = (!lower.empty() && (lower[0] == '+' || lower[0] == '-')) ? 1 : 0;
  const std::string body = lower.substr(i);
  const double sign = (i && lower[0] == '-') ? -1.0 : 1.0;
  if (body == "inf" || body == "infinity") return sign * std::numeric_limits<double>::infinity();
  if (body == "nan") return std::numeric_limits<double>::quiet_NaN();
  // [digits][.digits][e[+-]digits], underscores only between digits, at least one digit.
  std::string clean = lower.substr(0, i);
  bool any_digit = false, prev_digit = false, seen_dot = false, seen_exp = false;
  for (size_t k = i; k < lower.size(); ++k) {
    const char c = lower[k];
    if (c >= '0' && c <= '9') {
      any_digit = prev_digit = true;
      clean += c;
    } else if (c == '_') {
      if (!prev_digit || k + 1 >= lower.size() ||
          !std::isdigit(static_cast<unsigned char>(lower[k + 1])))
        return std::nullopt;
      prev_digit = false;
    } else if (c == '.' && !seen_dot && !seen_exp) {
      seen_dot = true;
      prev_digit = false;
      clean += c;
    } else if (c == 'e' && any_digit && !seen_exp) {
      seen_exp = true;
      prev_digit = false;
      clean += c;
      if (k + 1 < lower.size() && (lower[k + 1] == '+' || lower[k + 1] == '-')) clean += lower[++k];
      if (k + 1 >= lower.size()) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  if (!any_digit) return std::nullopt;
  return std::strtod(clean.c_str(), nullptr);
}

// Python int(float): truncates; inf raises OverflowError, nan ValueError (nullopt).
std::optional<int64_t> float_to_int(double d) {
  if (std::isnan(d)) return std::nullopt;
  if (std::isinf(d)) runtime_error("cannot convert float infinity to integer");
  const double t = std::trunc(d);
  if (t < -9223372036854775808.0 || t >= 9223372036854775808.0)
    runtime_error("int(): value does not fit in 64 bits");
  return static_cast<int64_t>(t);
}

Value f_default(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'default'", a, {"default_value", "boolean"});
  if (in.is_undefined() || (truthy(p[1]) && !truthy(in))) return p.get(0, Value::string(""));
  return in;
}

Value f_int(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'int'", a, {"default", "base"});
  const Value fallback = p.get(0, Value::integer(0));
  if (in.is_undefined()) runtime_error(in.undefined_message());
  std::optional<int64_t> r;
  if (in.is_string()) {
    const Value base = p.get(1, Value::integer(10));
    if (!base.is_int_like()) runtime_error("int() base must be an integer");
    if (base.as_int() != 0 && (base.as_int() < 2 || base.as_int() > 36))
      runtime_error("int() base must be >= 2 and <= 36, or 0");
    r = parse_int(in.str(), base.as_int());
    if (!r) {
      if (auto f = parse_float(in.str())) r = float_to_int(*f);
    }
  } else if (in.is_int_like()) {
    r = in.as_int();
  } else if (in.kind() == Kind::Float) {
    r = float_to_int(in.as_float());
  }
  return r ? Value::integer(*r) : fallback;
}

Value f_float(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'float'", a, {"default"});
  const Value fallback = p.get(0, Value::floating(0.0));
  if (in.is_undefined()) runtime_error(in.undefined_message());
  if (in.is_number()) return Value::floating(in.as_float());
  if (in.is_string()) {
    if (auto f = parse_float(in.str())) return Value::floating(*f);
  }
  return fallback;
}

Value f_abs(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'abs'", a, {});
  if (in.is_int_like()) {
    if (in.as_int() == std::numeric_limits<int64_t>::min())
      runtime_error("abs(): result does not fit in 64 bits");
    return Value::integer(in.as_int() < 0 ? -in.as_int() : in.as_int());
  }
  if (in.kind() == Kind::Float) return Value::floating(std::fabs(in.as_float()));
  runtime_error(fmt::format("bad operand type for abs(): '{}'", type_name(in)));
}

// Python round(x, n) for floats: correctly rounded, ties to even on the exact binary value,
// which is what printf's %.Nf does.
double round_float(double x, int64_t n) {
  if (!std::isfinite(x)) return x;
  if (n >= 0) {
    if (n > 330) return x;
    char buf[400];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(n), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-n));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'round'", a, {"precision", "method"});
  const Value precision = p.get(0, Value::integer(0));
  const std::string method = p.has(1) ? to_str(p[1]) : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    runtime_error("method must be common, ceil or floor");
  if (!precision.is_int_like())
    runtime_error(
        fmt::format("'{}' object cannot be interpreted as an integer", type_name(precision)));
  if (in.is_undefined()) runtime_error(in.undefined_message());
  if (!in.is_number())
    runtime_error(fmt::format("type {} doesn't define __round__ method", type_name(in)));
  const int64_t n = precision.as_int();
  if (method == "common") {
    if (in.is_int_like()) {
      if (n >= 0) return Value::integer(in.as_int());
      return Value::integer(static_cast<int64_t>(round_float(static_cast<double>(in.as_int()), n)));
    }
    return Value::floating(round_float(in.as_float(), n));
  }
  const double scale = std::pow(10.0, static_cast<double>(n));
  const double v = in.as_float() * scale;
  return Value::floating((method == "ceil" ? std::ceil(v) : std::floor(v)) / scale);
}

// transformers: json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
// sort_keys=sort_keys), defaults ensure_ascii=False, indent=None, separators=None, sort_keys=False.
Value f_tojson(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'tojson'", a, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = truthy(p[0]);
  o.sort_keys = truthy(p[3]);
  if (p.has(1) && !p[1].is_none()) {
    const Value& indent = p[1];
    if (indent.is_string()) {
      o.indent = indent.str();
    } else if (indent.is_int_like()) {
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, indent.as_int())), ' ');
    } else {
      runtime_error(
          fmt::format("can't multiply sequence by non-int of type '{}'", type_name(indent)));
    }
  }
  if (p.has(2) && !p[2].is_none()) {
    const Value& sep = p[2];
    if (!sep.is_list() || sep.items().size() != 2 || !sep.items()[0].is_string() ||
        !sep.items()[1].is_string())
      runtime_error("tojson: separators must be a pair of strings (item_separator, key_separator)");
    o.item_separator = sep.items()[0].str();
    o.key_separator = sep.items()[1].str();
  }
  std::string out = json_dumps(in, o);
  r.budget().charge(out.size());
  return Value::string(std::move(out));
}

// jinja2 do_attr: the Python attribute only (no item fallback), through the sandbox.
Value f_attr(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'attr'", a, {"name"});
  const std::string name = to_str(p[0]);
  if (in.is_undefined()) runtime_error(in.undefined_message());
  if (in.kind() == Kind::Namespace || in.kind() == Kind::Loop) return getattr(in, name);
  if (auto m = method_of(in, name)) return *m;
  return Value::undefined(missing_attribute(in, Value::string(name)));
}

}  // namespace

std::vector<FilterDef> value_filters() {
  return {
      {"default", f_default, false}, {"d", f_default, false}, {"int", f_int, false},
      {"float", f_float, false},     {"abs", f_abs, false},   {"round", f_round, false},
      {"tojson", f_tojson},          {"attr", f_attr, false},
  };
}

}  // namespace strata::jinja
