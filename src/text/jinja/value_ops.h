// Python operators on template values, as the code jinja2 generates runs them: arithmetic with
// Python's int/float rules (floor division and modulo round toward -inf, / is true division),
// str/list/tuple concatenation and repetition, comparisons (chained by the caller), `in`, and
// jinja2's `~` (str() of each operand). Anything Python raises TypeError or ZeroDivisionError for
// throws TemplateError; any arithmetic on an Undefined throws its "is undefined" message.
#pragma once

#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace strata::jinja {

Value binary_op(BinOp op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v);
Value unary_plus(const Value& v);

// Eq, Ne, Lt, Le, Gt, Ge, In, NotIn for one link of a comparison chain.
bool compare(CmpOp op, const Value& a, const Value& b);
// a < b with Python's rules (numbers, str, list, tuple); throws TypeError-like for other pairs.
bool less_than(const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

// `a ~ b ~ c`: "".join(str(x) for x in parts).
Value concat(const std::vector<Value>& parts, Budget& budget);

// markupsafe.escape: & < > ' " as HTML entities.
std::string html_escape(const std::string& s);

// Throws the error jinja2 raises when an Undefined is used as a value (arithmetic, call, attr).
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace strata::jinja
