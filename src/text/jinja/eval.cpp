// Expression evaluation for the Renderer.
#include <fmt/format.h>

#include <new>

#include "text/jinja/access.h"
#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/renderer.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {

namespace {

// Steps charged for handing a value to a filter, test, method or comparison: one per item of a
// list or dict, one per 256 bytes of a string.
uint64_t size_cost(const Value& v) {
  switch (v.kind()) {
    case Kind::String:
      return v.str().size() / 256;
    case Kind::List:
      return v.items().size();
    case Kind::Dict:
      return v.dict().size();
    default:
      return 0;
  }
}

uint64_t args_cost(const CallArgs& a) {
  uint64_t n = 0;
  for (const auto& v : a.args)
    n += size_cost(v);
  for (const auto& kv : a.kwargs)
    n += size_cost(kv.second);
  return n;
}

}  // namespace

Value Renderer::eval(const Expr& e) {
  budget_.step();
  try {
    EvalDepth depth(*this);
    return eval_inner(e);
  } catch (TemplateError& err) {
    err.locate(e.line);
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError(TemplateError::Kind::Limit, "out of memory while rendering", e.line);
  } catch (const std::length_error& err) {
    throw TemplateError(TemplateError::Kind::Limit, err.what(), e.line);
  }
}

Value Renderer::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return it->second;
  }
  if (variables_) {
    if (const Value* v = variables_->find(name)) return *v;
  }
  if (const Value* v = builtin_globals().find(name)) return *v;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

CallArgs Renderer::eval_args(const CallArgsExpr& a) {
  CallArgs out;
  for (const auto& e : a.args)
    out.args.push_back(eval(*e));
  if (a.star) {
    const auto extra = iterate(eval(*a.star));
    out.args.insert(out.args.end(), extra->begin(), extra->end());
  }
  for (const auto& [key, e] : a.kwargs)
    out.kwargs.emplace_back(key, eval(*e));
  if (a.double_star) {
    const Value d = eval(*a.double_star);
    if (!d.is_dict())
      runtime_error(fmt::format("argument after ** must be a mapping, not {}", type_name(d)));
    for (const auto& [k, v] : d.dict().entries()) {
      if (!k.is_string()) runtime_error("keywords must be strings");
      out.kwargs.emplace_back(k.str(), v);
    }
  }
  return out;
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  switch (callee.kind()) {
    case Kind::Callable:
      return callee.callable().fn(*this, args);
    case Kind::Loop: {
      const LoopData& loop = callee.loop();
      if (!loop.recurse) runtime_error("The loop must be recursive to be called");
      if (args.args.size() != 1 || !args.kwargs.empty())
        runtime_error("loop() takes exactly one argument, the items to recurse into");
      return loop.recurse(*this, args.args[0]);
    }
    case Kind::Undefined:
      fail_undefined(callee);
    default:
      runtime_error(fmt::format("'{}' object is not callable", type_name(callee)));
  }
}

Value Renderer::call_filter(const std::string& name, const Value& input, CallArgs& args) {
  const FilterDef* def = find_filter(name);
  if (!def) runtime_error(fmt::format("No filter named '{}'.", name));
  return def->fn(*this, input, args);
}

bool Renderer::call_test(const std::string& name, const Value& input, CallArgs& args) {
  const TestDef* def = find_test(name);
  if (!def) runtime_error(fmt::format("No test named '{}'.", name));
  return def->fn(*this, input, args);
}

Value Renderer::eval_filter(const FilterExpr& f) {
  const Value input = f.value ? eval(*f.value) : *block_input_;
  if (!f.def) runtime_error(fmt::format("No filter named '{}' found.", f.name));
  CallArgs args = eval_args(f.args);
  budget_.steps((f.def->scans ? size_cost(input) : 0) + args_cost(args));
  return f.def->fn(*this, input, args);
}

Value Renderer::eval_getitem(const GetitemExpr& g) {
  const Value obj = eval(*g.obj);
  if (g.key->kind == ExprKind::Slice) {
    const auto& s = static_cast<const SliceExpr&>(*g.key);
    auto bound = [&](const ExprPtr& e) { return e ? eval(*e) : Value::none(); };
    const Value start = bound(s.start), stop = bound(s.stop), step = bound(s.step);
    return slice(obj, start, stop, step, budget_);
  }
  return getitem(obj, eval(*g.key));
}

Value Renderer::eval_compare(const CompareExpr& c) {
  Value left = eval(*c.first);
  for (const auto& [op, expr] : c.rest) {
    Value right = eval(*expr);
    budget_.steps(size_cost(left) + size_cost(right));
    if (!compare(op, left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Renderer::eval_inner(const Expr& e) {
  switch (e.kind) {
    case ExprKind::Const:
      return static_cast<const ConstExpr&>(e).value;
    case ExprKind::Name:
      return lookup(static_cast<const NameExpr&>(e).name);
    case ExprKind::List:
    case ExprKind::Tuple: {
      const auto& s = static_cast<const SeqExpr&>(e);
      std::vector<Value> items;
      items.reserve(s.items.size());
      for (const auto& i : s.items)
        items.push_back(eval(*i));
      budget_.charge(items.size() * sizeof(Value));
      return Value::list(std::move(items), e.kind == ExprKind::List ? Seq::List : Seq::Tuple);
    }
    case ExprKind::Dict: {
      Dict d;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        Value key = eval(*k);
        d.set(std::move(key), eval(*v));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::Getattr: {
      const auto& g = static_cast<const GetattrExpr&>(e);
      const Value obj = eval(*g.obj);
      Value attr = getattr(obj, g.attr);
      if (attr.kind() == Kind::Callable) budget_.steps(size_cost(obj));  // a method will scan obj
      return attr;
    }
    case ExprKind::Getitem:
      return eval_getitem(static_cast<const GetitemExpr&>(e));
    case ExprKind::Slice:
      runtime_error("a slice is only valid inside []");
    case ExprKind::Call: {
      const auto& c = static_cast<const CallExpr&>(e);
      const Value callee = eval(*c.callee);
      CallArgs args = eval_args(c.args);
      if (callee.kind() != Kind::Callable || !callee.callable().is_macro)
        budget_.steps(args_cost(args));
      return call(callee, args);
    }
    case ExprKind::Filter:
      return eval_filter(static_cast<const FilterExpr&>(e));
    case ExprKind::Test: {
      const auto& t = static_cast<const TestExpr&>(e);
      const Value input = eval(*t.value);
      if (!t.def) runtime_error(fmt::format("No test named '{}' found.", t.name));
      CallArgs args = eval_args(t.args);
      budget_.steps(args_cost(args));  // type tests are O(1); `in` / `eq` scan their argument
      return Value::boolean(t.def->fn(*this, input, args));
    }
    case ExprKind::Neg:
      return negate(eval(*static_cast<const UnaryExpr&>(e).operand));
    case ExprKind::Pos:
      return unary_plus(eval(*static_cast<const UnaryExpr&>(e).operand));
    case ExprKind::Not:
      return Value::boolean(!truthy(eval(*static_cast<const UnaryExpr&>(e).operand)));
    case ExprKind::Binary: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      const Value left = eval(*b.left);
      return binary_op(b.op, left, eval(*b.right), budget_);
    }
    case ExprKind::And: {  // Python's and/or return an operand, not a bool
      const auto& b = static_cast<const BinaryExpr&>(e);
      Value left = eval(*b.left);
      return truthy(left) ? eval(*b.right) : left;
    }
    case ExprKind::Or: {
      const auto& b = static_cast<const BinaryExpr&>(e);
      Value left = eval(*b.left);
      return truthy(left) ? left : eval(*b.right);
    }
    case ExprKind::Compare:
      return eval_compare(static_cast<const CompareExpr&>(e));
    case ExprKind::Cond: {
      const auto& c = static_cast<const CondExpr&>(e);
      if (truthy(eval(*c.test))) return eval(*c.then);
      if (c.otherwise) return eval(*c.otherwise);
      return Value::undefined(fmt::format(
          "the inline if-expression on line {} evaluated to false and no else section was defined.",
          e.line));
    }
    case ExprKind::Concat: {
      std::vector<Value> parts;
      for (const auto& p : static_cast<const ConcatExpr&>(e).parts)
        parts.push_back(eval(*p));
      return concat(parts, budget_);
    }
  }
  runtime_error("unknown expression");
}

}  // namespace strata::jinja
