// Sequence filters, as jinja2/filters.py defines them. map/select/reject/selectattr/rejectattr,
// unique, batch and items return generators in jinja2, so here they return single-pass
// Iterator values: `x | map(...) | length` is an error and `x | select(...)` is always truthy,
// exactly as in Python.
#include <fmt/format.h>

#include <algorithm>

#include "text/jinja/access.h"
#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/filter_util.h"
#include "text/jinja/renderer.h"
#include "text/jinja/utf8.h"
#include "text/jinja/value_ops.h"

namespace strata::jinja {
namespace {

Value f_length(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'length'", a, {});
  return Value::integer(length(in));
}

Value f_first(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'first'", a, {});
  const auto items = iterate(in);
  if (items->empty()) return Value::undefined("No first item, sequence was empty.");
  return items->front();
}

// next(iter(reversed(seq))): generators cannot be reversed.
Value f_last(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'last'", a, {});
  if (in.is_seq(Seq::Iterator)) runtime_error("'generator' object is not reversible");
  if (!in.is_undefined() && !in.is_string() && !in.is_list() && !in.is_dict())
    runtime_error(fmt::format("'{}' object is not reversible", type_name(in)));
  const auto items = iterate(in);
  if (items->empty()) return Value::undefined("No last item, sequence was empty.");
  return items->back();
}

Value f_join(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'join'", a, {"d", "attribute"});
  const std::string sep = p.has(0) ? to_str(p[0]) : "";
  auto items = iterate(in);
  std::function<Value(const Value&)> get;
  if (p.has(1) && !p[1].is_none()) get = attrgetter(p[1]);
  std::string out;
  for (size_t i = 0; i < items->size(); ++i) {
    if (i) out += sep;
    out += to_str(get ? get((*items)[i]) : (*items)[i]);
    if (out.size() > r.budget().limits().max_output_bytes) r.budget().charge(out.size());
  }
  r.budget().charge(out.size());
  return Value::string(std::move(out));
}

Value f_list(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'list'", a, {});
  auto items = iterate(in);
  r.budget().charge(items->size() * sizeof(Value));
  return Value::list(*items);
}

Value f_items(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'items'", a, {});
  if (in.is_undefined()) return Value::list({}, Seq::Iterator);
  if (!in.is_dict()) runtime_error("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, v] : in.dict().entries())
    out.push_back(Value::list({k, v}, Seq::Tuple));
  return Value::list(std::move(out), Seq::Iterator);
}

// jinja2 prepare_map: map('filter', args...) or map(attribute='x', default=...).
Value f_map(Renderer& r, const Value& in, CallArgs& a) {
  const auto items = iterate(in);
  std::vector<Value> out;
  out.reserve(items->size());
  const bool by_attribute =
      a.args.empty() && std::any_of(a.kwargs.begin(), a.kwargs.end(),
                                    [](const auto& kv) { return kv.first == "attribute"; });
  if (by_attribute) {
    Value attribute, fallback = Value::none();
    for (const auto& [k, v] : a.kwargs) {
      if (k == "attribute") {
        attribute = v;
      } else if (k == "default") {
        fallback = v;
      } else {
        runtime_error(fmt::format("Unexpected keyword argument '{}'", k));
      }
    }
    const auto get = attrgetter(attribute, &fallback);
    for (const auto& item : *items)
      out.push_back(get(item));
  } else {
    if (a.args.empty()) runtime_error("map requires a filter argument");
    if (!a.args[0].is_string()) runtime_error("map: the filter name must be a string");
    const std::string name = a.args[0].str();
    CallArgs rest;
    rest.args.assign(a.args.begin() + 1, a.args.end());
    rest.kwargs = a.kwargs;
    for (const auto& item : *items) {
      CallArgs call = rest;
      out.push_back(r.call_filter(name, item, call));
    }
  }
  return Value::list(std::move(out), Seq::Iterator);
}

// jinja2 prepare_select_or_reject.
Value select_common(Renderer& r, const Value& in, CallArgs& a, bool by_attribute, bool keep_if) {
  size_t off = 0;
  std::function<Value(const Value&)> get;
  if (by_attribute) {
    if (a.args.empty()) runtime_error("Missing parameter for attribute name");
    get = attrgetter(a.args[0]);
    off = 1;
  }
  std::string test;
  const bool has_test = a.args.size() > off;
  if (has_test) {
    if (!a.args[off].is_string()) runtime_error("select: the test name must be a string");
    test = a.args[off].str();
  }
  CallArgs rest;
  if (has_test)
    rest.args.assign(a.args.begin() + static_cast<std::ptrdiff_t>(off) + 1, a.args.end());
  rest.kwargs = a.kwargs;
  std::vector<Value> out;
  const auto items_held = iterate(in);  // keep the vector alive for the loop
  for (const auto& item : *items_held) {
    const Value x = get ? get(item) : item;
    bool ok;
    if (has_test) {
      CallArgs call = rest;
      ok = r.call_test(test, x, call);
    } else {
      ok = truthy(x);
    }
    if (ok == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out), Seq::Iterator);
}

Value f_select(Renderer& r, const Value& in, CallArgs& a) {
  return select_common(r, in, a, false, true);
}
Value f_reject(Renderer& r, const Value& in, CallArgs& a) {
  return select_common(r, in, a, false, false);
}
Value f_selectattr(Renderer& r, const Value& in, CallArgs& a) {
  return select_common(r, in, a, true, true);
}
Value f_rejectattr(Renderer& r, const Value& in, CallArgs& a) {
  return select_common(r, in, a, true, false);
}

Value f_unique(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'unique'", a, {"case_sensitive", "attribute"});
  const auto key = attrgetter(p.get(1, Value::none()), nullptr, !truthy(p[0]));
  std::vector<Value> seen, out;
  const auto items_held = iterate(in);  // keep the vector alive for the loop
  for (const auto& item : *items_held) {
    const Value k = key(item);
    if (k.is_list() && !k.is_seq(Seq::Tuple))
      runtime_error(fmt::format("unhashable type: '{}'", type_name(k)));
    if (k.is_dict()) runtime_error("unhashable type: 'dict'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) {
      seen.push_back(k);
      out.push_back(item);
    }
  }
  return Value::list(std::move(out), Seq::Iterator);
}

// sorted(value, key=..., reverse=...): stable, and equal keys keep their order when reversed.
std::vector<Value> sorted_by(std::vector<Value> items,
                             const std::function<Value(const Value&)>& key, bool reverse) {
  std::vector<std::pair<Value, Value>> keyed;
  keyed.reserve(items.size());
  for (auto& item : items)
    keyed.emplace_back(key(item), std::move(item));
  std::stable_sort(keyed.begin(), keyed.end(), [reverse](const auto& x, const auto& y) {
    return reverse ? less_than(y.first, x.first) : less_than(x.first, y.first);
  });
  std::vector<Value> out;
  out.reserve(keyed.size());
  for (auto& kv : keyed)
    out.push_back(std::move(kv.second));
  return out;
}

// jinja2 make_multi_attrgetter: "a,b" sorts by a tuple of attributes.
std::function<Value(const Value&)> sort_key(const Value& attribute, bool ignore_case) {
  if (!attribute.is_string() || attribute.str().find(',') == std::string::npos)
    return attrgetter(attribute, nullptr, ignore_case);
  std::vector<std::function<Value(const Value&)>> getters;
  const std::string& s = attribute.str();
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    getters.push_back(
        attrgetter(Value::string(s.substr(
                       start, comma == std::string::npos ? std::string::npos : comma - start)),
                   nullptr, ignore_case));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return [getters](const Value& item) {
    std::vector<Value> parts;
    for (const auto& g : getters)
      parts.push_back(g(item));
    return Value::list(std::move(parts));
  };
}

Value f_sort(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'sort'", a, {"reverse", "case_sensitive", "attribute"});
  const auto items = iterate(in);
  r.budget().charge(items->size() * sizeof(Value));
  return Value::list(
      sorted_by(*items, sort_key(p.get(2, Value::none()), !truthy(p[1])), truthy(p[0])));
}

Value f_dictsort(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'dictsort'", a, {"case_sensitive", "by", "reverse"});
  if (!in.is_dict())
    runtime_error(fmt::format("dictsort: '{}' object has no attribute 'items'", type_name(in)));
  const std::string by = p.has(1) ? to_str(p[1]) : "key";
  if (by != "key" && by != "value")
    runtime_error("You can only sort by either \"key\" or \"value\"");
  const size_t pos = by == "key" ? 0 : 1;
  const bool ignore_case = !truthy(p[0]);
  std::vector<Value> pairs;
  for (const auto& [k, v] : in.dict().entries())
    pairs.push_back(Value::list({k, v}, Seq::Tuple));
  return Value::list(sorted_by(
      std::move(pairs),
      [pos, ignore_case](const Value& pair) {
        const Value& x = pair.items()[pos];
        return ignore_case ? lower_if_string(x) : x;
      },
      truthy(p[2])));
}

Value f_reverse(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'reverse'", a, {});
  if (in.is_string()) {
    std::u32string s = utf8::decode(in.str());
    std::reverse(s.begin(), s.end());
    return Value::string(utf8::encode(s), in.is_markup());
  }
  // reversed() works on sequences and dicts and gives an iterator; a generator becomes a list.
  const bool reversible =
      in.is_undefined() || in.is_dict() || (in.is_list() && !in.is_seq(Seq::Iterator));
  auto items = iterate(in);
  std::vector<Value> out(items->rbegin(), items->rend());
  return Value::list(std::move(out), reversible ? Seq::Iterator : Seq::List);
}

Value f_batch(Renderer&, const Value& in, CallArgs& a) {
  Params p("filter 'batch'", a, {"linecount", "fill_with"});
  if (!p[0].is_int_like()) runtime_error("batch(): linecount must be an integer");
  const int64_t n = p[0].as_int();
  if (n <= 0) runtime_error("batch(): linecount must be positive");
  std::vector<Value> out, cur;
  const auto items_held = iterate(in);  // keep the vector alive for the loop
  for (const auto& item : *items_held) {
    if (static_cast<int64_t>(cur.size()) == n) {
      out.push_back(Value::list(std::move(cur)));
      cur.clear();
    }
    cur.push_back(item);
  }
  if (!cur.empty()) {
    if (p.has(1) && !p[1].is_none())
      while (static_cast<int64_t>(cur.size()) < n)
        cur.push_back(p[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out), Seq::Iterator);
}

Value f_sum(Renderer& r, const Value& in, CallArgs& a) {
  Params p("filter 'sum'", a, {"attribute", "start"});
  Value total = p.get(1, Value::integer(0));
  std::function<Value(const Value&)> get;
  if (p.has(0) && !p[0].is_none()) get = attrgetter(p[0]);
  const auto items_held = iterate(in);  // keep the vector alive for the loop
  for (const auto& item : *items_held)
    total = binary_op(BinOp::Add, total, get ? get(item) : item, r.budget());
  return total;
}

Value min_max(const Value& in, CallArgs& a, bool want_max) {
  Params p(want_max ? "filter 'max'" : "filter 'min'", a, {"case_sensitive", "attribute"});
  const auto key = attrgetter(p.get(1, Value::none()), nullptr, !truthy(p[0]));
  const auto items = iterate(in);
  if (items->empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = key((*items)[0]);
  for (size_t i = 1; i < items->size(); ++i) {
    Value k = key((*items)[i]);
    if (want_max ? less_than(best_key, k) : less_than(k, best_key)) {
      best = i;
      best_key = std::move(k);
    }
  }
  return (*items)[best];
}

Value f_min(Renderer&, const Value& in, CallArgs& a) {
  return min_max(in, a, false);
}
Value f_max(Renderer&, const Value& in, CallArgs& a) {
  return min_max(in, a, true);
}

}  // namespace

std::vector<FilterDef> sequence_filters() {
  return {
      {"length", f_length, false},
      {"count", f_length, false},
      {"first", f_first, false},
      {"last", f_last, false},
      {"join", f_join},
      {"list", f_list},
      {"items", f_items},
      {"map", f_map},
      {"select", f_select},
      {"reject", f_reject},
      {"selectattr", f_selectattr},
      {"rejectattr", f_rejectattr},
      {"unique", f_unique},
      {"sort", f_sort},
      {"dictsort", f_dictsort},
      {"reverse", f_reverse},
      {"batch", f_batch},
      {"sum", f_sum},
      {"min", f_min},
      {"max", f_max},
  };
}

}  // namespace strata::jinja
