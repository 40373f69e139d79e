// Reading values the way jinja2's sandboxed environment does: `obj.name` tries the Python
// attribute first (a method such as dict.items, or a namespace field) and then the item;
// `obj[key]` tries the item first and then the attribute; a miss is an Undefined that remembers
// why, so printing it is empty but using it raises jinja2's message. Methods that would mutate a
// list or dict are "unsafe" (ImmutableSandboxedEnvironment): reading them is an Undefined whose
// use raises a security error. Also Python iteration, len() and slicing.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace strata::jinja {

Value getattr(const Value& obj, const std::string& name);
Value getitem(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound may be None (absent). Slices are plain Python subscription in
// jinja2 (not environment.getitem): non-integer bounds, dicts and numbers raise.
Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step,
            Budget& budget);

// Python iter(): list-likes yield their items, str its characters, dict its keys, Undefined
// nothing; an Iterator yields its items once. Throws for non-iterables (None, numbers...).
std::shared_ptr<const std::vector<Value>> iterate(const Value& v);
// Python len(); throws for generators, numbers, None.
int64_t length(const Value& v);

// The message jinja2 gives an Undefined for a missing attribute or item of obj.
std::string missing_attribute(const Value& obj, const Value& name);

}  // namespace strata::jinja
