// Statement grammar ({% tags %}), following jinja2/parser.py. Tags that chat templates have no
// use for and that would reach outside the template (extends, include, import, from, block) are
// not part of this environment and fail as unknown tags.
#include <fmt/format.h>

#include <functional>

#include "text/jinja/error.h"
#include "text/jinja/parser.h"
#include "text/jinja/parser_impl.h"

namespace strata::jinja {
namespace detail {
namespace {

bool matches_any(const Token& t, std::initializer_list<const char*> names) {
  if (t.type != Tok::Name) return false;
  for (const char* n : names)
    if (t.text == n) return true;
  return false;
}

std::string quoted_list(std::initializer_list<const char*> names) {
  std::string out;
  size_t i = 0;
  for (const char* n : names) {
    if (i++) out += i == names.size() ? " or " : ", ";
    out += fmt::format("'{}'", n);
  }
  return out;
}

}  // namespace

Body Parser::parse_template() {
  Body body = subparse({});
  if (cur().type != Tok::Eof) fail(fmt::format("unexpected {}", describe(cur())));
  return body;
}

Body Parser::subparse(std::initializer_list<const char*> end_tags) {
  Body body;
  while (cur().type != Tok::Eof) {
    const Token& t = cur();
    if (t.type == Tok::Data) {
      body.push_back(std::make_unique<OutputStmt>(t.text, t.line));
      advance();
    } else if (t.type == Tok::VarBegin) {
      const int line = t.line;
      advance();
      ExprPtr e = parse_tuple();
      expect(Tok::VarEnd);
      body.push_back(std::make_unique<PrintStmt>(std::move(e), line));
    } else if (t.type == Tok::BlockBegin) {
      advance();
      if (end_tags.size() && matches_any(cur(), end_tags)) return body;
      body.push_back(parse_statement());
      expect(Tok::BlockEnd);
    } else {
      fail(fmt::format("unexpected {}", describe(t)));
    }
  }
  return body;
}

void Parser::fail_eof(std::initializer_list<const char*> end_tags) const {
  std::string msg = "Unexpected end of template.";
  if (end_tags.size())
    msg += fmt::format(" Jinja was looking for the following tags: {}.", quoted_list(end_tags));
  if (!open_blocks_.empty())
    msg +=
        fmt::format(" The innermost block that needs to be closed is '{}'.", open_blocks_.back());
  syntax_error(msg, cur().line);
}

Body Parser::parse_statements(std::initializer_list<const char*> end_tags, bool drop_needle) {
  skip_op(":");
  expect(Tok::BlockEnd);
  Body body = subparse(end_tags);
  if (cur().type == Tok::Eof) fail_eof(end_tags);
  if (drop_needle) advance();
  return body;
}

StmtPtr Parser::parse_statement() {
  if (cur().type != Tok::Name) fail("tag name expected");
  const std::string tag = cur().text;
  Nest nest(*this);
  open_blocks_.push_back(tag);
  StmtPtr s;
  if (tag == "for") {
    s = parse_for();
  } else if (tag == "if") {
    s = parse_if();
  } else if (tag == "set") {
    s = parse_set();
  } else if (tag == "macro") {
    s = parse_macro();
  } else if (tag == "call") {
    s = parse_call_block();
  } else if (tag == "filter") {
    s = parse_filter_block();
  } else if (tag == "with") {
    s = parse_with();
  } else if (tag == "print") {
    s = parse_print();
  } else if (tag == "break") {
    s = parse_loop_control(StmtKind::Break);
  } else if (tag == "continue") {
    s = parse_loop_control(StmtKind::Continue);
  } else if (tag == "generation") {
    s = parse_generation();
  } else {
    std::string msg = fmt::format("Encountered unknown tag '{}'.", tag);
    if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block")
      msg += " Chat templates cannot load other templates in this sandbox.";
    if (open_blocks_.size() > 1)
      msg += fmt::format(" The innermost block that needs to be closed is '{}'.",
                         open_blocks_[open_blocks_.size() - 2]);
    fail(msg);
  }
  open_blocks_.pop_back();
  return s;
}

StmtPtr Parser::parse_loop_control(StmtKind kind) {
  const int line = cur().line;
  if (loop_depth_ == 0)
    fail(kind == StmtKind::Break ? "'break' outside loop" : "'continue' not properly in loop");
  advance();
  return std::make_unique<SimpleStmt>(kind, line);
}

StmtPtr Parser::parse_for() {
  auto s = std::make_unique<ForStmt>(cur().line);
  advance();
  s->target = parse_assign_target(true, false, {"in"});
  expect_name_value("in");
  s->iter = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) s->filter = parse_expression();
  s->recursive = skip_name("recursive");
  ++loop_depth_;
  s->body = parse_statements({"endfor", "else"});
  --loop_depth_;
  if (cur().text == "endfor") {
    advance();
  } else {
    advance();  // else
    s->else_body = parse_statements({"endfor"}, true);
  }
  return s;
}

StmtPtr Parser::parse_if() {
  auto s = std::make_unique<IfStmt>(cur().line);
  advance();
  ExprPtr test = parse_tuple(false, false);
  Body body = parse_statements({"elif", "else", "endif"});
  s->branches.emplace_back(std::move(test), std::move(body));
  while (true) {
    const std::string tag = cur().text;
    advance();
    if (tag == "elif") {
      ExprPtr t = parse_tuple(false, false);
      Body b = parse_statements({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(t), std::move(b));
    } else if (tag == "else") {
      s->else_body = parse_statements({"endif"}, true);
      break;
    } else {
      break;
    }
  }
  return s;
}

StmtPtr Parser::parse_set() {
  const int line = cur().line;
  advance();
  Target target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    auto s = std::make_unique<SetStmt>(line);
    s->target = std::move(target);
    s->value = parse_tuple();
    return s;
  }
  auto s = std::make_unique<SetBlockStmt>(line);
  s->target = std::move(target);
  s->filter = parse_filter(nullptr);
  s->body = parse_statements({"endset"}, true);
  return s;
}

void Parser::parse_signature(MacroStmt& m) {
  expect_op("(");
  bool any_default = false;
  while (!is_op(")")) {
    if (!m.params.empty()) expect_op(",");
    const std::string name = expect_name();
    if (name == "true" || name == "false" || name == "none" || name == "True" || name == "False" ||
        name == "None")
      fail(fmt::format("can't assign to '{}'", name));
    m.params.push_back(name);
    if (skip_op("=")) {
      m.defaults.push_back(parse_expression());
      any_default = true;
    } else {
      if (any_default) fail("non-default argument follows default argument");
      m.defaults.push_back(nullptr);
    }
  }
  expect_op(")");
}

StmtPtr Parser::parse_macro() {
  auto m = std::make_unique<MacroStmt>(cur().line);
  advance();
  m->name = expect_name();
  parse_signature(*m);
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;  // a macro body is not inside the enclosing loop
  m->body = parse_statements({"endmacro"}, true);
  loop_depth_ = saved_loop_depth;
  return m;
}

StmtPtr Parser::parse_call_block() {
  auto s = std::make_unique<CallBlockStmt>(cur().line);
  advance();
  s->caller = std::make_unique<MacroStmt>(s->line);
  s->caller->name = "caller";
  if (is_op("(")) parse_signature(*s->caller);
  ExprPtr call = parse_expression();
  if (call->kind != ExprKind::Call) syntax_error("expected call", s->line);
  s->call.reset(static_cast<CallExpr*>(call.release()));
  const int saved_loop_depth = loop_depth_;
  loop_depth_ = 0;
  s->caller->body = parse_statements({"endcall"}, true);
  loop_depth_ = saved_loop_depth;
  return s;
}

StmtPtr Parser::parse_filter_block() {
  auto s = std::make_unique<FilterBlockStmt>(cur().line);
  advance();
  s->filter = parse_filter(nullptr, true);
  s->body = parse_statements({"endfilter"}, true);
  return s;
}

StmtPtr Parser::parse_with() {
  auto s = std::make_unique<WithStmt>(cur().line);
  advance();
  while (cur().type != Tok::BlockEnd) {
    if (!s->assigns.empty()) expect_op(",");
    Target t = parse_assign_target();
    expect_op("=");
    s->assigns.emplace_back(std::move(t), parse_expression());
  }
  s->body = parse_statements({"endwith"}, true);
  return s;
}

StmtPtr Parser::parse_print() {
  const int line = cur().line;
  advance();
  std::vector<ExprPtr> items;
  while (cur().type != Tok::BlockEnd) {
    if (!items.empty()) expect_op(",");
    items.push_back(parse_expression());
  }
  // {% print a, b %} writes each expression in turn.
  auto scope = std::make_unique<ScopeStmt>(line);
  for (auto& e : items)
    scope->body.push_back(std::make_unique<PrintStmt>(std::move(e), line));
  return scope;
}

StmtPtr Parser::parse_generation() {
  // transformers' AssistantTracker: {% generation %}...{% endgeneration %} renders its body.
  auto s = std::make_unique<ScopeStmt>(cur().line);
  advance();
  s->body = parse_statements({"endgeneration"}, true);
  return s;
}

Target Parser::parse_assign_target(bool with_tuple, bool name_only,
                                   std::initializer_list<const char*> extra_end_names,
                                   bool with_namespace) {
  Target t;
  t.line = cur().line;
  if (with_namespace && cur().type == Tok::Name && look().type == Tok::Op && look().text == ".") {
    t.kind = Target::Kind::NamespaceAttr;
    t.name = expect_name();
    expect_op(".");
    t.attr = expect_name();
    return t;
  }
  if (name_only) {
    t.name = expect_name();
    return t;
  }
  ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end_names) : parse_primary();
  // Only names and tuples of names can be assigned.
  std::function<Target(const Expr&)> convert = [&](const Expr& x) -> Target {
    Target r;
    r.line = x.line;
    if (x.kind == ExprKind::Name) {
      r.name = static_cast<const NameExpr&>(x).name;
      return r;
    }
    if (x.kind == ExprKind::Tuple) {
      r.kind = Target::Kind::Tuple;
      for (const auto& item : static_cast<const SeqExpr&>(x).items)
        r.items.push_back(convert(*item));
      return r;
    }
    syntax_error(fmt::format("can't assign to {}",
                             x.kind == ExprKind::Const ? "a constant" : "this expression"),
                 x.line);
  };
  return convert(*e);
}

}  // namespace detail

Body parse(const std::vector<Token>& tokens, int max_nesting) {
  detail::Parser p(tokens, max_nesting);
  Body body = p.parse_template();
  resolve_names(body);
  return body;
}

}  // namespace strata::jinja
