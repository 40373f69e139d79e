#include "text/jinja/call_args.h"

#include <fmt/format.h>

#include "text/jinja/error.h"

namespace strata::jinja {

Params::Params(std::string_view fn, const CallArgs& call, std::initializer_list<const char*> names)
    : values_(names.size()), given_(names.size(), false) {
  if (call.args.size() > names.size()) {
    runtime_error(fmt::format("{} takes at most {} argument(s) ({} given)", fn, names.size(),
                              call.args.size()));
  }
  for (size_t i = 0; i < call.args.size(); ++i) {
    values_[i] = call.args[i];
    given_[i] = true;
  }
  for (const auto& [key, value] : call.kwargs) {
    size_t i = 0;
    for (const char* name : names) {
      if (key == name) break;
      ++i;
    }
    if (i == names.size())
      runtime_error(fmt::format("{} got an unexpected keyword argument '{}'", fn, key));
    if (given_[i]) runtime_error(fmt::format("{} got multiple values for argument '{}'", fn, key));
    values_[i] = value;
    given_[i] = true;
  }
}

void reject_kwargs(std::string_view fn, const CallArgs& call) {
  if (!call.kwargs.empty()) runtime_error(fmt::format("{} takes no keyword arguments", fn));
}

void expect_args(std::string_view fn, const CallArgs& call, size_t min, size_t max) {
  const size_t n = call.args.size();
  if (n < min || n > max) {
    if (min == max) {
      runtime_error(fmt::format("{} takes exactly {} argument(s) ({} given)", fn, min, n));
    }
    runtime_error(fmt::format("{} takes from {} to {} arguments ({} given)", fn, min, max, n));
  }
}

}  // namespace strata::jinja
