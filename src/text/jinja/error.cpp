#include "text/jinja/error.h"

#include <fmt/format.h>

namespace strata::jinja {

TemplateError::TemplateError(Kind kind, std::string detail, int line)
    : Error(detail), kind_(kind), detail_(std::move(detail)), line_(line) {
  rebuild();
}

void TemplateError::locate(int line) {
  if (line_ == 0 && line > 0) {
    line_ = line;
    rebuild();
  }
}

void TemplateError::set_source_name(std::string name) {
  name_ = std::move(name);
  rebuild();
}

void TemplateError::rebuild() {
  full_ = line_ > 0 ? fmt::format("{}, line {}: {}", name_, line_, detail_)
                    : fmt::format("{}: {}", name_, detail_);
}

void runtime_error(std::string detail) {
  throw TemplateError(TemplateError::Kind::Runtime, std::move(detail));
}

void syntax_error(std::string detail, int line) {
  throw TemplateError(TemplateError::Kind::Syntax, std::move(detail), line);
}

}  // namespace strata::jinja
