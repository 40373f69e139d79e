#include "text/jinja/value_ops.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "text/jinja/error.h"
#include "text/jinja/str_format.h"

namespace strata::jinja {

void fail_undefined(const Value& v) {
  runtime_error(v.undefined_message());
}

namespace {

const char* op_symbol(BinOp op) {
  switch (op) {
    case BinOp::Add:
      return "+";
    case BinOp::Sub:
      return "-";
    case BinOp::Mul:
      return "*";
    case BinOp::Div:
      return "/";
    case BinOp::FloorDiv:
      return "//";
    case BinOp::Mod:
      return "%";
    case BinOp::Pow:
      return "** or pow()";
  }
  return "?";
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  runtime_error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op_symbol(op),
                            type_name(a), type_name(b)));
}

[[noreturn]] void int_overflow() {
  runtime_error("integer result does not fit in 64 bits (Python would use a big integer)");
}

int64_t add_checked(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_add_overflow(x, y, &r)) int_overflow();
  return r;
}

int64_t sub_checked(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_sub_overflow(x, y, &r)) int_overflow();
  return r;
}

int64_t mul_checked(int64_t x, int64_t y) {
  int64_t r;
  if (__builtin_mul_overflow(x, y, &r)) int_overflow();
  return r;
}

// Python float floor division and modulo (Objects/floatobject.c float_divmod).
void float_divmod(double vx, double wx, double* div_out, double* mod_out) {
  if (wx == 0.0) runtime_error("float division by zero");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

Value int_pow(int64_t base, int64_t exp) {
  if (exp < 0) {
    if (base == 0) runtime_error("0.0 cannot be raised to a negative power");
    return Value::floating(std::pow(static_cast<double>(base), static_cast<double>(exp)));
  }
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) result = mul_checked(result, base);
    exp >>= 1;
    if (exp > 0) base = mul_checked(base, base);
  }
  return Value::integer(result);
}

Value numeric_op(BinOp op, const Value& a, const Value& b) {
  const bool both_int = a.is_int_like() && b.is_int_like();
  if (both_int) {
    const int64_t x = a.as_int(), y = b.as_int();
    switch (op) {
      case BinOp::Add:
        return Value::integer(add_checked(x, y));
      case BinOp::Sub:
        return Value::integer(sub_checked(x, y));
      case BinOp::Mul:
        return Value::integer(mul_checked(x, y));
      case BinOp::Div:
        if (y == 0) runtime_error("division by zero");
        return Value::floating(static_cast<double>(x) / static_cast<double>(y));
      case BinOp::FloorDiv:
      case BinOp::Mod: {
        if (y == 0) runtime_error("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) {
          if (op == BinOp::FloorDiv) int_overflow();
          return Value::integer(0);
        }
        int64_t q = x / y, m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          m += y;
          q -= 1;
        }
        return Value::integer(op == BinOp::FloorDiv ? q : m);
      }
      case BinOp::Pow:
        return int_pow(x, y);
    }
  }
  const double x = a.as_float(), y = b.as_float();
  switch (op) {
    case BinOp::Add:
      return Value::floating(x + y);
    case BinOp::Sub:
      return Value::floating(x - y);
    case BinOp::Mul:
      return Value::floating(x * y);
    case BinOp::Div:
      if (y == 0.0) runtime_error("float division by zero");
      return Value::floating(x / y);
    case BinOp::FloorDiv:
    case BinOp::Mod: {
      double d, m;
      float_divmod(x, y, &d, &m);
      return Value::floating(op == BinOp::FloorDiv ? d : m);
    }
    case BinOp::Pow:
      if (x == 0.0 && y < 0) runtime_error("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y))
        runtime_error("a negative number to a fractional power is complex, not supported");
      return Value::floating(std::pow(x, y));
  }
  unsupported(op, a, b);
}

bool is_plain_sequence(const Value& v) {
  return v.is_seq(Seq::List) || v.is_seq(Seq::Tuple);
}

Value repeat(const Value& seq, int64_t n, Budget& budget) {
  if (n < 0) n = 0;
  if (seq.is_string()) {
    budget.charge(seq.str().size() * static_cast<size_t>(n));
    std::string out;
    out.reserve(seq.str().size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      out += seq.str();
    return Value::string(std::move(out), seq.is_markup());
  }
  budget.charge(seq.items().size() * static_cast<size_t>(n) * sizeof(Value));
  std::vector<Value> out;
  for (int64_t i = 0; i < n; ++i)
    out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::list(std::move(out), seq.list_data().seq);
}

Value add_strings(const Value& a, const Value& b, Budget& budget) {
  budget.charge(a.str().size() + b.str().size());
  // markupsafe: Markup + str escapes the plain operand and stays Markup (either order).
  if (a.is_markup() != b.is_markup()) {
    const std::string left = a.is_markup() ? a.str() : html_escape(a.str());
    const std::string right = b.is_markup() ? b.str() : html_escape(b.str());
    return Value::string(left + right, true);
  }
  return Value::string(a.str() + b.str(), a.is_markup());
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

Value binary_op(BinOp op, const Value& a, const Value& b, Budget& budget) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) return numeric_op(op, a, b);
  if (op == BinOp::Add) {
    if (a.is_string() && b.is_string()) return add_strings(a, b, budget);
    if (is_plain_sequence(a) && is_plain_sequence(b) && a.list_data().seq == b.list_data().seq) {
      budget.charge((a.items().size() + b.items().size()) * sizeof(Value));
      std::vector<Value> out = a.items();
      out.insert(out.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(out), a.list_data().seq);
    }
    if (a.is_string())
      runtime_error(fmt::format("can only concatenate str (not \"{}\") to str", type_name(b)));
    if (a.is_seq(Seq::List))
      runtime_error(fmt::format("can only concatenate list (not \"{}\") to list", type_name(b)));
  }
  if (op == BinOp::Mul) {
    if ((a.is_string() || is_plain_sequence(a)) && b.is_int_like())
      return repeat(a, b.as_int(), budget);
    if (a.is_int_like() && (b.is_string() || is_plain_sequence(b)))
      return repeat(b, a.as_int(), budget);
  }
  if (op == BinOp::Mod && a.is_string()) {
    std::string out = python_percent_format(a.str(), b);
    budget.charge(out.size());
    return Value::string(std::move(out), a.is_markup());
  }
  unsupported(op, a, b);
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int_like()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) int_overflow();
    return Value::integer(-v.as_int());
  }
  if (v.kind() == Kind::Float) return Value::floating(-v.as_float());
  runtime_error(fmt::format("bad operand type for unary -: '{}'", type_name(v)));
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int_like()) return Value::integer(v.as_int());
  if (v.kind() == Kind::Float) return v;
  runtime_error(fmt::format("bad operand type for unary +: '{}'", type_name(v)));
}

bool less_than(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_int_like() && b.is_int_like()) return a.as_int() < b.as_int();
    return a.as_float() < b.as_float();
  }
  if (a.is_string() && b.is_string()) return a.str() < b.str();  // UTF-8 order == code points
  if (is_plain_sequence(a) && is_plain_sequence(b) && a.list_data().seq == b.list_data().seq) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equal(x[i], y[i])) return less_than(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  runtime_error(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a),
                            type_name(b)));
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Kind::Undefined:
      return false;  // Undefined iterates as empty
    case Kind::String:
      if (!item.is_string()) {
        runtime_error(
            fmt::format("'in <string>' requires string as left operand, not {}", type_name(item)));
      }
      return container.str().find(item.str()) != std::string::npos;
    case Kind::List: {
      const auto& data = container.list_data();
      if (data.seq == Seq::Iterator) {
        if (data.consumed) return false;
        data.consumed = true;
      }
      for (const auto& x : data.items)
        if (equal(x, item)) return true;
      return false;
    }
    case Kind::Dict:
      if (item.is_list() && !item.is_seq(Seq::Tuple))
        runtime_error(fmt::format("unhashable type: '{}'", type_name(item)));
      if (item.is_dict()) runtime_error("unhashable type: 'dict'");
      return container.dict().find(item) != nullptr;
    default:
      runtime_error(fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}

bool compare(CmpOp op, const Value& a, const Value& b) {
  switch (op) {
    case CmpOp::Eq:
      return equal(a, b);
    case CmpOp::Ne:
      return !equal(a, b);
    case CmpOp::Lt:
      return less_than(a, b);
    case CmpOp::Gt:
      return less_than(b, a);
    case CmpOp::Le:
      return less_than(a, b) || equal(a, b);
    case CmpOp::Ge:
      return less_than(b, a) || equal(a, b);
    case CmpOp::In:
      return contains(b, a);
    case CmpOp::NotIn:
      return !contains(b, a);
  }
  return false;
}

Value concat(const std::vector<Value>& parts, Budget& budget) {
  std::string out;
  for (const auto& p : parts) {
    out += to_str(p);
    if (out.size() > budget.limits().max_output_bytes) budget.charge(out.size());
  }
  budget.charge(out.size());
  return Value::string(std::move(out));
}

}  // namespace strata::jinja
