// Expression grammar, following jinja2/parser.py function by function.
#include <fmt/format.h>

#include "text/jinja/error.h"
#include "text/jinja/parser_impl.h"

namespace strata::jinja::detail {

// ---- token helpers ------------------------------------------------------------------------------

bool Parser::skip_op(const char* op) {
  if (!is_op(op)) return false;
  advance();
  return true;
}

bool Parser::skip_name(const char* name) {
  if (!is_name(name)) return false;
  advance();
  return true;
}

std::string Parser::describe(const Token& t) {
  switch (t.type) {
    case Tok::Data:
      return "template data / text";
    case Tok::VarBegin:
      return "begin of print statement";
    case Tok::VarEnd:
      return "end of print statement";
    case Tok::BlockBegin:
      return "begin of statement block";
    case Tok::BlockEnd:
      return "end of statement block";
    case Tok::Name:
    case Tok::Op:
      return "'" + t.text + "'";
    case Tok::String:
      return "string";
    case Tok::Integer:
      return "integer";
    case Tok::Float:
      return "float";
    case Tok::Eof:
      return "end of template";
  }
  return "token";
}

void Parser::fail(const std::string& message) const {
  syntax_error(message, cur().line);
}

void Parser::fail_expected(const std::string& expected) const {
  fail(fmt::format("expected {}, got {}", expected, describe(cur())));
}

void Parser::expect_op(const char* op) {
  if (!skip_op(op)) fail_expected(fmt::format("token '{}'", op));
}

void Parser::expect_name_value(const char* name) {
  if (!skip_name(name)) fail_expected(fmt::format("token '{}'", name));
}

std::string Parser::expect_name() {
  if (cur().type != Tok::Name) fail_expected("token 'name'");
  std::string n = cur().text;
  advance();
  return n;
}

void Parser::expect(Tok type) {
  if (cur().type != type) fail_expected(describe(Token{type, "", 0}));
  advance();
}

void Parser::fail_nesting() const {
  throw TemplateError(
      TemplateError::Kind::Limit,
      fmt::format("expressions and blocks nest too deeply (sandbox limit {})", max_nesting_),
      cur().line);
}

Parser::Nest::Nest(Parser& p) : p_(p) {
  if (++p_.depth_ > p_.max_nesting_) {
    --p_.depth_;
    p_.fail_nesting();
  }
}

void Parser::Chain::link() {
  ++links_;
  if (++p_.depth_ > p_.max_nesting_) p_.fail_nesting();
}

// ---- expressions --------------------------------------------------------------------------------

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Nest nest(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  const int line = cur().line;
  ExprPtr expr1 = parse_or();
  Chain chain(*this);
  while (skip_name("if")) {
    chain.link();
    ExprPtr test = parse_or();
    ExprPtr otherwise;
    if (skip_name("else")) otherwise = parse_condexpr();
    expr1 =
        std::make_unique<CondExpr>(std::move(test), std::move(expr1), std::move(otherwise), line);
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  const int line = cur().line;
  ExprPtr left = parse_and();
  Chain chain(*this);
  while (skip_name("or")) {
    chain.link();
    ExprPtr right = parse_and();
    left = std::make_unique<BinaryExpr>(ExprKind::Or, BinOp::Add, std::move(left), std::move(right),
                                        line);
  }
  return left;
}

ExprPtr Parser::parse_and() {
  const int line = cur().line;
  ExprPtr left = parse_not();
  Chain chain(*this);
  while (skip_name("and")) {
    chain.link();
    ExprPtr right = parse_not();
    left = std::make_unique<BinaryExpr>(ExprKind::And, BinOp::Add, std::move(left),
                                        std::move(right), line);
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    const int line = cur().line;
    advance();
    Nest nest(*this);
    return std::make_unique<UnaryExpr>(ExprKind::Not, parse_not(), line);
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr expr = parse_math1();
  std::unique_ptr<CompareExpr> cmp;
  while (true) {
    CmpOp op;
    if (cur().type == Tok::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      const std::string& t = cur().text;
      op = t == "=="   ? CmpOp::Eq
           : t == "!=" ? CmpOp::Ne
           : t == "<"  ? CmpOp::Lt
           : t == "<=" ? CmpOp::Le
           : t == ">"  ? CmpOp::Gt
                       : CmpOp::Ge;
      advance();
    } else if (skip_name("in")) {
      op = CmpOp::In;
    } else if (is_name("not") && look().type == Tok::Name && look().text == "in") {
      advance();
      advance();
      op = CmpOp::NotIn;
    } else {
      break;
    }
    if (!cmp) cmp = std::make_unique<CompareExpr>(std::move(expr), line);
    cmp->rest.emplace_back(op, parse_math1());
  }
  if (cmp) return cmp;
  return expr;
}

ExprPtr Parser::parse_math1() {
  const int line = cur().line;
  ExprPtr left = parse_concat();
  Chain chain(*this);
  while (is_op("+") || is_op("-")) {
    chain.link();
    const BinOp op = is_op("+") ? BinOp::Add : BinOp::Sub;
    advance();
    ExprPtr right = parse_concat();
    left =
        std::make_unique<BinaryExpr>(ExprKind::Binary, op, std::move(left), std::move(right), line);
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  const int line = cur().line;
  std::vector<ExprPtr> parts;
  parts.push_back(parse_math2());
  while (skip_op("~"))
    parts.push_back(parse_math2());
  if (parts.size() == 1) return std::move(parts[0]);
  return std::make_unique<ConcatExpr>(std::move(parts), line);
}

ExprPtr Parser::parse_math2() {
  const int line = cur().line;
  ExprPtr left = parse_pow();
  Chain chain(*this);
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    chain.link();
    const std::string& t = cur().text;
    const BinOp op = t == "*"    ? BinOp::Mul
                     : t == "/"  ? BinOp::Div
                     : t == "//" ? BinOp::FloorDiv
                                 : BinOp::Mod;
    advance();
    ExprPtr right = parse_pow();
    left =
        std::make_unique<BinaryExpr>(ExprKind::Binary, op, std::move(left), std::move(right), line);
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  const int line = cur().line;
  ExprPtr left = parse_unary();
  Chain chain(*this);
  while (skip_op("**")) {
    chain.link();
    ExprPtr right = parse_unary();
    left = std::make_unique<BinaryExpr>(ExprKind::Binary, BinOp::Pow, std::move(left),
                                        std::move(right), line);
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  const int line = cur().line;
  ExprPtr node;
  if (is_op("-")) {
    advance();
    Nest nest(*this);
    node = std::make_unique<UnaryExpr>(ExprKind::Neg, parse_unary(false), line);
  } else if (is_op("+")) {
    advance();
    Nest nest(*this);
    node = std::make_unique<UnaryExpr>(ExprKind::Pos, parse_unary(false), line);
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  const Token& t = cur();
  const int line = t.line;
  switch (t.type) {
    case Tok::Name: {
      ExprPtr node;
      if (t.text == "true" || t.text == "True") {
        node = std::make_unique<ConstExpr>(Value::boolean(true), line);
      } else if (t.text == "false" || t.text == "False") {
        node = std::make_unique<ConstExpr>(Value::boolean(false), line);
      } else if (t.text == "none" || t.text == "None") {
        node = std::make_unique<ConstExpr>(Value::none(), line);
      } else {
        node = std::make_unique<NameExpr>(t.text, line);
      }
      advance();
      return node;
    }
    case Tok::String: {
      std::string s = t.text;
      advance();
      while (cur().type == Tok::String) {  // adjacent literals concatenate, as in Python
        s += cur().text;
        advance();
      }
      return std::make_unique<ConstExpr>(Value::string(std::move(s)), line);
    }
    case Tok::Integer: {
      auto node = std::make_unique<ConstExpr>(Value::integer(t.int_value), line);
      advance();
      return node;
    }
    case Tok::Float: {
      auto node = std::make_unique<ConstExpr>(Value::floating(t.float_value), line);
      advance();
      return node;
    }
    case Tok::Op: {
      Nest nest(*this);
      if (t.text == "(") {
        advance();
        ExprPtr node = parse_tuple(false, true, {}, true);
        expect_op(")");
        return node;
      }
      if (t.text == "[") return parse_list();
      if (t.text == "{") return parse_dict();
      break;
    }
    default:
      break;
  }
  fail(fmt::format("unexpected {}", describe(t)));
}

bool Parser::is_tuple_end(std::initializer_list<const char*> extra_end_names) const {
  if (cur().type == Tok::VarEnd || cur().type == Tok::BlockEnd || is_op(")")) return true;
  for (const char* n : extra_end_names)
    if (is_name(n)) return true;
  return false;
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            std::initializer_list<const char*> extra_end_names,
                            bool explicit_parentheses) {
  Nest nest(*this);
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end_names)) break;
    items.push_back(simplified ? parse_primary() : parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) fail(fmt::format("Expected an expression, got {}", describe(cur())));
  }
  return std::make_unique<SeqExpr>(ExprKind::Tuple, std::move(items), line);
}

ExprPtr Parser::parse_list() {
  const int line = cur().line;
  expect_op("[");
  std::vector<ExprPtr> items;
  while (!is_op("]")) {
    if (!items.empty()) expect_op(",");
    if (is_op("]")) break;
    items.push_back(parse_expression());
  }
  expect_op("]");
  return std::make_unique<SeqExpr>(ExprKind::List, std::move(items), line);
}

ExprPtr Parser::parse_dict() {
  auto node = std::make_unique<DictExpr>(cur().line);
  expect_op("{");
  while (!is_op("}")) {
    if (!node->items.empty()) expect_op(",");
    if (is_op("}")) break;
    ExprPtr key = parse_expression();
    expect_op(":");
    ExprPtr value = parse_expression();
    node->items.emplace_back(std::move(key), std::move(value));
  }
  expect_op("}");
  return node;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  Chain chain(*this);
  while (true) {
    chain.link();
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      auto call = std::make_unique<CallExpr>(std::move(node), cur().line);
      parse_call_args(call->args);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  Chain chain(*this);
  while (true) {
    chain.link();
    if (is_op("|")) {
      node = parse_filter(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      auto call = std::make_unique<CallExpr>(std::move(node), cur().line);
      parse_call_args(call->args);
      node = std::move(call);
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  Nest nest(*this);
  const int line = cur().line;
  if (skip_op(".")) {
    if (cur().type == Tok::Name) {
      std::string attr = cur().text;
      advance();
      return std::make_unique<GetattrExpr>(std::move(node), std::move(attr), line);
    }
    if (cur().type == Tok::Integer) {
      auto key = std::make_unique<ConstExpr>(Value::integer(cur().int_value), line);
      advance();
      return std::make_unique<GetitemExpr>(std::move(node), std::move(key), line);
    }
    fail_expected("name or number");
  }
  expect_op("[");
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr key;
  if (args.size() == 1) {
    key = std::move(args[0]);
  } else {
    key = std::make_unique<SeqExpr>(ExprKind::Tuple, std::move(args), line);
  }
  return std::make_unique<GetitemExpr>(std::move(node), std::move(key), line);
}

ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr first;
  if (!skip_op(":")) {
    first = parse_expression();
    if (!is_op(":")) return first;
    advance();
  }
  auto slice = std::make_unique<SliceExpr>(line);
  slice->start = std::move(first);
  if (!is_op(":") && !is_op("]") && !is_op(",")) slice->stop = parse_expression();
  if (skip_op(":")) {
    if (!is_op("]") && !is_op(",")) slice->step = parse_expression();
  }
  return slice;
}

void Parser::parse_call_args(CallArgsExpr& out) {
  Nest nest(*this);
  expect_op("(");
  bool any = false;
  while (!is_op(")")) {
    if (any) {
      expect_op(",");
      if (is_op(")")) break;
    }
    any = true;
    if (skip_op("*")) {
      if (out.star) fail("Invalid argument syntax: more than one *args");
      out.star = parse_expression();
    } else if (skip_op("**")) {
      if (out.double_star) fail("Invalid argument syntax: more than one **kwargs");
      out.double_star = parse_expression();
    } else if (cur().type == Tok::Name && look().type == Tok::Op && look().text == "=") {
      if (out.double_star) fail("Invalid argument syntax: keyword after **kwargs");
      std::string key = cur().text;
      advance();
      advance();
      out.kwargs.emplace_back(std::move(key), parse_expression());
    } else {
      if (out.star || out.double_star || !out.kwargs.empty())
        fail("Invalid argument syntax: positional argument follows keyword argument");
      out.args.push_back(parse_expression());
    }
  }
  expect_op(")");
}

std::string Parser::parse_dotted_name() {
  std::string name = expect_name();
  while (skip_op("."))
    name += "." + expect_name();
  return name;
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  Chain chain(*this);
  while (is_op("|") || start_inline) {
    chain.link();
    if (!start_inline) advance();
    start_inline = false;
    const int line = cur().line;
    auto f = std::make_unique<FilterExpr>(std::move(node), parse_dotted_name(), line);
    if (is_op("(")) parse_call_args(f->args);
    node = std::move(f);
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  const int line = cur().line;
  advance();  // 'is'
  const bool negated = skip_name("not");
  auto t = std::make_unique<TestExpr>(std::move(node), parse_dotted_name(), line);
  if (is_op("(")) {
    parse_call_args(t->args);
  } else if ((cur().type == Tok::Name || cur().type == Tok::String || cur().type == Tok::Integer ||
              cur().type == Tok::Float || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    // `x is divisibleby 3`: one argument without parentheses.
    if (is_name("is")) fail("You cannot chain multiple tests with is");
    t->args.args.push_back(parse_postfix(parse_primary()));
  }
  if (negated) return std::make_unique<UnaryExpr>(ExprKind::Not, std::move(t), line);
  return t;
}

}  // namespace strata::jinja::detail
