// Runs Python's jinja2 as the independent reference for the chat-template tests:
// tests/text/render_with_jinja2.py builds the environment transformers builds and renders a
// batch of cases in one process. The reference is Debian's python3-jinja2 under
// /usr/bin/python3 (jinja2 3.1.2, markupsafe 2.1.2; scripts/install-deps.sh installs it), a
// pinned version: newer ones differ in edge cases (markupsafe 3 escapes Markup.replace's
// arguments differently; jinja2 3.1.6's `int` filter returns 0 for 'inf' instead of raising).
// STRATA_PYTHON names another interpreter.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace strata::testing {

struct Jinja2Result {
  bool ok = false;
  std::string text;   // when ok
  std::string error;  // when not ok: "ExceptionType: message"
};

// Each case is an object with "template" (a file path) or "source" (template text), "messages",
// "tools", "add_generation_prompt", "kwargs", "bos_token", "eos_token" (see the script).
// Fails the calling test (ADD_FAILURE) and returns an empty vector if Python cannot run.
std::vector<Jinja2Result> render_with_jinja2(const nlohmann::ordered_json& cases);

// Why the reference cannot run here (the interpreter cannot import jinja2), or nullopt when it
// can, or when STRATA_REQUIRE_JINJA2 is set (CI sets it: there a missing jinja2 must fail the
// tests, not skip them). Machines without Debian's jinja2 (the GPU machine) skip these tests.
std::optional<std::string> jinja2_missing();
#define STRATA_SKIP_WITHOUT_JINJA2() \
  if (const auto jinja2_why = ::strata::testing::jinja2_missing()) GTEST_SKIP() << *jinja2_why

// Why the reference cannot run here (the interpreter cannot import jinja2), or nullopt when it
// can, or when STRATA_REQUIRE_JINJA2 is set (CI sets it: there a missing jinja2 must fail the
// tests, not skip them). Machines without Debian's jinja2 (the GPU machine) skip these tests.
std::optional<std::string> jinja2_missing();
#define STRATA_SKIP_WITHOUT_JINJA2() \
  if (const auto jinja2_why = ::strata::testing::jinja2_missing()) GTEST_SKIP() << *jinja2_why

// strata's side of the same case, through ChatTemplate::render.
struct StrataResult {
  bool ok = false;
  std::string text;
  std::string error;
  int line = 0;
};
StrataResult render_with_strata(const std::string& source, const nlohmann::ordered_json& c);

// Compares one case; returns an empty string when both agree (same bytes, or both raised),
// otherwise a description of the difference.
std::string compare_results(const Jinja2Result& want, const StrataResult& got);

std::string read_file(const std::string& path);

}  // namespace strata::testing
