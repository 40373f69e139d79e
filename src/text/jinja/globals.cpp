// Global functions: jinja2's defaults (range, dict, namespace, joiner, cycler; lipsum exists but
// refuses, since its output is random) and transformers' raise_exception and strftime_now.
#include <fmt/format.h>

#include <chrono>
#include <ctime>

#include "text/jinja/access.h"
#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/renderer.h"

namespace strata::jinja {
namespace {

// jinja2.sandbox.MAX_RANGE: the sandbox refuses larger ranges.
constexpr int64_t kMaxRange = 100000;

Value g_range(Renderer& r, CallArgs& a) {
  reject_kwargs("range", a);
  expect_args("range", a, 1, 3);
  for (const auto& v : a.args)
    if (!v.is_int_like())
      runtime_error(fmt::format("'{}' object cannot be interpreted as an integer", type_name(v)));
  int64_t start = 0, stop, step = 1;
  if (a.args.size() == 1) {
    stop = a.args[0].as_int();
  } else {
    start = a.args[0].as_int();
    stop = a.args[1].as_int();
    if (a.args.size() == 3) step = a.args[2].as_int();
  }
  if (step == 0) runtime_error("range() arg 3 must not be zero");
  const long double span =
      step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
  const long double count =
      span <= 0 ? 0 : (span - 1) / (step > 0 ? step : -static_cast<long double>(step)) + 1;
  if (count > kMaxRange) {
    throw TemplateError(
        TemplateError::Kind::Limit,
        fmt::format("Range too big. The sandbox blocks ranges larger than MAX_RANGE ({}).",
                    kMaxRange));
  }
  r.budget().charge(static_cast<size_t>(count) * sizeof(Value));
  std::vector<Value> items;
  for (int64_t i = 0, v = start; i < static_cast<int64_t>(count); ++i, v += step)
    items.push_back(Value::integer(v));
  return Value::range(start, stop, step, std::move(items));
}

// dict(mapping_or_pairs, **kwargs) and namespace(...) share Python's dict() argument rules.
Dict dict_from_args(const char* fn, CallArgs& a) {
  expect_args(fn, a, 0, 1);
  Dict d;
  if (!a.args.empty()) {
    const Value& src = a.args[0];
    if (src.is_undefined()) runtime_error(src.undefined_message());  // dict() asks it for keys()
    if (src.is_dict()) {
      d = src.dict();
    } else {
      const auto items_held = iterate(src);  // keep the vector alive for the loop
      for (const auto& pair : *items_held) {
        const auto kv = iterate(pair);
        if (kv->size() != 2)
          runtime_error(
              fmt::format("{}(): sequence element has length {}; 2 is required", fn, kv->size()));
        d.set((*kv)[0], (*kv)[1]);
      }
    }
  }
  for (const auto& [k, v] : a.kwargs)
    d.set(Value::string(k), v);
  return d;
}

Value g_dict(Renderer&, CallArgs& a) {
  return Value::dict(dict_from_args("dict", a));
}

Value g_namespace(Renderer& r, CallArgs& a) {
  return r.make_namespace(dict_from_args("namespace", a));
}

// joiner(sep=", "): returns "" the first time it is called, then sep.
Value g_joiner(Renderer&, CallArgs& a) {
  Params p("joiner", a, {"sep"});
  const std::string sep = p.has(0) ? to_str(p[0]) : ", ";
  auto used = std::make_shared<bool>(false);
  return Value::callable("joiner", [sep, used](Renderer&, CallArgs&) {
    if (!*used) {
      *used = true;
      return Value::string("");
    }
    return Value::string(sep);
  });
}

// cycler(*items): .next() returns the current item and advances, .current, .reset().
Value g_cycler(Renderer& r, CallArgs& a) {
  reject_kwargs("cycler", a);
  if (a.args.empty()) runtime_error("at least one item has to be provided");
  auto items = std::make_shared<const std::vector<Value>>(a.args);
  auto pos = std::make_shared<size_t>(0);
  Dict attrs;
  attrs.set(Value::string("current"), (*items)[0]);
  Value obj = r.make_namespace(std::move(attrs));
  NamespaceData* data = &obj.ns();  // lives as long as obj, which the renderer keeps
  data->attrs.set(Value::string("next"),
                  Value::callable("cycler.next", [items, pos, data](Renderer&, CallArgs&) {
                    Value rv = (*items)[*pos];
                    *pos = (*pos + 1) % items->size();
                    data->attrs.set(Value::string("current"), (*items)[*pos]);
                    return rv;
                  }));
  data->attrs.set(Value::string("reset"),
                  Value::callable("cycler.reset", [items, pos, data](Renderer&, CallArgs&) {
                    *pos = 0;
                    data->attrs.set(Value::string("current"), (*items)[0]);
                    return Value::none();
                  }));
  return obj;
}

Value g_lipsum(Renderer&, CallArgs&) {
  runtime_error("lipsum() produces random text and is not available in this sandbox");
}

Value g_raise_exception(Renderer&, CallArgs& a) {
  Params p("raise_exception", a, {"message"});
  throw TemplateError(TemplateError::Kind::Raised, to_str(p[0]));
}

// datetime.now().strftime(format): local time; %f is microseconds (Python's addition).
Value g_strftime_now(Renderer&, CallArgs& a) {
  Params p("strftime_now", a, {"format"});
  if (!p[0].is_string()) runtime_error("strftime_now() argument must be str");
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1000000;
  std::tm tm{};
  localtime_r(&t, &tm);
  std::string format;
  const std::string& f = p[0].str();
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] == '%' && i + 1 < f.size() && f[i + 1] == 'f') {
      format += fmt::format("{:06d}", micros);
      ++i;
    } else if (f[i] == '%' && i + 1 < f.size() && f[i + 1] == '%') {
      format += "%%";
      ++i;
    } else {
      format += f[i];
    }
  }
  if (format.empty()) return Value::string("");
  std::string out(format.size() * 4 + 64, '\0');
  const size_t n = std::strftime(out.data(), out.size(), format.c_str(), &tm);
  if (n == 0) runtime_error("strftime_now(): format produced no output or is too long");
  out.resize(n);
  return Value::string(std::move(out));
}

}  // namespace

const Dict& builtin_globals() {
  static const Dict globals = [] {
    Dict d;
    d.set(Value::string("range"), Value::callable("range", g_range));
    d.set(Value::string("dict"), Value::callable("dict", g_dict));
    d.set(Value::string("namespace"), Value::callable("namespace", g_namespace));
    d.set(Value::string("joiner"), Value::callable("joiner", g_joiner));
    d.set(Value::string("cycler"), Value::callable("cycler", g_cycler));
    d.set(Value::string("lipsum"), Value::callable("lipsum", g_lipsum));
    d.set(Value::string("raise_exception"), Value::callable("raise_exception", g_raise_exception));
    d.set(Value::string("strftime_now"), Value::callable("strftime_now", g_strftime_now));
    return d;
  }();
  return globals;
}

}  // namespace strata::jinja
