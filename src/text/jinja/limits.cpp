#include "text/jinja/limits.h"

#include <fmt/format.h>

#include "text/jinja/error.h"

namespace strata::jinja {

void Budget::charge(size_t bytes) {
  if (bytes > limits_.max_output_bytes) {
    throw TemplateError(TemplateError::Kind::Limit,
                        fmt::format("a value of {} bytes exceeds the sandbox limit of {} bytes",
                                    bytes, limits_.max_output_bytes));
  }
  allocated_ += bytes;
  if (allocated_ > limits_.max_alloc_bytes) {
    throw TemplateError(TemplateError::Kind::Limit,
                        fmt::format("the template built more than {} bytes of values, the sandbox "
                                    "limit",
                                    limits_.max_alloc_bytes));
  }
}

void Budget::steps_exceeded() const {
  throw TemplateError(TemplateError::Kind::Limit,
                      fmt::format("the template ran more than {} steps, the sandbox limit "
                                  "(an endless or very long loop?)",
                                  limits_.max_steps));
}

}  // namespace strata::jinja
