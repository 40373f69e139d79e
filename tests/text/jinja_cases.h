// Small templates that each exercise one construct, rendered by strata and by Python's jinja2
// (the reference) and compared byte for byte; where jinja2 raises, strata must raise.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "jinja2_reference.h"

namespace strata::testing {

struct JinjaCase {
  std::string source;
  std::string vars = "{}";  // JSON object: template variables (passed as chat_template_kwargs)
};

// Renders every case both ways in one jinja2 process and expects agreement; asserts that every
// case was compared. Returns how many rendered (the rest raised in both).
inline size_t expect_same_as_jinja2(const std::vector<JinjaCase>& cases) {
  nlohmann::ordered_json batch = nlohmann::ordered_json::array();
  for (const auto& c : cases) {
    nlohmann::ordered_json j;
    j["source"] = c.source;
    j["messages"] = nlohmann::ordered_json::array();
    j["tools"] = nullptr;
    j["add_generation_prompt"] = false;
    j["kwargs"] = nlohmann::ordered_json::parse(c.vars);
    batch.push_back(std::move(j));
  }
  const auto want = render_with_jinja2(batch);
  EXPECT_EQ(want.size(), cases.size());
  if (want.size() != cases.size()) return 0;
  size_t compared = 0, rendered = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const StrataResult got = render_with_strata(cases[i].source, batch[i]);
    const std::string diff = compare_results(want[i], got);
    EXPECT_TRUE(diff.empty()) << "template " << nlohmann::json(cases[i].source).dump() << " vars "
                              << cases[i].vars << ": " << diff;
    ++compared;
    rendered += want[i].ok;
  }
  EXPECT_EQ(compared, cases.size());
  return rendered;
}

}  // namespace strata::testing
