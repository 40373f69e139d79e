#include "text/jinja/value_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "text/jinja/error.h"
#include "text/jinja/py_format.h"
#include "text/jinja/utf8.h"

namespace strata::jinja {

Value from_json(const nlohmann::ordered_json& j, int max_depth) {
  if (max_depth < 0) runtime_error("JSON input is nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        runtime_error(fmt::format("JSON integer {} does not fit in 64 bits", u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::floating(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j)
        items.push_back(from_json(e, max_depth - 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (const auto& [k, e] : j.items())
        d.set(Value::string(k), from_json(e, max_depth - 1));
      return Value::dict(std::move(d));
    }
    default:
      runtime_error("JSON input holds a value of an unsupported type (binary)");
  }
}

void json_quote(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8::decode(s)) {
    switch (c) {
      case '"':
        out += "\\\"";
        continue;
      case '\\':
        out += "\\\\";
        continue;
      case '\n':
        out += "\\n";
        continue;
      case '\r':
        out += "\\r";
        continue;
      case '\t':
        out += "\\t";
        continue;
      case '\b':
        out += "\\b";
        continue;
      case '\f':
        out += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7e)) {
      if (c > 0xffff) {
        const char32_t v = c - 0x10000;
        out += fmt::format("\\u{:04x}\\u{:04x}", static_cast<unsigned>(0xd800 | (v >> 10)),
                           static_cast<unsigned>(0xdc00 | (v & 0x3ff)));
      } else {
        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
      }
    } else {
      utf8::append(out, c);
    }
  }
  out += '"';
}

namespace {

class JsonWriter {
 public:
  JsonWriter(const JsonDumpOptions& o, int max_depth) : o_(o), max_depth_(max_depth) {
    item_sep_ = o.item_separator ? *o.item_separator : (o.indent ? "," : ", ");
  }

  void write(const Value& v, int level) {
    if (level > max_depth_) runtime_error("tojson: value is nested too deeply");
    switch (v.kind()) {
      case Kind::None:
        out_ += "null";
        return;
      case Kind::Bool:
        out_ += v.as_bool() ? "true" : "false";
        return;
      case Kind::Int:
        out_ += std::to_string(v.as_int());
        return;
      case Kind::Float:
        out_ += float_text(v.as_float());
        return;
      case Kind::String:
        json_quote(out_, v.str(), o_.ensure_ascii);
        return;
      case Kind::List:
        if (v.list_data().seq == Seq::List || v.list_data().seq == Seq::Tuple) {
          write_array(v.items(), level);
          return;
        }
        break;
      case Kind::Dict:
        write_object(v.dict(), level);
        return;
      default:
        break;
    }
    runtime_error(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
  }

  std::string take() { return std::move(out_); }

 private:
  static std::string float_text(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    return float_repr(d);
  }

  void newline(int level) {
    if (!o_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i)
      out_ += *o_.indent;
  }

  void write_array(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    newline(level + 1);
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) {
        out_ += item_sep_;
        newline(level + 1);
      }
      write(items[i], level + 1);
    }
    newline(level);
    out_ += ']';
  }

  std::string key_text(const Value& k) {
    switch (k.kind()) {
      case Kind::String:
        return k.str();
      case Kind::Float:
        return float_text(k.as_float());
      case Kind::Bool:
        return k.as_bool() ? "true" : "false";
      case Kind::Int:
        return std::to_string(k.as_int());
      case Kind::None:
        return "null";
      default:
        runtime_error(
            fmt::format("keys must be str, int, float, bool or None, not {}", type_name(k)));
    }
  }

  void write_object(const Dict& d, int level) {
    if (d.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const Dict::Entry*> entries;
    for (const auto& e : d.entries())
      entries.push_back(&e);
    if (o_.sort_keys) sort_entries(entries);
    out_ += '{';
    newline(level + 1);
    bool first = true;
    for (const auto* e : entries) {
      if (!first) {
        out_ += item_sep_;
        newline(level + 1);
      }
      first = false;
      json_quote(out_, key_text(e->first), o_.ensure_ascii);
      out_ += o_.key_separator;
      write(e->second, level + 1);
    }
    newline(level);
    out_ += '}';
  }

  // sorted(d.items()): keys of one kind only (all str or all numbers), as Python requires.
  static void sort_entries(std::vector<const Dict::Entry*>& entries) {
    const bool all_str = std::all_of(entries.begin(), entries.end(),
                                     [](const auto* e) { return e->first.is_string(); });
    const bool all_num = std::all_of(entries.begin(), entries.end(),
                                     [](const auto* e) { return e->first.is_number(); });
    if (all_str) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return a->first.str() < b->first.str();
      });
    } else if (all_num) {
      std::stable_sort(entries.begin(), entries.end(), [](const auto* a, const auto* b) {
        return a->first.as_float() < b->first.as_float();
      });
    } else {
      runtime_error("tojson(sort_keys=True): '<' not supported between keys of different types");
    }
  }

  const JsonDumpOptions& o_;
  int max_depth_;
  std::string item_sep_;
  std::string out_;
};

}  // namespace

std::string json_dumps(const Value& v, const JsonDumpOptions& options, int max_depth) {
  JsonWriter w(options, max_depth);
  w.write(v, 0);
  return w.take();
}

}  // namespace strata::jinja
