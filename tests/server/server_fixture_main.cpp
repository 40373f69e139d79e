// strata_server_fixture: the OpenAI server with the demo model's tokenizer and a scripted engine
// (tests/server/scripted_engine.h), for the Node SDK tests of what the demo model cannot be made
// to produce: reasoning and tool calls (--script), the API key, the full waiting queue. Prints
// "listening on http://127.0.0.1:PORT" once ready; stops on SIGINT / SIGTERM.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "server_harness.h"

int main(int argc, char** argv) {
  using namespace strata::server;
  testing::HarnessOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "fixture: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--script") o.engine.script = next();
    else if (a == "--chat-template") o.chat_template_file = next();
    else if (a == "--tool-call-parser") o.tool_call_parser = next();
    else if (a == "--reasoning-parser") o.reasoning_parser = next();
    else if (a == "--enable-auto-tool-choice") o.enable_auto_tool_choice = true;
    else if (a == "--api-key") o.server.api_key = next();
    else if (a == "--max-waiting") o.engine.max_waiting = std::stoll(next());
    else if (a == "--max-running") o.engine.max_running = std::stoll(next());
    else if (a == "--step-ms") o.engine.step_interval = std::chrono::milliseconds(std::stoll(next()));
    else {
      std::fprintf(stderr, "fixture: unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  try {
    testing::ServerHarness h(o);
    std::fprintf(stderr, "listening on http://127.0.0.1:%u\n", static_cast<unsigned>(h.port()));
    std::fflush(stderr);
    h.server().run_until_shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fixture: %s\n", e.what());
    return 1;
  }
  return 0;
}
