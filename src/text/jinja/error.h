// Errors of the template interpreter. Everything a template or its inputs can cause (syntax
// errors, type errors, raise_exception, exhausted limits) throws TemplateError, a strata::Error,
// and carries the template line where it happened so the message points at the cause.
#pragma once

#include <string>

#include "core/check.h"

namespace strata::jinja {

class TemplateError : public Error {
 public:
  enum class Kind {
    Syntax,   // the template does not parse (jinja2 TemplateSyntaxError / AssertionError)
    Runtime,  // a type error, undefined value, bad argument... while rendering
    Raised,   // the template called raise_exception(message)
    Limit,    // a sandbox limit (steps, output size, recursion depth) was reached
  };

  TemplateError(Kind kind, std::string detail, int line = 0);

  Kind kind() const { return kind_; }
  int line() const { return line_; }
  // The message without the location prefix (for raise_exception: exactly the template's text).
  const std::string& detail() const { return detail_; }
  const std::string& source_name() const { return name_; }

  // Fills in the location once; the innermost node that sees the error knows the line best.
  void locate(int line);
  void set_source_name(std::string name);

  const char* what() const noexcept override { return full_.c_str(); }

 private:
  void rebuild();

  Kind kind_;
  std::string detail_;
  int line_;
  std::string name_ = "chat template";
  std::string full_;
};

[[noreturn]] void runtime_error(std::string detail);
[[noreturn]] void syntax_error(std::string detail, int line);

}  // namespace strata::jinja
