// Builds the syntax tree from tokens with jinja2's grammar and precedence (including its quirks:
// `**` is left-associative, filters bind tighter than unary minus's operand, `x is test arg`).
// Then resolves filter and test names: unknown names are a syntax error, except inside if-blocks
// and inline if-expressions where jinja2 defers the error to when the expression is evaluated.
#pragma once

#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace strata::jinja {

// Throws TemplateError (Kind::Syntax) with the line. max_nesting bounds nested brackets,
// expressions and blocks, so that hostile input cannot exhaust the stack.
Body parse(const std::vector<Token>& tokens, int max_nesting);

// Part of parse(): binds filter/test definitions and marks what macros read (caller, varargs,
// kwargs). Exposed for the parser's files only.
void resolve_names(Body& body);

}  // namespace strata::jinja
