// Internal to the parser: the recursive-descent Parser shared by parser_expr.cpp (expressions)
// and parser_stmt.cpp (statements and tags).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/lexer.h"

namespace strata::jinja::detail {

class Parser {
 public:
  Parser(const std::vector<Token>& tokens, int max_nesting)
      : tokens_(tokens), max_nesting_(max_nesting) {}

  Body parse_template();

  // ---- expressions (parser_expr.cpp) ----
  ExprPtr parse_expression(bool with_condexpr = true);
  // A comma list: a single expression, or a Tuple when a comma appears. Ends at }}, %}, ')' or
  // one of extra_end_names (e.g. "in" after a for target).
  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      std::initializer_list<const char*> extra_end_names = {},
                      bool explicit_parentheses = false);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter(ExprPtr node, bool start_inline = false);
  void parse_call_args(CallArgsExpr& out);

  // ---- statements (parser_stmt.cpp) ----
  Target parse_assign_target(bool with_tuple = true, bool name_only = false,
                             std::initializer_list<const char*> extra_end_names = {},
                             bool with_namespace = false);

  // ---- token stream ----
  const Token& cur() const { return tokens_[pos_]; }
  const Token& look(size_t n = 1) const {
    return tokens_[pos_ + n < tokens_.size() ? pos_ + n : tokens_.size() - 1];
  }
  void advance() {
    if (pos_ + 1 < tokens_.size()) ++pos_;
  }
  bool is_op(const char* op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(const char* name) const { return cur().type == Tok::Name && cur().text == name; }
  bool skip_op(const char* op);
  bool skip_name(const char* name);
  void expect_op(const char* op);
  void expect_name_value(const char* name);
  std::string expect_name();
  void expect(Tok type);
  [[noreturn]] void fail(const std::string& message) const;
  [[noreturn]] void fail_expected(const std::string& expected) const;
  static std::string describe(const Token& t);

  // Counts nesting of expressions and blocks; throws past max_nesting.
  class Nest {
   public:
    explicit Nest(Parser& p);
    ~Nest() { --p_.depth_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;

   private:
    Parser& p_;
  };

  // A left-associative chain (a + b + c, x.y.z, v | f | g) nests one node per link: each link
  // counts as one level of nesting until the chain is parsed.
  class Chain {
   public:
    explicit Chain(Parser& p) : p_(p) {}
    ~Chain() { p_.depth_ -= links_; }
    Chain(const Chain&) = delete;
    Chain& operator=(const Chain&) = delete;
    void link();

   private:
    Parser& p_;
    int links_ = 0;
  };

 private:
  [[noreturn]] void fail_nesting() const;
  // expressions
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  bool is_tuple_end(std::initializer_list<const char*> extra_end_names) const;
  std::string parse_dotted_name();

  // statements
  Body subparse(std::initializer_list<const char*> end_tags);
  Body parse_statements(std::initializer_list<const char*> end_tags, bool drop_needle = false);
  StmtPtr parse_statement();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();
  StmtPtr parse_print();
  StmtPtr parse_loop_control(StmtKind kind);
  StmtPtr parse_generation();
  void parse_signature(MacroStmt& m);
  [[noreturn]] void fail_eof(std::initializer_list<const char*> end_tags) const;

  const std::vector<Token>& tokens_;
  size_t pos_ = 0;
  int max_nesting_;
  int depth_ = 0;
  int loop_depth_ = 0;                    // break/continue are only valid inside a for body
  std::vector<std::string> open_blocks_;  // for "innermost block" messages
};

}  // namespace strata::jinja::detail
