// String filters, as jinja2/filters.py defines them (with autoescape off, as transformers runs).
#include <fmt/format.h>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/filter_util.h"
#include "text/jinja/pystr.h"
#include "text/jinja/renderer.h"
#include "text/jinja/str_format.h"
#include "text/jinja/unicode_chars.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {
namespace {

using U32 = std::u32string;

Value text_value(Renderer& r, const U32& s, bool markup) {
  std::string out = utf8::encode(s);
  r.budget().charge(out.size());
  return Value::string(std::move(out), markup);
}

Value f_trim(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'trim'", a, {"chars"});
  const Value s = soft_str(in);
  std::optional<U32> chars;
  if (p.has(0) && !p[0].is_none()) {
    if (!p[0].is_string())
      runtime_error(fmt::format("strip arg must be None or str, not {}", type_name(p[0])));
    chars = utf8::decode(p[0].str());
  }
  return text_value(r, pystr::strip(utf8::decode(s.str()), chars, true, true), s.is_markup());
}

Value f_upper(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'upper'", a, {});
  const Value s = soft_str(in);
  return text_value(r, uni::upper(utf8::decode(s.str())), s.is_markup());
}

Value f_lower(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'lower'", a, {});
  const Value s = soft_str(in);
  return text_value(r, uni::lower(utf8::decode(s.str())), s.is_markup());
}

Value f_capitalize(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'capitalize'", a, {});
  const Value s = soft_str(in);
  return text_value(r, pystr::capitalize(utf8::decode(s.str())), s.is_markup());
}

// jinja2 do_title: split on runs of [-\s({\[<], then item[0].upper() + item[1:].lower().
Value f_title(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'title'", a, {});
  const Value s = soft_str(in);
  const U32 text = utf8::decode(s.str());
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || uni::is_space(c);
  };
  U32 out;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    const bool sep = is_sep(text[i]);
    while (j < text.size() && is_sep(text[j]) == sep)
      ++j;
    const U32 item = text.substr(i, j - i);
    out += uni::upper(item.substr(0, 1));
    out += uni::lower(item.substr(1));
    i = j;
  }
  return text_value(r, out, s.is_markup());
}

Value f_replace(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'replace'", a, {"old", "new", "count"});
  if (!p.has(0) || !p.has(1)) runtime_error("filter 'replace' needs the old and new strings");
  int64_t count = -1;
  if (p.has(2) && !p[2].is_none()) {
    if (!p[2].is_int_like()) runtime_error("replace(): count must be an integer");
    count = p[2].as_int();
  }
  const U32 out =
      pystr::replace(utf8::decode(to_str(in)), utf8::decode(to_str(p[0])),
                     utf8::decode(to_str(p[1])), count, r.budget().limits().max_output_bytes);
  return text_value(r, out, false);
}

Value f_string(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'string'", a, {});
  return soft_str(in);
}

Value f_safe(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'safe'", a, {});
  return Value::string(to_str(in), true);
}

Value f_escape(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'escape'", a, {});
  if (in.is_string() && in.is_markup()) return in;
  return Value::string(html_escape(to_str(in)), true);
}

Value f_forceescape(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'forceescape'", a, {});
  return Value::string(html_escape(to_str(in)), true);
}

// jinja2 do_indent (3.x): width may be a string; the first line and blank lines stay as they are
// unless first / blank say otherwise.
Value f_indent(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'indent'", a, {"width", "first", "blank"});
  U32 indention;
  if (p.has(0) && p[0].is_string()) {
    indention = utf8::decode(p[0].str());
  } else {
    const Value w = p.get(0, Value::integer(4));
    if (!w.is_int_like()) runtime_error("indent(): width must be an int or a str");
    indention = U32(static_cast<size_t>(std::max<int64_t>(0, w.as_int())), U' ');
  }
  const Value s = soft_str(in);
  const U32 text = utf8::decode(s.str()) + U"\n";
  const std::vector<U32> lines = pystr::splitlines(text, false);
  U32 out;
  if (truthy(p[2])) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) out += U"\n" + indention;
      out += lines[i];
    }
  } else {
    out = lines.empty() ? U"" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      out += U"\n";
      if (!lines[i].empty()) out += indention;
      out += lines[i];
    }
  }
  if (truthy(p[1])) out = indention + out;
  return text_value(r, out, s.is_markup());
}

Value f_wordcount(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'wordcount'", a, {});
  int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8::decode(to_str(in))) {
    const bool word = c == '_' || uni::is_alpha(c) || uni::is_decimal(c);
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::integer(n);
}

Value f_center(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'center'", a, {"width"});
  const Value w = p.get(0, Value::integer(80));
  if (!w.is_int_like()) runtime_error("center(): width must be an integer");
  const U32 s = utf8::decode(to_str(in));
  const int64_t width = w.as_int();
  const auto len = static_cast<int64_t>(s.size());
  if (width <= len) return text_value(r, s, false);
  r.budget().charge(static_cast<size_t>(width));
  const int64_t total = width - len;
  const int64_t left = total / 2 + (total & width & 1);
  return text_value(
      r, U32(static_cast<size_t>(left), U' ') + s + U32(static_cast<size_t>(total - left), U' '),
      false);
}

// jinja2 do_format: soft_str(value) % (kwargs or args).
Value f_format(Renderer& r, const Value& in, CallArgs& a) {
  if (!a.args.empty() && !a.kwargs.empty())
    runtime_error("can't handle positional and keyword arguments at the same time");
  Value args;
  if (!a.kwargs.empty()) {
    Dict d;
    for (const auto& [k, v] : a.kwargs)
      d.set(Value::string(k), v);
    args = Value::dict(std::move(d));
  } else {
    args = Value::list(a.args, Seq::Tuple);
  }
  const Value s = soft_str(in);
  std::string out = python_percent_format(s.str(), args);
  r.budget().charge(out.size());
  return Value::string(std::move(out), s.is_markup());
}

}  // namespace

std::vector<FilterDef> string_filters() {
  return {
      {"trim", f_trim},
      {"upper", f_upper},
      {"lower", f_lower},
      {"capitalize", f_capitalize},
      {"title", f_title},
      {"replace", f_replace},
      {"string", f_string},
      {"safe", f_safe},
      {"escape", f_escape},
      {"e", f_escape},
      {"forceescape", f_forceescape},
      {"indent", f_indent},
      {"wordcount", f_wordcount},
      {"center", f_center},
      {"format", f_format},
  };
}

}  // namespace strata::jinja
