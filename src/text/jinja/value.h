// The values a template computes with, modelled on the Python objects jinja2 sees when
// transformers renders a chat template: None, bool, int, float, str, list, tuple, dict (insertion
// ordered), the lazy iterators some filters return, jinja2's Undefined, namespace() objects,
// callables (macros, builtins, bound methods) and the loop object.
//
// Values are cheap to copy: everything beyond a scalar lives behind a shared_ptr. Lists, dicts and
// strings are immutable once built (the sandbox forbids list.append and friends, as jinja2's
// ImmutableSandboxedEnvironment does); only namespaces and the iterator's "consumed" flag change.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace strata::jinja {

class Value;
class Renderer;
struct CallArgs;

enum class Kind : uint8_t {
  Undefined,
  None,
  Bool,
  Int,
  Float,
  String,
  List,  // any sequence-like object; ListData::seq says which Python type it is
  Dict,
  Namespace,
  Callable,
  Loop,
};

// The Python type behind a Kind::List value. They share storage but differ in how they print,
// compare, index and measure.
enum class Seq : uint8_t {
  List,
  Tuple,
  Iterator,  // a generator / list_reverseiterator: single pass, no len(), always truthy
  Range,
  DictKeys,
  DictValues,
  DictItems,
};

struct ListData;
class Dict;
struct NamespaceData;
struct CallableData;
struct LoopData;

class Value {
 public:
  Value() = default;  // Undefined without a hint

  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s, bool markup = false);
  static Value list(std::vector<Value> items, Seq seq = Seq::List);
  static Value range(int64_t start, int64_t stop, int64_t step, std::vector<Value> items);
  static Value dict(Dict d);
  static Value make_namespace(Dict attrs);
  static Value callable(std::string name, std::function<Value(Renderer&, CallArgs&)> fn,
                        bool is_macro = false);
  static Value loop(LoopData data);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_int_like() const { return kind_ == Kind::Int || kind_ == Kind::Bool; }  // Python int
  bool is_number() const { return is_int_like() || kind_ == Kind::Float; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_seq(Seq s) const;
  bool is_dict() const { return kind_ == Kind::Dict; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? (b_ ? 1 : 0) : i_; }
  double as_float() const { return kind_ == Kind::Float ? f_ : static_cast<double>(as_int()); }
  const std::string& str() const;
  bool is_markup() const;
  const ListData& list_data() const;
  const std::vector<Value>& items() const;
  // The items, sharing ownership with this value (no copy).
  std::shared_ptr<const std::vector<Value>> shared_items() const;
  const Dict& dict() const;
  NamespaceData& ns() const;
  const CallableData& callable() const;
  const LoopData& loop() const;
  // Why this value is undefined, as jinja2 words it ("'x' is undefined").
  std::string undefined_message() const;
  // Identity of the shared object, for `is sameas` and namespace equality.
  const void* identity() const { return obj_.get(); }

 private:
  Kind kind_ = Kind::Undefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0.0;
  std::shared_ptr<void> obj_;
};

struct StringData {
  std::string text;  // UTF-8
  bool markup;       // markupsafe.Markup (from |safe or |escape): '+' escapes the other operand
};

struct ListData {
  std::vector<Value> items;
  Seq seq = Seq::List;
  mutable bool consumed = false;                            // Seq::Iterator only
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // Seq::Range only, for repr()
};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// A Python dict: insertion ordered, keys compared with Python equality (1 == 1.0 == True).
class Dict {
 public:
  using Entry = std::pair<Value, Value>;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<Entry>& entries() const { return entries_; }

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  // Inserts, or replaces the value of an equal key in place (Python keeps the first position).
  // Throws TemplateError for unhashable keys (list, dict).
  void set(Value key, Value value);

 private:
  std::vector<Entry> entries_;
  std::unordered_map<std::string, size_t, StringHash, std::equal_to<>> by_string_;
  std::vector<size_t> other_keys_;  // positions of keys that are not strings
};

struct NamespaceData {
  Dict attrs;
};

struct CallableData {
  std::string name;  // for messages: "macro 'm'", "str.upper", "range"...
  std::function<Value(Renderer&, CallArgs&)> fn;
  bool is_macro = false;  // macros take their arguments by reference: no per-item cost
};

// jinja2's LoopContext for one iteration of a for loop.
struct LoopData {
  std::shared_ptr<const std::vector<Value>> items;
  size_t index0 = 0;
  int depth0 = 0;
  std::function<Value(Renderer&, const Value&)> recurse;     // set for `for ... recursive`
  mutable std::shared_ptr<std::vector<Value>> last_changed;  // state of loop.changed()
};

inline bool Value::is_seq(Seq s) const {
  return kind_ == Kind::List && list_data().seq == s;
}
inline const std::vector<Value>& Value::items() const {
  return list_data().items;
}
inline std::shared_ptr<const std::vector<Value>> Value::shared_items() const {
  return {obj_, &list_data().items};
}

// Python semantics shared by everything else.
bool truthy(const Value& v);
bool equal(const Value& a, const Value& b);  // Python ==
const char* type_name(const Value& v);       // Python type(v).__name__
std::string to_str(const Value& v);          // Python str(v); Undefined prints empty
std::string repr(const Value& v);            // Python repr(v)

}  // namespace strata::jinja
