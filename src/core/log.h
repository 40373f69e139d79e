// Minimal leveled logging to stderr. STRATA_LOG_LEVEL=debug|info|warn|error (default info).
#pragma once

#include <fmt/format.h>

#include <string_view>

namespace strata::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

Level threshold();
void write(Level level, std::string_view msg);

template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... a) {
  if (threshold() <= Level::Debug) write(Level::Debug, fmt::format(f, std::forward<Args>(a)...));
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... a) {
  if (threshold() <= Level::Info) write(Level::Info, fmt::format(f, std::forward<Args>(a)...));
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... a) {
  if (threshold() <= Level::Warn) write(Level::Warn, fmt::format(f, std::forward<Args>(a)...));
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... a) {
  write(Level::Error, fmt::format(f, std::forward<Args>(a)...));
}

}  // namespace strata::log
