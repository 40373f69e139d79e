// Python string formatting reachable from templates: printf-style (`"%s=%d" | format(k, v)`,
// jinja2's `format` filter is `value % args`) and str.format (`"{}: {name}".format(...)`, which
// the sandbox routes through a safe formatter). Conversions: %s %r %d %i %f %e %g %x %o %c %%
// with flags, width and precision; str.format fields with auto/explicit numbering, names,
// .attr / [key] access, !s / !r and the common format specs. Anything else raises.
#pragma once

#include <string>

#include "text/jinja/call_args.h"
#include "text/jinja/value.h"

namespace strata::jinja {

// format % args: args is a tuple (positional), a dict (for %(name)s) or a single value.
std::string python_percent_format(const std::string& format, const Value& args);
std::string python_str_format(const std::string& format, const CallArgs& args);

}  // namespace strata::jinja
