// Methods of builtin values reachable from templates: str (strip, split, startswith, replace,
// format...), dict (items, keys, values, get) and list/tuple (index, count). Mutating methods are
// not callable: the sandbox returns an Undefined that raises when called, as jinja2's
// ImmutableSandboxedEnvironment does for list.append or dict.update.
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace strata::jinja {

// The bound method `self.name`, or nullopt when the type has no such attribute.
std::optional<Value> method_of(const Value& self, const std::string& name);

}  // namespace strata::jinja
