#include "text/json_schema_grammar.h"

#include <algorithm>

#include "core/check.h"

namespace strata::text {

using json = nlohmann::ordered_json;

struct SchemaNode {
  enum class Kind { Object, Array, String, Number, Integer, Literals, AnyOf };
  Kind kind = Kind::AnyOf;
  // Object: declared properties (name as its raw JSON-escaped bytes, without quotes).
  std::vector<std::pair<std::string, const SchemaNode*>> props;
  std::vector<bool> required;  // parallel to props
  bool additional_allowed = true;
  const SchemaNode* additional = nullptr;  // the schema of other keys' values
  // Array.
  const SchemaNode* items = nullptr;
  int64_t min_items = 0, max_items = -1;  // -1 = unbounded
  // Literals: compact JSON texts (booleans, null, enum, const).
  std::vector<std::string> literals;
  // AnyOf.
  std::vector<const SchemaNode*> options;
};

struct SchemaPool {
  std::vector<std::unique_ptr<SchemaNode>> nodes;
  const SchemaNode* root = nullptr;
  const SchemaNode* any = nullptr;  // any JSON value

  SchemaNode* add(SchemaNode::Kind k) {
    nodes.push_back(std::make_unique<SchemaNode>());
    nodes.back()->kind = k;
    return nodes.back().get();
  }
  const SchemaNode* literal(std::vector<std::string> texts) {
    SchemaNode* n = add(SchemaNode::Kind::Literals);
    n->literals = std::move(texts);
    return n;
  }
  void build_any() {
    SchemaNode* a = add(SchemaNode::Kind::AnyOf);
    SchemaNode* obj = add(SchemaNode::Kind::Object);
    obj->additional = a;
    SchemaNode* arr = add(SchemaNode::Kind::Array);
    arr->items = a;
    a->options = {obj, arr, add(SchemaNode::Kind::String), add(SchemaNode::Kind::Number),
                  literal({"true", "false", "null"})};
    any = a;
  }

  const SchemaNode* of_type(const std::string& type, const json& s) {
    using K = SchemaNode::Kind;
    if (type == "string") return add(K::String);
    if (type == "number") return add(K::Number);
    if (type == "integer") return add(K::Integer);
    if (type == "boolean") return literal({"true", "false"});
    if (type == "null") return literal({"null"});
    if (type == "array") {
      SchemaNode* n = add(K::Array);
      n->items = s.contains("items") ? compile(s["items"]) : any;
      if (s.contains("minItems") && s["minItems"].is_number_integer())
        n->min_items = std::max<int64_t>(0, s["minItems"].get<int64_t>());
      if (s.contains("maxItems") && s["maxItems"].is_number_integer())
        n->max_items = std::max<int64_t>(0, s["maxItems"].get<int64_t>());
      if (n->max_items >= 0 && n->max_items < n->min_items)
        fail("JSON schema: maxItems {} is below minItems {}", n->max_items, n->min_items);
      return n;
    }
    if (type == "object") {
      SchemaNode* n = add(K::Object);
      if (s.contains("properties") && s["properties"].is_object())
        for (const auto& [name, sub] : s["properties"].items()) {
          const std::string quoted = json(name).dump();  // the key as JSON writes it
          n->props.emplace_back(quoted.substr(1, quoted.size() - 2), compile(sub));
        }
      n->required.assign(n->props.size(), false);
      if (s.contains("required") && s["required"].is_array())
        for (const auto& r : s["required"]) {
          if (!r.is_string()) continue;
          const std::string quoted = json(r).dump();
          const std::string raw = quoted.substr(1, quoted.size() - 2);
          bool found = false;
          for (size_t i = 0; i < n->props.size(); ++i)
            if (n->props[i].first == raw) n->required[i] = found = true;
          // A required key without a declared schema: declare it as any value.
          if (!found) {
            n->props.emplace_back(raw, any);
            n->required.push_back(true);
          }
        }
      // additionalProperties absent: none when properties are declared (xgrammar's strict
      // mode, vLLM's default backend: a guided object holds what its schema names), any when
      // the schema declares no properties at all.
      n->additional = any;
      n->additional_allowed = !s.contains("properties");
      if (s.contains("additionalProperties")) {
        const json& ap = s["additionalProperties"];
        if (ap.is_boolean()) {
          n->additional_allowed = ap.get<bool>();
        } else {
          n->additional_allowed = true;
          n->additional = compile(ap);
        }
      }
      return n;
    }
    fail("JSON schema: unknown type \"{}\"", type);
  }

  const SchemaNode* compile(const json& s) {
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("JSON schema: `false` accepts nothing");
      return any;
    }
    if (!s.is_object()) fail("JSON schema: a schema must be an object or a boolean");
    if (s.contains("const")) return literal({s["const"].dump()});
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        fail("JSON schema: enum must be a non-empty array");
      std::vector<std::string> texts;
      for (const auto& v : s["enum"])
        texts.push_back(v.dump());
      return literal(std::move(texts));
    }
    for (const char* key : {"anyOf", "oneOf"})
      if (s.contains(key)) {
        if (!s[key].is_array() || s[key].empty())
          fail("JSON schema: {} must be a non-empty array", key);
        SchemaNode* n = add(SchemaNode::Kind::AnyOf);
        for (const auto& option : s[key]) {
          // Keywords beside anyOf apply to every option (vLLM's "required" schema puts
          // "type": "object" beside its anyOf).
          json merged = option;
          if (merged.is_object())
            for (const auto& [k, v] : s.items())
              if (k != key && !merged.contains(k)) merged[k] = v;
          n->options.push_back(compile(merged));
        }
        return n;
      }
    if (!s.contains("type")) {
      // Object keywords without a type still describe an object.
      if (s.contains("properties") || s.contains("required")) return of_type("object", s);
      return any;
    }
    const json& t = s["type"];
    if (t.is_string()) return of_type(t.get<std::string>(), s);
    if (t.is_array() && !t.empty()) {
      SchemaNode* n = add(SchemaNode::Kind::AnyOf);
      for (const auto& one : t) {
        if (!one.is_string()) fail("JSON schema: type list entries must be strings");
        n->options.push_back(of_type(one.get<std::string>(), s));
      }
      return n;
    }
    fail("JSON schema: type must be a string or a non-empty list of strings");
  }
};

JsonSchemaGrammar::JsonSchemaGrammar(const json& schema) {
  auto pool = std::make_shared<SchemaPool>();
  pool->build_any();
  pool->root = pool->compile(schema);
  pool_ = std::move(pool);
}

json JsonSchemaGrammar::required_tools_schema(const json& tools) {
  json options = json::array();
  for (const auto& tool : tools) {
    const json& fn = tool.at("function");
    json params = fn.contains("parameters") && fn["parameters"].is_object()
                      ? fn["parameters"]
                      : json{{"type", "object"}, {"properties", json::object()}};
    options.push_back({{"properties",
                        {{"name", {{"type", "string"}, {"enum", json::array({fn.at("name")})}}},
                         {"parameters", params}}},
                       {"required", json::array({"name", "parameters"})}});
  }
  return {{"type", "array"}, {"minItems", 1}, {"items", {{"type", "object"}, {"anyOf", options}}}};
}

// ---- the automaton --------------------------------------------------------------------------

namespace {

using Kind = JsonGrammarState::Kind;
using Frame = JsonGrammarState::Frame;
using Alt = JsonGrammarState::Alt;
using NK = SchemaNode::Kind;

// Object phases.
enum : uint8_t { kObjOpen, kObjKey, kObjAfterKey, kObjValue, kObjAfterValue, kObjComma };
// Array phases.
enum : uint8_t { kArrOpen, kArrItem, kArrAfterItem, kArrNext };
// String phases.
enum : uint8_t { kStrBody, kStrEscape, kStrHex, kStrUtf8 };
// Number phases; the terminal ones end a number.
enum : uint8_t {
  kNumStart,
  kNumMinus,
  kNumZero,
  kNumInt,
  kNumDot,
  kNumFrac,
  kNumE,
  kNumESign,
  kNumExp
};

bool is_ws(uint8_t c) {
  return c == ' ' || c == '\n' || c == '\t' || c == '\r';
}
bool is_digit(uint8_t c) {
  return c >= '0' && c <= '9';
}
bool is_hex(uint8_t c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool number_terminal(uint8_t p) {
  return p == kNumZero || p == kNumInt || p == kNumFrac || p == kNumExp;
}

bool object_done_ok(const Frame& f) {
  for (size_t i = 0; i < f.node->props.size(); ++i)
    if (f.node->required[i] && !f.seen[i]) return false;
  return true;
}
// Whether another key can follow (so a ',' or an opening '"' leads somewhere).
bool object_key_possible(const Frame& f) {
  if (f.node->additional_allowed) return true;
  for (size_t i = 0; i < f.node->props.size(); ++i)
    if (!f.seen[i]) return true;
  return false;
}

class Stepper {
 public:
  explicit Stepper(std::vector<Alt>& out) : out_(out) {}

  void feed(Alt a, uint8_t c) {
    if (a.frames.empty()) return;  // complete: nothing may follow
    const Kind k = a.frames.back().kind;
    if (is_ws(c) && (k == Kind::Value || k == Kind::Object || k == Kind::Array)) {
      if (a.ws >= kMaxWhitespaceRun) return;
      ++a.ws;
      out_.push_back(std::move(a));
      return;
    }
    a.ws = 0;
    switch (k) {
      case Kind::Value: {
        const SchemaNode* n = a.frames.back().node;
        a.frames.pop_back();
        start_value(std::move(a), n, c);
        return;
      }
      case Kind::Literal:
        return literal(std::move(a), c);
      case Kind::String:
      case Kind::Key:
        return string(std::move(a), c);
      case Kind::Number:
        return number(std::move(a), c);
      case Kind::Object:
        return object(std::move(a), c);
      case Kind::Array:
        return array(std::move(a), c);
    }
  }

 private:
  void push_value(Alt& a, const SchemaNode* n) {
    Frame f;
    f.kind = Kind::Value;
    f.node = n;
    a.frames.push_back(std::move(f));
  }

  void start_value(Alt a, const SchemaNode* n, uint8_t c) {
    Frame f;
    f.node = n;
    switch (n->kind) {
      case NK::AnyOf:
        for (const SchemaNode* o : n->options)
          start_value(a, o, c);
        return;
      case NK::Object:
        if (c != '{') return;
        f.kind = Kind::Object;
        f.phase = kObjOpen;
        f.seen.assign(n->props.size(), false);
        a.frames.push_back(std::move(f));
        out_.push_back(std::move(a));
        return;
      case NK::Array:
        if (c != '[') return;
        f.kind = Kind::Array;
        f.phase = kArrOpen;
        a.frames.push_back(std::move(f));
        out_.push_back(std::move(a));
        return;
      case NK::String:
        if (c != '"') return;
        f.kind = Kind::String;
        f.phase = kStrBody;
        a.frames.push_back(std::move(f));
        out_.push_back(std::move(a));
        return;
      case NK::Number:
      case NK::Integer:
        if (c != '-' && !is_digit(c)) return;
        f.kind = Kind::Number;
        f.phase = kNumStart;
        a.frames.push_back(std::move(f));
        number(std::move(a), c);
        return;
      case NK::Literals:
        for (size_t i = 0; i < n->literals.size(); ++i) {
          const std::string& lit = n->literals[i];
          if (lit.empty() || static_cast<uint8_t>(lit[0]) != c) continue;
          Alt b = a;
          if (lit.size() == 1) {
            value_done(b);
          } else {
            Frame l;
            l.kind = Kind::Literal;
            l.node = n;
            l.count = 1;
            l.which = static_cast<int32_t>(i);
            b.frames.push_back(std::move(l));
          }
          out_.push_back(std::move(b));
        }
        return;
    }
  }

  // A value (the top frame, already popped) ended: tell the container.
  static void value_done(Alt& a) {
    if (a.frames.empty()) return;
    Frame& p = a.frames.back();
    if (p.kind == Kind::Object) {
      p.phase = kObjAfterValue;
    } else if (p.kind == Kind::Array) {
      ++p.count;
      p.phase = kArrAfterItem;
    }
  }

  void literal(Alt a, uint8_t c) {
    Frame& f = a.frames.back();
    const std::string& lit = f.node->literals[static_cast<size_t>(f.which)];
    if (static_cast<uint8_t>(lit[static_cast<size_t>(f.count)]) != c) return;
    if (++f.count == static_cast<int32_t>(lit.size())) {
      a.frames.pop_back();
      value_done(a);
    }
    out_.push_back(std::move(a));
  }

  void string(Alt a, uint8_t c) {
    Frame& f = a.frames.back();
    switch (f.phase) {
      case kStrBody:
        if (c == '"') return string_end(std::move(a));
        if (c == '\\') {
          f.phase = kStrEscape;
        } else if (c < 0x20) {
          return;
        } else if (c >= 0x80) {
          // UTF-8 lead byte: how many continuation bytes, and the range of the first.
          f.lo = 0x80;
          f.hi = 0xBF;
          if (c >= 0xC2 && c <= 0xDF)
            f.left = 1;
          else if (c == 0xE0)
            f.left = 2, f.lo = 0xA0;
          else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
            f.left = 2;
          else if (c == 0xED)
            f.left = 2, f.hi = 0x9F;
          else if (c == 0xF0)
            f.left = 3, f.lo = 0x90;
          else if (c >= 0xF1 && c <= 0xF3)
            f.left = 3;
          else if (c == 0xF4)
            f.left = 3, f.hi = 0x8F;
          else
            return;
          f.phase = kStrUtf8;
        }
        break;
      case kStrEscape:
        if (c == 'u') {
          f.phase = kStrHex;
          f.left = 4;
        } else if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f' || c == 'n' ||
                   c == 'r' || c == 't') {
          f.phase = kStrBody;
        } else {
          return;
        }
        break;
      case kStrHex:
        if (!is_hex(c)) return;
        if (--f.left == 0) f.phase = kStrBody;
        break;
      case kStrUtf8:
        if (c < f.lo || c > f.hi) return;
        f.lo = 0x80;
        f.hi = 0xBF;
        if (--f.left == 0) f.phase = kStrBody;
        break;
      default:
        return;
    }
    if (f.kind == Kind::Key) {
      f.key.push_back(static_cast<char>(c));
      if (!key_prefix_ok(a)) return;
    }
    out_.push_back(std::move(a));
  }

  // A key of an object without additional properties must stay a prefix of an unused name.
  static bool key_prefix_ok(const Alt& a) {
    const Frame& k = a.frames.back();
    const Frame& obj = a.frames[a.frames.size() - 2];
    if (obj.node->additional_allowed) return true;
    for (size_t i = 0; i < obj.node->props.size(); ++i)
      if (!obj.seen[i] && obj.node->props[i].first.compare(0, k.key.size(), k.key) == 0 &&
          obj.node->props[i].first.size() >= k.key.size())
        return true;
    return false;
  }

  void string_end(Alt a) {
    Frame f = std::move(a.frames.back());
    a.frames.pop_back();
    if (f.kind == Kind::String) {
      value_done(a);
      out_.push_back(std::move(a));
      return;
    }
    Frame& obj = a.frames.back();
    const SchemaNode* value = nullptr;
    for (size_t i = 0; i < obj.node->props.size(); ++i)
      if (obj.node->props[i].first == f.key) {
        if (obj.seen[i]) return;  // a declared property at most once
        obj.seen[i] = true;
        value = obj.node->props[i].second;
      }
    if (!value) {
      if (!obj.node->additional_allowed) return;
      value = obj.node->additional;
    }
    obj.pending = value;
    obj.phase = kObjAfterKey;
    out_.push_back(std::move(a));
  }

  void number(Alt a, uint8_t c) {
    Frame& f = a.frames.back();
    const bool integer = f.node->kind == NK::Integer;
    uint8_t next = 0xFF;
    switch (f.phase) {
      case kNumStart:
        next = c == '-' ? kNumMinus : c == '0' ? kNumZero : is_digit(c) ? kNumInt : 0xFF;
        break;
      case kNumMinus:
        next = c == '0' ? kNumZero : is_digit(c) ? kNumInt : 0xFF;
        break;
      case kNumZero:
        next = (c == '.' && !integer) ? kNumDot : 0xFF;
        break;
      case kNumInt:
        next = is_digit(c) ? kNumInt : (c == '.' && !integer) ? kNumDot : 0xFF;
        break;
      case kNumDot:
        next = is_digit(c) ? kNumFrac : 0xFF;
        break;
      case kNumFrac:
        next = is_digit(c) ? kNumFrac : 0xFF;
        break;
      case kNumE:
        next = (c == '+' || c == '-') ? kNumESign : is_digit(c) ? kNumExp : 0xFF;
        break;
      case kNumESign:
      case kNumExp:
        next = is_digit(c) ? kNumExp : 0xFF;
        break;
      default:
        break;
    }
    if (next == 0xFF && !integer && (c == 'e' || c == 'E') &&
        (f.phase == kNumZero || f.phase == kNumInt || f.phase == kNumFrac))
      next = kNumE;
    if (next != 0xFF) {
      f.phase = next;
      out_.push_back(std::move(a));
      return;
    }
    if (!number_terminal(f.phase)) return;
    // The byte is not part of the number: the number ends, the container takes the byte.
    a.frames.pop_back();
    value_done(a);
    feed(std::move(a), c);
  }

  void object(Alt a, uint8_t c) {
    Frame& f = a.frames.back();
    auto open_key = [&] {
      f.phase = kObjKey;
      Frame k;
      k.kind = Kind::Key;
      k.phase = kStrBody;
      k.node = f.node;
      a.frames.push_back(std::move(k));
      out_.push_back(std::move(a));
    };
    switch (f.phase) {
      case kObjOpen:
        if (c == '"' && object_key_possible(f)) return open_key();
        if (c == '}' && object_done_ok(f)) {
          a.frames.pop_back();
          value_done(a);
          out_.push_back(std::move(a));
        }
        return;
      case kObjAfterKey:
        if (c != ':') return;
        f.phase = kObjValue;
        push_value(a, f.pending);
        out_.push_back(std::move(a));
        return;
      case kObjAfterValue:
        if (c == ',' && object_key_possible(f)) {
          f.phase = kObjComma;
          f.pending = nullptr;
          out_.push_back(std::move(a));
        } else if (c == '}' && object_done_ok(f)) {
          a.frames.pop_back();
          value_done(a);
          out_.push_back(std::move(a));
        }
        return;
      case kObjComma:
        if (c == '"') return open_key();
        return;
      default:
        return;
    }
  }

  void array(Alt a, uint8_t c) {
    Frame& f = a.frames.back();
    switch (f.phase) {
      case kArrOpen:
        if (c == ']') {
          if (f.node->min_items > 0) return;
          a.frames.pop_back();
          value_done(a);
          out_.push_back(std::move(a));
          return;
        }
        if (f.node->max_items == 0) return;
        [[fallthrough]];
      case kArrNext: {
        f.phase = kArrItem;
        const SchemaNode* items = f.node->items;
        push_value(a, items);
        feed(std::move(a), c);
        return;
      }
      case kArrAfterItem:
        if (c == ',' && (f.node->max_items < 0 || f.count < f.node->max_items)) {
          f.phase = kArrNext;
          out_.push_back(std::move(a));
        } else if (c == ']' && f.count >= f.node->min_items) {
          a.frames.pop_back();
          value_done(a);
          out_.push_back(std::move(a));
        }
        return;
      default:
        return;
    }
  }

  std::vector<Alt>& out_;
};

}  // namespace

JsonGrammarState::JsonGrammarState(const JsonSchemaGrammar& g) : pool_(g.pool()) {
  Alt a;
  Frame f;
  f.kind = Kind::Value;
  f.node = pool_->root;
  a.frames.push_back(std::move(f));
  alts_.push_back(std::move(a));
}

bool JsonGrammarState::advance(uint8_t byte) {
  std::vector<Alt> next;
  Stepper s(next);
  for (Alt& a : alts_)
    s.feed(std::move(a), byte);
  // Identical alternatives (two anyOf options that reached the same frames) are kept once.
  std::vector<Alt> unique;
  unique.reserve(next.size());
  for (Alt& a : next)
    if (std::find(unique.begin(), unique.end(), a) == unique.end()) unique.push_back(std::move(a));
  alts_ = std::move(unique);
  return !alts_.empty();
}

bool JsonGrammarState::advance(std::string_view bytes) {
  for (char c : bytes)
    if (!advance(static_cast<uint8_t>(c))) return false;
  return true;
}

bool JsonGrammarState::in_plain_string() const {
  return alts_.size() == 1 && !alts_[0].frames.empty() &&
         alts_[0].frames.back().kind == Kind::String && alts_[0].frames.back().phase == kStrBody;
}

bool JsonGrammarState::complete() const {
  for (const Alt& a : alts_) {
    if (a.frames.empty()) return true;
    if (a.frames.size() == 1 && a.frames[0].kind == Kind::Number &&
        number_terminal(a.frames[0].phase))
      return true;
  }
  return false;
}

}  // namespace strata::text
