#include "jinja2_reference.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/chat_template.h"
#include "text/jinja/error.h"

namespace strata::testing {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {
std::string python() {
  const char* p = std::getenv("STRATA_PYTHON");
  return p && *p ? p : "/usr/bin/python3";
}
}  // namespace

std::optional<std::string> jinja2_missing() {
  static const int rc = std::system((python() + " -c 'import jinja2' 2>/dev/null").c_str());
  if (rc == 0 || std::getenv("STRATA_REQUIRE_JINJA2")) return std::nullopt;
  return python() +
         " cannot import jinja2, the reference these tests compare with (Debian's "
         "python3-jinja2: scripts/install-deps.sh installs it; CI sets STRATA_REQUIRE_JINJA2=1)";
}

std::vector<Jinja2Result> render_with_jinja2(const nlohmann::ordered_json& cases) {
  static std::atomic<int> counter{0};
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem =
      "strata_jinja2_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  const auto in_path = dir / (stem + "_cases.json");
  const auto out_path = dir / (stem + "_results.json");
  {
    std::ofstream out(in_path, std::ios::binary);
    out << cases.dump();
  }
  const std::string script = std::string(STRATA_SOURCE_DIR) + "/tests/text/render_with_jinja2.py";
  const std::string cmd =
      python() + " '" + script + "' '" + in_path.string() + "' '" + out_path.string() + "'";
  const int rc = std::system(cmd.c_str());
  std::vector<Jinja2Result> results;
  if (rc != 0) {
    ADD_FAILURE() << "the jinja2 reference did not run (" << cmd << " exited with " << rc
                  << "); scripts/install-deps.sh installs python3-jinja2; STRATA_PYTHON picks the "
                     "interpreter";
  } else {
    const auto parsed = nlohmann::json::parse(read_file(out_path.string()));
    for (const auto& r : parsed) {
      Jinja2Result x;
      x.ok = r.at("ok").get<bool>();
      if (x.ok) {
        x.text = r.at("text").get<std::string>();
      } else {
        x.error = r.at("error").get<std::string>();
      }
      results.push_back(std::move(x));
    }
    if (results.size() != cases.size())
      ADD_FAILURE() << "jinja2 returned " << results.size() << " results for " << cases.size()
                    << " cases";
  }
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
  return results;
}

StrataResult render_with_strata(const std::string& source, const nlohmann::ordered_json& c) {
  StrataResult r;
  auto token = [&](const char* key) -> std::optional<std::string> {
    if (!c.contains(key) || c[key].is_null()) return std::nullopt;
    return c[key].get<std::string>();
  };
  try {
    const ChatTemplate t(source);
    r.text = t.render(
        c.value("messages", nlohmann::ordered_json::array()),
        c.value("tools", nlohmann::ordered_json()), c.value("add_generation_prompt", false),
        c.value("kwargs", nlohmann::ordered_json()), token("bos_token"), token("eos_token"));
    r.ok = true;
  } catch (const jinja::TemplateError& e) {
    r.error = e.what();
    r.line = e.line();
  } catch (const Error& e) {
    r.error = e.what();
  }
  return r;
}

std::string compare_results(const Jinja2Result& want, const StrataResult& got) {
  if (want.ok && got.ok) {
    if (want.text == got.text) return "";
    size_t i = 0;
    while (i < want.text.size() && i < got.text.size() && want.text[i] == got.text[i])
      ++i;
    const size_t from = i > 40 ? i - 40 : 0;
    return "output differs at byte " + std::to_string(i) + ":\n  jinja2: " +
           nlohmann::json(want.text.substr(from, 120))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
           "\n  strata: " +
           nlohmann::json(got.text.substr(from, 120))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  if (!want.ok && !got.ok) return "";
  if (!want.ok)
    return "jinja2 raised (" + want.error + ") but strata rendered " +
           nlohmann::json(got.text.substr(0, 200))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "jinja2 rendered but strata raised: " + got.error;
}

}  // namespace strata::testing
