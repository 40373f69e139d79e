#include "text/jinja/access.h"

#include <fmt/format.h>

#include "text/jinja/call_args.h"
#include "text/jinja/error.h"
#include "text/jinja/methods.h"
#include "text/jinja/py_format.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {
namespace {

// jinja2.utils.object_type_repr
std::string object_type_repr(const Value& obj) {
  if (obj.is_none()) return "None";
  if (obj.kind() == Kind::Namespace) return "jinja2.utils.Namespace object";
  if (obj.kind() == Kind::Loop) return "jinja2.runtime.LoopContext object";
  return fmt::format("{} object", type_name(obj));
}

Value loop_attr(const Value& obj, const std::string& name) {
  const LoopData& l = obj.loop();
  const auto n = static_cast<int64_t>(l.items->size());
  const auto i = static_cast<int64_t>(l.index0);
  if (name == "index") return Value::integer(i + 1);
  if (name == "index0") return Value::integer(i);
  if (name == "revindex") return Value::integer(n - i);
  if (name == "revindex0") return Value::integer(n - i - 1);
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i == n - 1);
  if (name == "length") return Value::integer(n);
  if (name == "depth") return Value::integer(l.depth0 + 1);
  if (name == "depth0") return Value::integer(l.depth0);
  if (name == "previtem") {
    return i > 0 ? (*l.items)[static_cast<size_t>(i - 1)]
                 : Value::undefined("there is no previous item");
  }
  if (name == "nextitem") {
    return i + 1 < n ? (*l.items)[static_cast<size_t>(i + 1)]
                     : Value::undefined("there is no next item");
  }
  if (name == "cycle") {
    return Value::callable("loop.cycle", [i](Renderer&, CallArgs& call) -> Value {
      if (call.args.empty()) runtime_error("no items for cycling given");
      return call.args[static_cast<size_t>(i) % call.args.size()];
    });
  }
  if (name == "changed") {
    auto state = l.last_changed;
    return Value::callable("loop.changed", [state](Renderer&, CallArgs& call) -> Value {
      // LoopContext.changed(*value): True when the arguments differ from the previous call's.
      bool same = state->size() == call.args.size() + 1;  // slot 0 marks "called before"
      for (size_t k = 0; same && k < call.args.size(); ++k)
        same = equal((*state)[k + 1], call.args[k]);
      if (same) return Value::boolean(false);
      state->assign(1, Value::none());
      state->insert(state->end(), call.args.begin(), call.args.end());
      return Value::boolean(true);
    });
  }
  return Value::undefined(missing_attribute(obj, Value::string(name)));
}

// Python sequence index with negatives; nullopt when out of range.
std::optional<size_t> seq_index(int64_t i, size_t size) {
  const auto n = static_cast<int64_t>(size);
  if (i < 0) i += n;
  if (i < 0 || i >= n) return std::nullopt;
  return static_cast<size_t>(i);
}

bool subscriptable_list(const Value& v) {
  const Seq s = v.list_data().seq;
  return s == Seq::List || s == Seq::Tuple || s == Seq::Range;
}

struct SliceIndices {
  int64_t start, stop, step, count;
};

// CPython PySlice_AdjustIndices.
SliceIndices adjust_slice(const Value& start, const Value& stop, const Value& step, int64_t len) {
  SliceIndices r{};
  r.step = step.is_none() ? 1 : step.as_int();
  if (r.step == 0) runtime_error("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none()) return dflt;
    int64_t x = v.as_int();
    if (x < 0) {
      x += len;
      if (x < 0) x = r.step < 0 ? -1 : 0;
    } else if (x >= len) {
      x = r.step < 0 ? len - 1 : len;
    }
    return x;
  };
  r.start = clamp(start, r.step < 0 ? len - 1 : 0);
  r.stop = clamp(stop, r.step < 0 ? -1 : len);
  if (r.step > 0) {
    r.count = r.start < r.stop ? (r.stop - r.start - 1) / r.step + 1 : 0;
  } else {
    r.count = r.stop < r.start ? (r.start - r.stop - 1) / (-r.step) + 1 : 0;
  }
  return r;
}

}  // namespace

std::string missing_attribute(const Value& obj, const Value& name) {
  if (!name.is_string())
    return fmt::format("{} has no element {}", object_type_repr(obj), repr(name));
  return fmt::format("{} has no attribute {}", str_repr(object_type_repr(obj)),
                     str_repr(name.str()));
}

Value getattr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Kind::Undefined:
      fail_undefined(obj);
    case Kind::Namespace:
      if (const Value* v = obj.ns().attrs.find(name)) return *v;
      break;
    case Kind::Loop:
      return loop_attr(obj, name);
    case Kind::Dict:
      if (auto m = method_of(obj, name)) return *m;
      if (const Value* v = obj.dict().find(name)) return *v;
      break;
    case Kind::Bool:
    case Kind::Int:
    case Kind::Float:
      // numbers.Number's attributes; int methods are not needed by templates.
      if (name == "real") return obj.kind() == Kind::Float ? obj : Value::integer(obj.as_int());
      if (name == "imag")
        return obj.kind() == Kind::Float ? Value::floating(0.0) : Value::integer(0);
      break;
    default:
      if (auto m = method_of(obj, name)) return *m;
      break;
  }
  return Value::undefined(missing_attribute(obj, Value::string(name)));
}

Value getitem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Kind::Undefined:
      fail_undefined(obj);
    case Kind::String:
      if (key.is_int_like()) {
        const std::u32string cps = utf8::decode(obj.str());
        if (auto i = seq_index(key.as_int(), cps.size()))
          return Value::string(utf8::encode(cps.substr(*i, 1)), obj.is_markup());
        return Value::undefined(missing_attribute(obj, key));
      }
      break;
    case Kind::List:
      if (subscriptable_list(obj) && key.is_int_like()) {
        if (auto i = seq_index(key.as_int(), obj.items().size())) return obj.items()[*i];
        return Value::undefined(missing_attribute(obj, key));
      }
      break;
    case Kind::Dict:
      if (key.is_list() && !key.is_seq(Seq::Tuple)) break;  // unhashable: TypeError, swallowed
      if (key.is_dict()) break;
      if (const Value* v = obj.dict().find(key)) return *v;
      break;
    default:
      break;
  }
  // Item lookup failed: jinja2 falls back to the attribute when the key is a string.
  if (key.is_string()) {
    if (obj.kind() == Kind::Namespace || obj.kind() == Kind::Loop) return getattr(obj, key.str());
    if (auto m = method_of(obj, key.str())) return *m;
  }
  return Value::undefined(missing_attribute(obj, key));
}

Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step,
            Budget& budget) {
  // jinja2 compiles slices to plain Python subscription (not environment.getitem), so every
  // TypeError here reaches the template.
  if (obj.is_undefined()) fail_undefined(obj);
  const bool is_str = obj.is_string();
  if (obj.is_dict()) runtime_error("unhashable type: 'slice'");
  if (!is_str && !(obj.is_list() && subscriptable_list(obj)))
    runtime_error(fmt::format("'{}' object is not subscriptable", type_name(obj)));
  for (const Value* bound : {&start, &stop, &step}) {
    if (!bound->is_none() && !bound->is_int_like())
      runtime_error("slice indices must be integers or None or have an __index__ method");
  }

  if (is_str) {
    const std::u32string cps = utf8::decode(obj.str());
    const SliceIndices r = adjust_slice(start, stop, step, static_cast<int64_t>(cps.size()));
    std::u32string out;
    out.reserve(static_cast<size_t>(r.count));
    for (int64_t k = 0, i = r.start; k < r.count; ++k, i += r.step)
      out.push_back(cps[static_cast<size_t>(i)]);
    std::string text = utf8::encode(out);
    budget.charge(text.size());
    return Value::string(std::move(text), obj.is_markup());
  }
  const auto& items = obj.items();
  const SliceIndices r = adjust_slice(start, stop, step, static_cast<int64_t>(items.size()));
  budget.charge(static_cast<size_t>(r.count) * sizeof(Value));
  std::vector<Value> out;
  out.reserve(static_cast<size_t>(r.count));
  for (int64_t k = 0, i = r.start; k < r.count; ++k, i += r.step)
    out.push_back(items[static_cast<size_t>(i)]);
  const ListData& data = obj.list_data();
  if (data.seq == Seq::Range) {
    const int64_t new_start = data.range_start + r.start * data.range_step;
    const int64_t new_step = data.range_step * r.step;
    const int64_t new_stop = data.range_start + r.stop * data.range_step;
    return Value::range(new_start, new_stop, new_step, std::move(out));
  }
  return Value::list(std::move(out), data.seq);
}

std::shared_ptr<const std::vector<Value>> iterate(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return std::make_shared<const std::vector<Value>>();
    case Kind::List: {
      const ListData& data = v.list_data();
      if (data.seq == Seq::Iterator) {
        if (data.consumed) return std::make_shared<const std::vector<Value>>();
        data.consumed = true;
      }
      return v.shared_items();
    }
    case Kind::String: {
      std::vector<Value> chars;
      for (char32_t c : utf8::decode(v.str())) {
        std::string s;
        utf8::append(s, c);
        chars.push_back(Value::string(std::move(s)));
      }
      return std::make_shared<const std::vector<Value>>(std::move(chars));
    }
    case Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict().size());
      for (const auto& e : v.dict().entries())
        keys.push_back(e.first);
      return std::make_shared<const std::vector<Value>>(std::move(keys));
    }
    default:
      runtime_error(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return 0;
    case Kind::String:
      return static_cast<int64_t>(utf8::length(v.str()));
    case Kind::List:
      if (v.list_data().seq != Seq::Iterator) return static_cast<int64_t>(v.items().size());
      break;
    case Kind::Dict:
      return static_cast<int64_t>(v.dict().size());
    default:
      break;
  }
  runtime_error(fmt::format("object of type '{}' has no len()", type_name(v)));
}

}  // namespace strata::jinja
