// The `is` tests, as jinja2/tests.py defines them.
#include <fmt/format.h>

#include "text/jinja/access.h"
#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/renderer.h"
#include "text/jinja/unicode_chars.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {
namespace {

const Value& arg(const char* test, CallArgs& a) {
  if (a.args.empty()) runtime_error(fmt::format("test '{}' needs an argument", test));
  return a.args[0];
}

// value % num == expected, with Python's % (floats work, strings raise).
bool mod_equals(Renderer& r, const Value& v, const Value& num, int64_t expected) {
  return equal(binary_op(BinOp::Mod, v, num, r.budget()), Value::integer(expected));
}

bool t_defined(Renderer&, const Value& v, CallArgs&) {
  return !v.is_undefined();
}
bool t_undefined(Renderer&, const Value& v, CallArgs&) {
  return v.is_undefined();
}
bool t_none(Renderer&, const Value& v, CallArgs&) {
  return v.is_none();
}
bool t_string(Renderer&, const Value& v, CallArgs&) {
  return v.is_string();
}
bool t_number(Renderer&, const Value& v, CallArgs&) {
  return v.is_number();
}
bool t_integer(Renderer&, const Value& v, CallArgs&) {
  return v.kind() == Kind::Int;
}
bool t_float(Renderer&, const Value& v, CallArgs&) {
  return v.kind() == Kind::Float;
}
bool t_boolean(Renderer&, const Value& v, CallArgs&) {
  return v.kind() == Kind::Bool;
}
bool t_true(Renderer&, const Value& v, CallArgs&) {
  return v.kind() == Kind::Bool && v.as_bool();
}
bool t_false(Renderer&, const Value& v, CallArgs&) {
  return v.kind() == Kind::Bool && !v.as_bool();
}
bool t_mapping(Renderer&, const Value& v, CallArgs&) {
  return v.is_dict();
}
// Python callable(): jinja2's Undefined and LoopContext define __call__ too.
bool t_callable(Renderer&, const Value& v, CallArgs&) {
  return v.kind() == Kind::Callable || v.kind() == Kind::Loop || v.is_undefined();
}

// iter(value) succeeds: str, list-likes, dict, and jinja2's Undefined.
bool t_iterable(Renderer&, const Value& v, CallArgs&) {
  return v.is_undefined() || v.is_string() || v.is_list() || v.is_dict() || v.kind() == Kind::Loop;
}

// len(value) and value.__getitem__ both exist: str, list, tuple, range, dict, Undefined.
bool t_sequence(Renderer&, const Value& v, CallArgs&) {
  if (v.is_undefined() || v.is_string() || v.is_dict()) return true;
  if (!v.is_list()) return false;
  const Seq s = v.list_data().seq;
  return s == Seq::List || s == Seq::Tuple || s == Seq::Range;
}

bool t_odd(Renderer& r, const Value& v, CallArgs&) {
  return mod_equals(r, v, Value::integer(2), 1);
}
bool t_even(Renderer& r, const Value& v, CallArgs&) {
  return mod_equals(r, v, Value::integer(2), 0);
}
bool t_divisibleby(Renderer& r, const Value& v, CallArgs& a) {
  return mod_equals(r, v, arg("divisibleby", a), 0);
}

bool t_eq(Renderer&, const Value& v, CallArgs& a) {
  return equal(v, arg("eq", a));
}
bool t_ne(Renderer&, const Value& v, CallArgs& a) {
  return !equal(v, arg("ne", a));
}
bool t_lt(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Lt, v, arg("lt", a));
}
bool t_le(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Le, v, arg("le", a));
}
bool t_gt(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Gt, v, arg("gt", a));
}
bool t_ge(Renderer&, const Value& v, CallArgs& a) {
  return compare(CmpOp::Ge, v, arg("ge", a));
}
bool t_in(Renderer&, const Value& v, CallArgs& a) {
  return contains(arg("in", a), v);
}

// `is sameas`: Python identity. None/True/False are singletons; other values are the same
// object only when they share storage.
bool t_sameas(Renderer&, const Value& v, CallArgs& a) {
  const Value& other = arg("sameas", a);
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Kind::None:
    case Kind::Undefined:
      return v.kind() == Kind::None;
    case Kind::Bool:
      return v.as_bool() == other.as_bool();
    case Kind::Int:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Kind::Float:
      return false;
    default:
      return v.identity() == other.identity();
  }
}

bool t_lower(Renderer&, const Value& v, CallArgs&) {
  bool cased = false;
  for (char32_t c : utf8::decode(to_str(v))) {
    if (uni::is_upper(c)) return false;
    cased = cased || uni::is_lower(c);
  }
  return cased;
}

bool t_upper(Renderer&, const Value& v, CallArgs&) {
  bool cased = false;
  for (char32_t c : utf8::decode(to_str(v))) {
    if (uni::is_lower(c)) return false;
    cased = cased || uni::is_upper(c);
  }
  return cased;
}

bool t_escaped(Renderer&, const Value& v, CallArgs&) {
  return v.is_string() && v.is_markup();
}

bool t_filter(Renderer&, const Value& v, CallArgs&) {
  return v.is_string() && find_filter(v.str()) != nullptr;
}
bool t_test(Renderer&, const Value& v, CallArgs&) {
  return v.is_string() && find_test(v.str()) != nullptr;
}

}  // namespace

std::vector<TestDef> builtin_tests() {
  return {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"string", t_string},
      {"number", t_number},
      {"integer", t_integer},
      {"float", t_float},
      {"boolean", t_boolean},
      {"true", t_true},
      {"false", t_false},
      {"mapping", t_mapping},
      {"callable", t_callable},
      {"iterable", t_iterable},
      {"sequence", t_sequence},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"==", t_eq},
      {"ne", t_ne},
      {"!=", t_ne},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<", t_lt},
      {"le", t_le},
      {"<=", t_le},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">", t_gt},
      {"ge", t_ge},
      {">=", t_ge},
      {"in", t_in},
      {"sameas", t_sameas},
      {"lower", t_lower},
      {"upper", t_upper},
      {"escaped", t_escaped},
      {"filter", t_filter},
      {"test", t_test},
  };
}

}  // namespace strata::jinja
