// The parsed template: expression and statement nodes, each with the source line it came from.
// Nodes are plain structs owned through unique_ptr; the interpreter switches on `kind`.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace strata::jinja {

struct FilterDef;
struct TestDef;

// ---- expressions ------------------------------------------------------------------------------

enum class ExprKind {
  Const,
  Name,
  List,
  Tuple,
  Dict,
  Getattr,
  Getitem,
  Slice,  // only as the key of a Getitem
  Call,
  Filter,
  Test,
  Neg,
  Pos,
  Not,
  Binary,
  And,
  Or,
  Compare,
  Cond,
  Concat,
};

struct Expr {
  Expr(ExprKind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  ExprKind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct ConstExpr : Expr {
  ConstExpr(Value v, int l) : Expr(ExprKind::Const, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(std::string n, int l) : Expr(ExprKind::Name, l), name(std::move(n)) {}
  std::string name;
};

struct SeqExpr : Expr {  // List or Tuple literal
  SeqExpr(ExprKind k, std::vector<ExprPtr> i, int l) : Expr(k, l), items(std::move(i)) {}
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(ExprKind::Dict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct GetattrExpr : Expr {
  GetattrExpr(ExprPtr o, std::string a, int l)
      : Expr(ExprKind::Getattr, l), obj(std::move(o)), attr(std::move(a)) {}
  ExprPtr obj;
  std::string attr;
};

struct GetitemExpr : Expr {
  GetitemExpr(ExprPtr o, ExprPtr k, int l)
      : Expr(ExprKind::Getitem, l), obj(std::move(o)), key(std::move(k)) {}
  ExprPtr obj;
  ExprPtr key;  // may be a SliceExpr
};

struct SliceExpr : Expr {
  explicit SliceExpr(int l) : Expr(ExprKind::Slice, l) {}
  ExprPtr start, stop, step;  // each may be null
};

struct CallArgsExpr {
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  ExprPtr star;         // *args
  ExprPtr double_star;  // **kwargs
};

struct CallExpr : Expr {
  CallExpr(ExprPtr c, int l) : Expr(ExprKind::Call, l), callee(std::move(c)) {}
  ExprPtr callee;
  CallArgsExpr args;
};

// value | name(args). In filter blocks and `set x | f` the value is null: the filter applies to
// the rendered body.
struct FilterExpr : Expr {
  FilterExpr(ExprPtr v, std::string n, int l)
      : Expr(ExprKind::Filter, l), value(std::move(v)), name(std::move(n)) {}
  ExprPtr value;
  std::string name;
  const FilterDef* def = nullptr;  // null: unknown, an error when evaluated
  CallArgsExpr args;
};

struct TestExpr : Expr {
  TestExpr(ExprPtr v, std::string n, int l)
      : Expr(ExprKind::Test, l), value(std::move(v)), name(std::move(n)) {}
  ExprPtr value;
  std::string name;
  const TestDef* def = nullptr;
  CallArgsExpr args;
};

struct UnaryExpr : Expr {  // Neg, Pos, Not
  UnaryExpr(ExprKind k, ExprPtr o, int l) : Expr(k, l), operand(std::move(o)) {}
  ExprPtr operand;
};

enum class BinOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };

struct BinaryExpr : Expr {  // Binary (with op), And, Or
  BinaryExpr(ExprKind k, BinOp o, ExprPtr a, ExprPtr b, int l)
      : Expr(k, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinOp op;
  ExprPtr left, right;
};

enum class CmpOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

struct CompareExpr : Expr {
  CompareExpr(ExprPtr f, int l) : Expr(ExprKind::Compare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CmpOp, ExprPtr>> rest;  // Python chains: a < b < c
};

struct CondExpr : Expr {
  CondExpr(ExprPtr t, ExprPtr a, ExprPtr b, int l)
      : Expr(ExprKind::Cond, l), test(std::move(t)), then(std::move(a)), otherwise(std::move(b)) {}
  ExprPtr test, then, otherwise;  // otherwise may be null: undefined when the test fails
};

struct ConcatExpr : Expr {
  ConcatExpr(std::vector<ExprPtr> p, int l) : Expr(ExprKind::Concat, l), parts(std::move(p)) {}
  std::vector<ExprPtr> parts;
};

// ---- statements -------------------------------------------------------------------------------

enum class StmtKind {
  Output,
  Print,
  If,
  For,
  Set,
  SetBlock,
  Macro,
  CallBlock,
  FilterBlock,
  With,
  Break,
  Continue,
  Scope,  // a body rendered in place ({% generation %} from transformers' AssistantTracker)
};

struct Stmt {
  Stmt(StmtKind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  StmtKind kind;
  int line;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// What a set / for / with assigns to.
struct Target {
  enum class Kind { Name, Tuple, NamespaceAttr };
  Kind kind = Kind::Name;
  std::string name;           // Name, or the namespace variable of NamespaceAttr
  std::string attr;           // NamespaceAttr
  std::vector<Target> items;  // Tuple
  int line = 0;
};

struct OutputStmt : Stmt {
  OutputStmt(std::string t, int l) : Stmt(StmtKind::Output, l), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {
  PrintStmt(ExprPtr e, int l) : Stmt(StmtKind::Print, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(StmtKind::If, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body else_body;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(StmtKind::For, l) {}
  Target target;
  ExprPtr iter;
  ExprPtr filter;  // `for x in y if cond`, may be null
  bool recursive = false;
  Body body;
  Body else_body;
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(StmtKind::Set, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {
  explicit SetBlockStmt(int l) : Stmt(StmtKind::SetBlock, l) {}
  Target target;
  ExprPtr filter;  // FilterExpr chain with a null innermost value, may be null
  Body body;
};

struct MacroStmt : Stmt {  // also the body of a call block (the `caller`)
  explicit MacroStmt(int l) : Stmt(StmtKind::Macro, l) {}
  std::string name;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param, null when the param has none
  Body body;
  // Names the body reads, which decide how extra arguments are accepted (as jinja2 does).
  bool uses_caller = false, uses_varargs = false, uses_kwargs = false;
};

struct CallBlockStmt : Stmt {
  explicit CallBlockStmt(int l) : Stmt(StmtKind::CallBlock, l) {}
  std::unique_ptr<CallExpr> call;
  std::unique_ptr<MacroStmt> caller;  // params, defaults and body of the block
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(StmtKind::FilterBlock, l) {}
  ExprPtr filter;  // FilterExpr chain with a null innermost value
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(StmtKind::With, l) {}
  std::vector<std::pair<Target, ExprPtr>> assigns;
  Body body;
};

struct ScopeStmt : Stmt {
  explicit ScopeStmt(int l) : Stmt(StmtKind::Scope, l) {}
  Body body;
};

struct SimpleStmt : Stmt {  // Break, Continue
  SimpleStmt(StmtKind k, int l) : Stmt(k, l) {}
};

}  // namespace strata::jinja
