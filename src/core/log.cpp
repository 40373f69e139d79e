#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace strata::log {

Level threshold() {
  static const Level level = [] {
    const char* env = std::getenv("STRATA_LOG_LEVEL");
    if (!env) return Level::Info;
    if (!std::strcmp(env, "debug")) return Level::Debug;
    if (!std::strcmp(env, "warn")) return Level::Warn;
    if (!std::strcmp(env, "error")) return Level::Error;
    return Level::Info;
  }();
  return level;
}

void write(Level level, std::string_view msg) {
  static std::mutex mu;
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[strata %s] %.*s\n", names[static_cast<int>(level)],
               static_cast<int>(msg.size()), msg.data());
}

}  // namespace strata::log
