// The builtin filters (`x | name(args)`), tests (`x is name(args)`) and global functions of the
// environment transformers builds for chat templates: jinja2's defaults, its `tojson` replaced by
// Python's json.dumps(ensure_ascii=False, ...), plus `raise_exception` and `strftime_now`.
#pragma once

#include <string_view>
#include <vector>

#include "text/jinja/call_args.h"
#include "text/jinja/value.h"

namespace strata::jinja {

class Renderer;

using FilterFn = Value (*)(Renderer& r, const Value& input, CallArgs& args);
using TestFn = bool (*)(Renderer& r, const Value& input, CallArgs& args);

struct FilterDef {
  const char* name;
  FilterFn fn;
  // Whether the filter walks its input (select, join, tojson...) and so costs sandbox steps in
  // proportion to its size; length, first, default... look at it in constant time.
  bool scans = true;
};

struct TestDef {
  const char* name;
  TestFn fn;
};

// nullptr when no such filter / test exists (a syntax error where jinja2 reports it at compile
// time, a runtime error inside if-branches, where jinja2 defers it).
const FilterDef* find_filter(std::string_view name);
const TestDef* find_test(std::string_view name);

// Each family lives in its own file; find_filter/find_test index them all.
std::vector<FilterDef> string_filters();
std::vector<FilterDef> sequence_filters();
std::vector<FilterDef> value_filters();
std::vector<TestDef> builtin_tests();

// range, dict, namespace, joiner, raise_exception, strftime_now.
const Dict& builtin_globals();

}  // namespace strata::jinja
