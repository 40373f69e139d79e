// A compiled Jinja template: parse once, render many times (each render is independent and may
// run concurrently with others). This is the sandboxed environment transformers uses for chat
// templates: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols]) with its tojson, raise_exception and strftime_now.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace strata::jinja {

class Template {
 public:
  // Throws TemplateError (Kind::Syntax, or Limit for absurd nesting) naming `name` and the line.
  explicit Template(std::string_view source, Limits limits = {},
                    std::string name = "chat template");

  // Renders with these variables. Throws TemplateError on any failure, including
  // raise_exception (Kind::Raised, detail() is the template's message) and sandbox limits.
  std::string render(const Dict& variables) const;

  const Limits& limits() const { return limits_; }
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<const Body> body_;
  Limits limits_;
  std::string name_;
};

}  // namespace strata::jinja
