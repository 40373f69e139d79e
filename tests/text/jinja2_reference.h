// Runs Python's jinja2 (python3 on PATH, or $STRATA_PYTHON; Debian's python3-jinja2 in CI) as the
// independent reference for the chat-template tests: tests/text/render_with_jinja2.py builds the
// environment transformers builds and renders a batch of cases in one process.
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
