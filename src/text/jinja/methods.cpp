#include "text/jinja/methods.h"

#include <fmt/format.h>

#include <unordered_map>

#include "text/jinja/access.h"
#include "text/jinja/call_args.h"
#include "text/jinja/error.h"
#include "text/jinja/pystr.h"
#include "text/jinja/renderer.h"
#include "text/jinja/str_format.h"
#include "text/jinja/unicode_chars.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {
namespace {

using U32 = std::u32string;
using Method = Value (*)(Renderer&, const Value& self, CallArgs& call);

std::optional<U32> opt_str(const Value& v, const char* what) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_string())
    runtime_error(fmt::format("{} must be str or None, not {}", what, type_name(v)));
  return utf8::decode(v.str());
}

std::optional<int64_t> opt_index(const Value& v) {
  if (v.is_none() || v.is_undefined()) return std::nullopt;
  if (!v.is_int_like())
    runtime_error("slice indices must be integers or None or have an __index__ method");
  return v.as_int();
}

int64_t int_arg(const Value& v, const char* fn) {
  if (!v.is_int_like())
    runtime_error(
        fmt::format("{}: '{}' object cannot be interpreted as an integer", fn, type_name(v)));
  return v.as_int();
}

U32 str_arg(const Value& v, const char* fn) {
  if (!v.is_string())
    runtime_error(fmt::format("{}() argument must be str, not {}", fn, type_name(v)));
  return utf8::decode(v.str());
}

// markupsafe: methods of a Markup receiver escape their str arguments and return Markup.
Value make_str(Renderer& r, const U32& s, bool markup) {
  std::string text = utf8::encode(s);
  r.budget().charge(text.size());
  return Value::string(std::move(text), markup);
}

U32 self_text(const Value& self) {
  return utf8::decode(self.str());
}

U32 maybe_escaped(const Value& self, const Value& arg, const char* fn) {
  if (self.is_markup() && arg.is_string() && !arg.is_markup())
    return utf8::decode(html_escape(arg.str()));
  return str_arg(arg, fn);
}

Value str_list(Renderer& r, const std::vector<U32>& parts, bool markup) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (const auto& p : parts)
    out.push_back(make_str(r, p, markup));
  return Value::list(std::move(out));
}

Value do_strip(Renderer& r, const Value& self, CallArgs& call, bool left, bool right,
               const char* fn) {
  reject_kwargs(fn, call);
  expect_args(fn, call, 0, 1);
  std::optional<U32> chars;
  if (!call.args.empty() && !call.args[0].is_none()) chars = maybe_escaped(self, call.args[0], fn);
  return make_str(r, pystr::strip(self_text(self), chars, left, right), self.is_markup());
}

Value do_split(Renderer& r, const Value& self, CallArgs& call, bool from_right) {
  const char* fn = from_right ? "str.rsplit" : "str.split";
  Params p(fn, call, {"sep", "maxsplit"});
  const auto sep = opt_str(p[0], "sep");
  const int64_t maxsplit = p.has(1) ? int_arg(p[1], fn) : -1;
  const U32 s = self_text(self);
  return str_list(r, from_right ? pystr::rsplit(s, sep, maxsplit) : pystr::split(s, sep, maxsplit),
                  self.is_markup());
}

Value do_affix(const Value& self, CallArgs& call, bool prefix) {
  const char* fn = prefix ? "str.startswith" : "str.endswith";
  reject_kwargs(fn, call);
  expect_args(fn, call, 1, 3);
  const U32 s = self_text(self);
  const pystr::Range range =
      pystr::adjust(call.args.size() > 1 ? opt_index(call.args[1]) : std::nullopt,
                    call.args.size() > 2 ? opt_index(call.args[2]) : std::nullopt,
                    static_cast<int64_t>(s.size()));
  auto test = [&](const Value& v) {
    if (!v.is_string()) {
      runtime_error(
          fmt::format("{} first arg must be str or a tuple of str, not {}", fn, type_name(v)));
    }
    const U32 a = utf8::decode(v.str());
    return prefix ? pystr::starts_with(s, a, range) : pystr::ends_with(s, a, range);
  };
  const Value& arg = call.args[0];
  if (arg.is_seq(Seq::Tuple)) {
    for (const auto& item : arg.items())
      if (test(item)) return Value::boolean(true);
    return Value::boolean(false);
  }
  return Value::boolean(test(arg));
}

Value do_find(const Value& self, CallArgs& call, const char* fn, bool reverse, bool raise) {
  reject_kwargs(fn, call);
  expect_args(fn, call, 1, 3);
  const U32 s = self_text(self);
  const U32 sub = str_arg(call.args[0], fn);
  const pystr::Range range =
      pystr::adjust(call.args.size() > 1 ? opt_index(call.args[1]) : std::nullopt,
                    call.args.size() > 2 ? opt_index(call.args[2]) : std::nullopt,
                    static_cast<int64_t>(s.size()));
  const int64_t pos = reverse ? pystr::rfind(s, sub, range) : pystr::find(s, sub, range);
  if (pos < 0 && raise) runtime_error("substring not found");
  return Value::integer(pos);
}

Value do_case(Renderer& r, const Value& self, CallArgs& call, const char* fn,
              U32 (*f)(const U32&)) {
  reject_kwargs(fn, call);
  expect_args(fn, call, 0, 0);
  return make_str(r, f(self_text(self)), self.is_markup());
}

Value do_is(const Value& self, CallArgs& call, const char* fn, bool (*pred)(char32_t)) {
  reject_kwargs(fn, call);
  expect_args(fn, call, 0, 0);
  const U32 s = self_text(self);
  if (s.empty()) return Value::boolean(false);
  for (char32_t c : s)
    if (!pred(c)) return Value::boolean(false);
  return Value::boolean(true);
}

Value do_pad(Renderer& r, const Value& self, CallArgs& call, const char* fn, int where) {
  reject_kwargs(fn, call);
  expect_args(fn, call, 1, 2);
  const int64_t width = int_arg(call.args[0], fn);
  char32_t fill = ' ';
  if (call.args.size() > 1) {
    const U32 f = str_arg(call.args[1], fn);
    if (f.size() != 1)
      runtime_error(fmt::format("{}: the fill character must be exactly one character long", fn));
    fill = f[0];
  }
  const U32 s = self_text(self);
  const auto len = static_cast<int64_t>(s.size());
  if (width <= len) return make_str(r, s, self.is_markup());
  r.budget().charge(static_cast<size_t>(width) * 4);
  const int64_t total = width - len;
  // CPython's str.center: left = marg / 2 + (marg & width & 1).
  const int64_t left = where < 0 ? 0 : where > 0 ? total : total / 2 + (total & width & 1);
  return make_str(
      r, U32(static_cast<size_t>(left), fill) + s + U32(static_cast<size_t>(total - left), fill),
      self.is_markup());
}

const std::unordered_map<std::string, Method>& str_methods() {
  static const std::unordered_map<std::string, Method> table = {
      {"strip", [](Renderer& r, const Value& s,
                   CallArgs& c) { return do_strip(r, s, c, true, true, "str.strip"); }},
      {"lstrip", [](Renderer& r, const Value& s,
                    CallArgs& c) { return do_strip(r, s, c, true, false, "str.lstrip"); }},
      {"rstrip", [](Renderer& r, const Value& s,
                    CallArgs& c) { return do_strip(r, s, c, false, true, "str.rstrip"); }},
      {"split", [](Renderer& r, const Value& s, CallArgs& c) { return do_split(r, s, c, false); }},
      {"rsplit", [](Renderer& r, const Value& s, CallArgs& c) { return do_split(r, s, c, true); }},
      {"splitlines",
       [](Renderer& r, const Value& s, CallArgs& c) {
         Params p("str.splitlines", c, {"keepends"});
         return str_list(r, pystr::splitlines(self_text(s), truthy(p[0])), s.is_markup());
       }},
      {"startswith", [](Renderer&, const Value& s, CallArgs& c) { return do_affix(s, c, true); }},
      {"endswith", [](Renderer&, const Value& s, CallArgs& c) { return do_affix(s, c, false); }},
      {"find", [](Renderer&, const Value& s,
                  CallArgs& c) { return do_find(s, c, "str.find", false, false); }},
      {"rfind", [](Renderer&, const Value& s,
                   CallArgs& c) { return do_find(s, c, "str.rfind", true, false); }},
      {"index", [](Renderer&, const Value& s,
                   CallArgs& c) { return do_find(s, c, "str.index", false, true); }},
      {"rindex", [](Renderer&, const Value& s,
                    CallArgs& c) { return do_find(s, c, "str.rindex", true, true); }},
      {"count",
       [](Renderer&, const Value& s, CallArgs& c) {
         reject_kwargs("str.count", c);
         expect_args("str.count", c, 1, 3);
         const U32 text = self_text(s);
         const pystr::Range range =
             pystr::adjust(c.args.size() > 1 ? opt_index(c.args[1]) : std::nullopt,
                           c.args.size() > 2 ? opt_index(c.args[2]) : std::nullopt,
                           static_cast<int64_t>(text.size()));
         return Value::integer(pystr::count(text, str_arg(c.args[0], "count"), range));
       }},
      {"replace",
       [](Renderer& r, const Value& s, CallArgs& c) {
         reject_kwargs("str.replace", c);
         expect_args("str.replace", c, 2, 3);
         const int64_t count = c.args.size() > 2 ? int_arg(c.args[2], "str.replace") : -1;
         return make_str(r,
                         pystr::replace(self_text(s), maybe_escaped(s, c.args[0], "replace"),
                                        maybe_escaped(s, c.args[1], "replace"), count,
                                        r.budget().limits().max_output_bytes),
                         s.is_markup());
       }},
      {"join",
       [](Renderer& r, const Value& s, CallArgs& c) {
         reject_kwargs("str.join", c);
         expect_args("str.join", c, 1, 1);
         std::string out;
         const auto items = iterate(c.args[0]);
         for (size_t i = 0; i < items->size(); ++i) {
           const Value& item = (*items)[i];
           if (!item.is_string()) {
             runtime_error(fmt::format("sequence item {}: expected str instance, {} found", i,
                                       type_name(item)));
           }
           if (i) out += s.str();
           out += item.str();
           if (out.size() > r.budget().limits().max_output_bytes) r.budget().charge(out.size());
         }
         r.budget().charge(out.size());
         return Value::string(std::move(out), s.is_markup());
       }},
      {"upper", [](Renderer& r, const Value& s,
                   CallArgs& c) { return do_case(r, s, c, "str.upper", uni::upper); }},
      {"lower", [](Renderer& r, const Value& s,
                   CallArgs& c) { return do_case(r, s, c, "str.lower", uni::lower); }},
      {"casefold", [](Renderer& r, const Value& s,
                      CallArgs& c) { return do_case(r, s, c, "str.casefold", uni::lower); }},
      {"title", [](Renderer& r, const Value& s,
                   CallArgs& c) { return do_case(r, s, c, "str.title", pystr::title); }},
      {"capitalize",
       [](Renderer& r, const Value& s, CallArgs& c) {
         return do_case(r, s, c, "str.capitalize", pystr::capitalize);
       }},
      {"swapcase", [](Renderer& r, const Value& s,
                      CallArgs& c) { return do_case(r, s, c, "str.swapcase", pystr::swapcase); }},
      {"isdigit", [](Renderer&, const Value& s,
                     CallArgs& c) { return do_is(s, c, "str.isdigit", uni::is_decimal); }},
      {"isdecimal", [](Renderer&, const Value& s,
                       CallArgs& c) { return do_is(s, c, "str.isdecimal", uni::is_decimal); }},
      {"isnumeric", [](Renderer&, const Value& s,
                       CallArgs& c) { return do_is(s, c, "str.isnumeric", uni::is_decimal); }},
      {"isalpha", [](Renderer&, const Value& s,
                     CallArgs& c) { return do_is(s, c, "str.isalpha", uni::is_alpha); }},
      {"isalnum",
       [](Renderer&, const Value& s, CallArgs& c) {
         return do_is(s, c, "str.isalnum",
                      [](char32_t ch) { return uni::is_alpha(ch) || uni::is_decimal(ch); });
       }},
      {"isspace", [](Renderer&, const Value& s,
                     CallArgs& c) { return do_is(s, c, "str.isspace", uni::is_space); }},
      {"islower",
       [](Renderer&, const Value& s, CallArgs& c) {
         reject_kwargs("str.islower", c);
         bool cased = false;
         for (char32_t ch : self_text(s)) {
           if (uni::is_upper(ch)) return Value::boolean(false);
           cased = cased || uni::is_lower(ch);
         }
         return Value::boolean(cased);
       }},
      {"isupper",
       [](Renderer&, const Value& s, CallArgs& c) {
         reject_kwargs("str.isupper", c);
         bool cased = false;
         for (char32_t ch : self_text(s)) {
           if (uni::is_lower(ch)) return Value::boolean(false);
           cased = cased || uni::is_upper(ch);
         }
         return Value::boolean(cased);
       }},
      {"istitle", [](Renderer&, const Value& s,
                     CallArgs&) { return Value::boolean(pystr::is_title(self_text(s))); }},
      {"removeprefix",
       [](Renderer& r, const Value& s, CallArgs& c) {
         expect_args("str.removeprefix", c, 1, 1);
         const U32 text = self_text(s), a = str_arg(c.args[0], "removeprefix");
         return make_str(r, text.compare(0, a.size(), a) == 0 ? text.substr(a.size()) : text,
                         s.is_markup());
       }},
      {"removesuffix",
       [](Renderer& r, const Value& s, CallArgs& c) {
         expect_args("str.removesuffix", c, 1, 1);
         const U32 text = self_text(s), a = str_arg(c.args[0], "removesuffix");
         const bool ends = !a.empty() && text.size() >= a.size() &&
                           text.compare(text.size() - a.size(), a.size(), a) == 0;
         return make_str(r, ends ? text.substr(0, text.size() - a.size()) : text, s.is_markup());
       }},
      {"center",
       [](Renderer& r, const Value& s, CallArgs& c) { return do_pad(r, s, c, "str.center", 0); }},
      {"ljust",
       [](Renderer& r, const Value& s, CallArgs& c) { return do_pad(r, s, c, "str.ljust", -1); }},
      {"rjust",
       [](Renderer& r, const Value& s, CallArgs& c) { return do_pad(r, s, c, "str.rjust", 1); }},
      {"zfill",
       [](Renderer& r, const Value& s, CallArgs& c) {
         expect_args("str.zfill", c, 1, 1);
         const int64_t width = int_arg(c.args[0], "str.zfill");
         U32 text = self_text(s);
         if (width <= static_cast<int64_t>(text.size())) return make_str(r, text, s.is_markup());
         r.budget().charge(static_cast<size_t>(width) * 4);
         const size_t fill = static_cast<size_t>(width) - text.size();
         const size_t at = !text.empty() && (text[0] == '+' || text[0] == '-') ? 1 : 0;
         text.insert(at, U32(fill, U'0'));
         return make_str(r, text, s.is_markup());
       }},
      {"partition",
       [](Renderer& r, const Value& s, CallArgs& c) {
         expect_args("str.partition", c, 1, 1);
         const U32 text = self_text(s), sep = str_arg(c.args[0], "partition");
         if (sep.empty()) runtime_error("empty separator");
         const size_t pos = text.find(sep);
         std::vector<U32> parts =
             pos == U32::npos
                 ? std::vector<U32>{text, U"", U""}
                 : std::vector<U32>{text.substr(0, pos), sep, text.substr(pos + sep.size())};
         Value l = str_list(r, parts, s.is_markup());
         return Value::list(l.items(), Seq::Tuple);
       }},
      {"rpartition",
       [](Renderer& r, const Value& s, CallArgs& c) {
         expect_args("str.rpartition", c, 1, 1);
         const U32 text = self_text(s), sep = str_arg(c.args[0], "rpartition");
         if (sep.empty()) runtime_error("empty separator");
         const size_t pos = text.rfind(sep);
         std::vector<U32> parts =
             pos == U32::npos
                 ? std::vector<U32>{U"", U"", text}
                 : std::vector<U32>{text.substr(0, pos), sep, text.substr(pos + sep.size())};
         Value l = str_list(r, parts, s.is_markup());
         return Value::list(l.items(), Seq::Tuple);
       }},
      {"format",
       [](Renderer& r, const Value& s, CallArgs& c) {
         std::string out = python_str_format(s.str(), c);
         r.budget().charge(out.size());
         return Value::string(std::move(out), s.is_markup());
       }},
  };
  return table;
}

Value seq_index_of(const Value& self, CallArgs& call) {
  reject_kwargs("index", call);
  expect_args("index", call, 1, 1);
  const auto& items = self.items();
  for (size_t i = 0; i < items.size(); ++i)
    if (equal(items[i], call.args[0])) return Value::integer(static_cast<int64_t>(i));
  runtime_error(fmt::format("{} is not in {}", repr(call.args[0]), type_name(self)));
}

Value seq_count(const Value& self, CallArgs& call) {
  reject_kwargs("count", call);
  expect_args("count", call, 1, 1);
  int64_t n = 0;
  for (const auto& item : self.items())
    n += equal(item, call.args[0]);
  return Value::integer(n);
}

Value dict_view(const Value& self, Seq seq) {
  std::vector<Value> out;
  out.reserve(self.dict().size());
  for (const auto& [k, v] : self.dict().entries()) {
    if (seq == Seq::DictKeys) {
      out.push_back(k);
    } else if (seq == Seq::DictValues) {
      out.push_back(v);
    } else {
      out.push_back(Value::list({k, v}, Seq::Tuple));
    }
  }
  return Value::list(std::move(out), seq);
}

Value bind(const char* name, Value self, Method m) {
  return Value::callable(
      name, [self = std::move(self), m](Renderer& r, CallArgs& call) { return m(r, self, call); });
}

Value unsafe(const Value& self, const std::string& name) {
  return Value::undefined(
      fmt::format("access to attribute '{}' of '{}' object is unsafe.", name, type_name(self)));
}

}  // namespace

std::optional<Value> method_of(const Value& self, const std::string& name) {
  switch (self.kind()) {
    case Kind::String: {
      const auto& table = str_methods();
      auto it = table.find(name);
      if (it == table.end()) return std::nullopt;
      return bind(it->first.c_str(), self, it->second);
    }
    case Kind::Dict:
      if (name == "items" || name == "keys" || name == "values") {
        const Seq seq = name == "items"  ? Seq::DictItems
                        : name == "keys" ? Seq::DictKeys
                                         : Seq::DictValues;
        return Value::callable("dict." + name, [self, seq](Renderer&, CallArgs& call) {
          expect_args("dict view", call, 0, 0);
          return dict_view(self, seq);
        });
      }
      if (name == "get") {
        return bind("dict.get", self, [](Renderer&, const Value& s, CallArgs& call) {
          reject_kwargs("dict.get", call);
          expect_args("dict.get", call, 1, 2);
          if (call.args[0].is_list() && !call.args[0].is_seq(Seq::Tuple))
            runtime_error(fmt::format("unhashable type: '{}'", type_name(call.args[0])));
          if (const Value* v = s.dict().find(call.args[0])) return *v;
          return call.args.size() > 1 ? call.args[1] : Value::none();
        });
      }
      if (name == "copy") {
        return bind("dict.copy", self,
                    [](Renderer&, const Value& s, CallArgs&) { return Value::dict(s.dict()); });
      }
      if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" ||
          name == "clear")
        return unsafe(self, name);
      return std::nullopt;
    case Kind::List: {
      const Seq seq = self.list_data().seq;
      if (seq != Seq::List && seq != Seq::Tuple && seq != Seq::Range) return std::nullopt;
      if (name == "index")
        return bind("index", self,
                    [](Renderer&, const Value& s, CallArgs& c) { return seq_index_of(s, c); });
      if (name == "count")
        return bind("count", self,
                    [](Renderer&, const Value& s, CallArgs& c) { return seq_count(s, c); });
      if (seq != Seq::List) return std::nullopt;
      if (name == "copy") {
        return bind("list.copy", self,
                    [](Renderer&, const Value& s, CallArgs&) { return Value::list(s.items()); });
      }
      if (name == "append" || name == "extend" || name == "insert" || name == "pop" ||
          name == "remove" || name == "reverse" || name == "sort" || name == "clear")
        return unsafe(self, name);
      return std::nullopt;
    }
    default:
      return std::nullopt;
  }
}

}  // namespace strata::jinja
