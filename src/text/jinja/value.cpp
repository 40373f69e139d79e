#include "text/jinja/value.h"

#include <fmt/format.h>

#include <cmath>

#include "text/jinja/error.h"
#include "text/jinja/py_format.h"

namespace strata::jinja {

// ---- construction and access ----------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.obj_ = std::make_shared<std::string>(std::move(hint));
  return v;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = d;
  return v;
}

Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.obj_ = std::make_shared<StringData>(StringData{std::move(s), markup});
  return v;
}

Value Value::list(std::vector<Value> items, Seq seq) {
  Value v;
  v.kind_ = Kind::List;
  auto data = std::make_shared<ListData>();
  data->items = std::move(items);
  data->seq = seq;
  v.obj_ = std::move(data);
  return v;
}

Value Value::range(int64_t start, int64_t stop, int64_t step, std::vector<Value> items) {
  Value v = list(std::move(items), Seq::Range);
  auto& data = *static_cast<ListData*>(v.obj_.get());
  data.range_start = start;
  data.range_stop = stop;
  data.range_step = step;
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::Dict;
  v.obj_ = std::make_shared<Dict>(std::move(d));
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.obj_ = std::make_shared<NamespaceData>(NamespaceData{std::move(attrs)});
  return v;
}

Value Value::callable(std::string name, std::function<Value(Renderer&, CallArgs&)> fn,
                      bool is_macro) {
  Value v;
  v.kind_ = Kind::Callable;
  v.obj_ = std::make_shared<CallableData>(CallableData{std::move(name), std::move(fn), is_macro});
  return v;
}

Value Value::loop(LoopData data) {
  Value v;
  v.kind_ = Kind::Loop;
  v.obj_ = std::make_shared<LoopData>(std::move(data));
  return v;
}

const std::string& Value::str() const {
  return static_cast<const StringData*>(obj_.get())->text;
}
bool Value::is_markup() const {
  return static_cast<const StringData*>(obj_.get())->markup;
}
const ListData& Value::list_data() const {
  return *static_cast<const ListData*>(obj_.get());
}
const Dict& Value::dict() const {
  return *static_cast<const Dict*>(obj_.get());
}
NamespaceData& Value::ns() const {
  return *static_cast<NamespaceData*>(obj_.get());
}
const CallableData& Value::callable() const {
  return *static_cast<const CallableData*>(obj_.get());
}
const LoopData& Value::loop() const {
  return *static_cast<const LoopData*>(obj_.get());
}

std::string Value::undefined_message() const {
  if (obj_) return *static_cast<const std::string*>(obj_.get());
  return "value is undefined";
}

// ---- Dict -------------------------------------------------------------------------------------

namespace {

bool hashable(const Value& v) {
  switch (v.kind()) {
    case Kind::List:
      if (v.list_data().seq != Seq::Tuple) return false;
      for (const auto& item : v.items())
        if (!hashable(item)) return false;
      return true;
    case Kind::Dict:
      return false;
    default:
      return true;
  }
}

}  // namespace

const Value* Dict::find(std::string_view key) const {
  auto it = by_string_.find(key);
  return it == by_string_.end() ? nullptr : &entries_[it->second].second;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(std::string_view(key.str()));
  for (size_t pos : other_keys_)
    if (equal(entries_[pos].first, key)) return &entries_[pos].second;
  return nullptr;
}

void Dict::set(Value key, Value value) {
  if (key.is_string()) {
    auto it = by_string_.find(std::string_view(key.str()));
    if (it != by_string_.end()) {
      entries_[it->second].second = std::move(value);
      return;
    }
    by_string_.emplace(key.str(), entries_.size());
    entries_.emplace_back(std::move(key), std::move(value));
    return;
  }
  if (!hashable(key)) runtime_error(fmt::format("unhashable type: '{}'", type_name(key)));
  for (size_t pos : other_keys_) {
    if (equal(entries_[pos].first, key)) {
      entries_[pos].second = std::move(value);
      return;
    }
  }
  other_keys_.push_back(entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
}

// ---- Python object protocol -----------------------------------------------------------------

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return false;
    case Kind::Bool:
      return v.as_bool();
    case Kind::Int:
      return v.as_int() != 0;
    case Kind::Float:
      return v.as_float() != 0.0;
    case Kind::String:
      return !v.str().empty();
    case Kind::List:
      return v.list_data().seq == Seq::Iterator || !v.items().empty();
    case Kind::Dict:
      return !v.dict().empty();
    default:
      return true;
  }
}

namespace {

bool int_equals_float(int64_t i, double f) {
  // Python compares int and float exactly; a double outside int64 range cannot equal an int64.
  if (!std::isfinite(f) || f != std::floor(f)) return false;
  if (f < -9223372036854775808.0 || f >= 9223372036854775808.0) return false;
  return static_cast<int64_t>(f) == i;
}

// Set equality of two dict_keys / dict_items views.
bool same_members(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (const auto& x : a) {
    bool found = false;
    for (const auto& y : b) {
      if (equal(x, y)) {
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Kind::Float && b.kind() == Kind::Float) return a.as_float() == b.as_float();
    if (a.kind() == Kind::Float) return int_equals_float(b.as_int(), a.as_float());
    if (b.kind() == Kind::Float) return int_equals_float(a.as_int(), b.as_float());
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Undefined:
    case Kind::None:
      return true;
    case Kind::String:
      return a.str() == b.str();
    case Kind::List: {
      const auto& la = a.list_data();
      const auto& lb = b.list_data();
      if (la.seq == Seq::Iterator || lb.seq == Seq::Iterator || la.seq == Seq::DictValues ||
          lb.seq == Seq::DictValues)
        return a.identity() == b.identity();
      if ((la.seq == Seq::DictKeys || la.seq == Seq::DictItems) &&
          (lb.seq == Seq::DictKeys || lb.seq == Seq::DictItems))
        return same_members(la.items, lb.items);
      if (la.seq != lb.seq) return false;
      if (la.items.size() != lb.items.size()) return false;
      for (size_t i = 0; i < la.items.size(); ++i)
        if (!equal(la.items[i], lb.items[i])) return false;
      return true;
    }
    case Kind::Dict: {
      const auto& da = a.dict();
      const auto& db = b.dict();
      if (da.size() != db.size()) return false;
      for (const auto& [k, v] : da.entries()) {
        const Value* other = db.find(k);
        if (!other || !equal(v, *other)) return false;
      }
      return true;
    }
    default:
      return a.identity() == b.identity();
  }
}

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "Undefined";
    case Kind::None:
      return "NoneType";
    case Kind::Bool:
      return "bool";
    case Kind::Int:
      return "int";
    case Kind::Float:
      return "float";
    case Kind::String:
      return v.is_markup() ? "Markup" : "str";
    case Kind::List:
      switch (v.list_data().seq) {
        case Seq::List:
          return "list";
        case Seq::Tuple:
          return "tuple";
        case Seq::Iterator:
          return "generator";
        case Seq::Range:
          return "range";
        case Seq::DictKeys:
          return "dict_keys";
        case Seq::DictValues:
          return "dict_values";
        case Seq::DictItems:
          return "dict_items";
      }
      return "list";
    case Kind::Dict:
      return "dict";
    case Kind::Namespace:
      return "Namespace";
    case Kind::Callable:
      return "function";
    case Kind::Loop:
      return "LoopContext";
  }
  return "object";
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Kind::Undefined:
      return "";
    case Kind::String:
      return v.str();
    default:
      return repr(v);
  }
}

namespace {

// Self-containing namespaces would recurse forever; Python prints "..." at the repeat.
constexpr int kMaxReprDepth = 200;

void append_repr(std::string& out, const Value& v, int depth);

void append_items(std::string& out, const std::vector<Value>& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr(out, items[i], depth + 1);
  }
}

void append_dict(std::string& out, const Dict& d, int depth) {
  out += '{';
  bool first = true;
  for (const auto& [k, val] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    append_repr(out, k, depth + 1);
    out += ": ";
    append_repr(out, val, depth + 1);
  }
  out += '}';
}

void append_repr(std::string& out, const Value& v, int depth) {
  if (depth > kMaxReprDepth) {
    out += "...";
    return;
  }
  switch (v.kind()) {
    case Kind::Undefined:
      out += "Undefined";
      return;
    case Kind::None:
      out += "None";
      return;
    case Kind::Bool:
      out += v.as_bool() ? "True" : "False";
      return;
    case Kind::Int:
      out += std::to_string(v.as_int());
      return;
    case Kind::Float:
      out += float_repr(v.as_float());
      return;
    case Kind::String:
      if (v.is_markup()) {
        out += "Markup(" + str_repr(v.str()) + ")";
      } else {
        out += str_repr(v.str());
      }
      return;
    case Kind::List: {
      const auto& l = v.list_data();
      switch (l.seq) {
        case Seq::List:
          out += '[';
          append_items(out, l.items, depth);
          out += ']';
          return;
        case Seq::Tuple:
          out += '(';
          append_items(out, l.items, depth);
          if (l.items.size() == 1) out += ',';
          out += ')';
          return;
        case Seq::Iterator:
          out += "<generator object>";
          return;
        case Seq::Range:
          out += l.range_step == 1
                     ? fmt::format("range({}, {})", l.range_start, l.range_stop)
                     : fmt::format("range({}, {}, {})", l.range_start, l.range_stop, l.range_step);
          return;
        case Seq::DictKeys:
        case Seq::DictValues:
        case Seq::DictItems:
          out += type_name(v);
          out += "([";
          append_items(out, l.items, depth);
          out += "])";
          return;
      }
      return;
    }
    case Kind::Dict:
      append_dict(out, v.dict(), depth);
      return;
    case Kind::Namespace:
      out += "<Namespace ";
      append_dict(out, v.ns().attrs, depth);
      out += '>';
      return;
    case Kind::Callable:
      out += "<function " + v.callable().name + ">";
      return;
    case Kind::Loop: {
      const auto& l = v.loop();
      out += fmt::format("<LoopContext {}/{}>", l.index0 + 1, l.items->size());
      return;
    }
  }
}

}  // namespace

std::string repr(const Value& v) {
  std::string out;
  append_repr(out, v, 0);
  return out;
}

}  // namespace strata::jinja
