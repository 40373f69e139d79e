#include "text/jinja/builtins.h"

#include <string>
#include <unordered_map>

namespace strata::jinja {
namespace {

template <class Def>
using Index = std::unordered_map<std::string, Def>;

const Index<FilterDef>& filters() {
  static const Index<FilterDef> index = [] {
    Index<FilterDef> m;
    for (auto* family : {&string_filters, &sequence_filters, &value_filters})
      for (const auto& f : (*family)())
        m.emplace(f.name, f);
    return m;
  }();
  return index;
}

const Index<TestDef>& tests() {
  static const Index<TestDef> index = [] {
    Index<TestDef> m;
    for (const auto& t : builtin_tests())
      m.emplace(t.name, t);
    return m;
  }();
  return index;
}

}  // namespace

const FilterDef* find_filter(std::string_view name) {
  auto it = filters().find(std::string(name));
  return it == filters().end() ? nullptr : &it->second;
}

const TestDef* find_test(std::string_view name) {
  auto it = tests().find(std::string(name));
  return it == tests().end() ? nullptr : &it->second;
}

}  // namespace strata::jinja
