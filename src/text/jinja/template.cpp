#include "text/jinja/template.h"

#include "text/jinja/error.h"
#include "text/jinja/lexer.h"
#include "text/jinja/parser.h"
#include "text/jinja/renderer.h"

namespace strata::jinja {

Template::Template(std::string_view source, Limits limits, std::string name)
    : limits_(limits), name_(std::move(name)) {
  try {
    body_ = std::make_shared<const Body>(parse(tokenize(source), limits_.max_nesting));
  } catch (TemplateError& e) {
    e.set_source_name(name_);
    throw;
  }
}

std::string Template::render(const Dict& variables) const {
  Renderer r(*body_, limits_);
  try {
    return r.render(variables);
  } catch (TemplateError& e) {
    e.set_source_name(name_);
    throw;
  }
}

}  // namespace strata::jinja
