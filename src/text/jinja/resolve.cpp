// The pass jinja2 does while compiling: bind each filter and test name to its definition, and
// note which of caller / varargs / kwargs a macro body reads (that decides which extra arguments
// the macro accepts). An unknown filter or test is a compile-time error, except in "soft"
// positions (inside an if statement or an inline if) where jinja2 raises only if it is evaluated;
// loop, macro, call, filter, set-block and with bodies are new frames and never soft.
#include <fmt/format.h>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/parser.h"

namespace strata::jinja {
namespace {

class Resolver {
 public:
  void body(Body& b, bool soft) {
    for (auto& s : b)
      stmt(*s, soft);
  }

 private:
  void args(CallArgsExpr& a, bool soft) {
    for (auto& e : a.args)
      expr(e.get(), soft);
    for (auto& kv : a.kwargs)
      expr(kv.second.get(), soft);
    expr(a.star.get(), soft);
    expr(a.double_star.get(), soft);
  }

  void expr(Expr* e, bool soft) {
    if (!e) return;
    switch (e->kind) {
      case ExprKind::Const:
        return;
      case ExprKind::Name: {
        const std::string& n = static_cast<NameExpr*>(e)->name;
        if (n == "caller") reads_caller_ = true;
        if (n == "varargs") reads_varargs_ = true;
        if (n == "kwargs") reads_kwargs_ = true;
        return;
      }
      case ExprKind::List:
      case ExprKind::Tuple:
        for (auto& i : static_cast<SeqExpr*>(e)->items)
          expr(i.get(), soft);
        return;
      case ExprKind::Dict:
        for (auto& kv : static_cast<DictExpr*>(e)->items) {
          expr(kv.first.get(), soft);
          expr(kv.second.get(), soft);
        }
        return;
      case ExprKind::Getattr:
        expr(static_cast<GetattrExpr*>(e)->obj.get(), soft);
        return;
      case ExprKind::Getitem: {
        auto* g = static_cast<GetitemExpr*>(e);
        expr(g->obj.get(), soft);
        expr(g->key.get(), soft);
        return;
      }
      case ExprKind::Slice: {
        auto* s = static_cast<SliceExpr*>(e);
        expr(s->start.get(), soft);
        expr(s->stop.get(), soft);
        expr(s->step.get(), soft);
        return;
      }
      case ExprKind::Call: {
        auto* c = static_cast<CallExpr*>(e);
        expr(c->callee.get(), soft);
        args(c->args, soft);
        return;
      }
      case ExprKind::Filter: {
        auto* f = static_cast<FilterExpr*>(e);
        expr(f->value.get(), soft);
        args(f->args, soft);
        f->def = find_filter(f->name);
        if (!f->def && !soft) syntax_error(fmt::format("No filter named '{}'.", f->name), f->line);
        return;
      }
      case ExprKind::Test: {
        auto* t = static_cast<TestExpr*>(e);
        expr(t->value.get(), soft);
        args(t->args, soft);
        t->def = find_test(t->name);
        if (!t->def && !soft) syntax_error(fmt::format("No test named '{}'.", t->name), t->line);
        return;
      }
      case ExprKind::Neg:
      case ExprKind::Pos:
      case ExprKind::Not:
        expr(static_cast<UnaryExpr*>(e)->operand.get(), soft);
        return;
      case ExprKind::Binary:
      case ExprKind::And:
      case ExprKind::Or: {
        auto* b = static_cast<BinaryExpr*>(e);
        expr(b->left.get(), soft);
        expr(b->right.get(), soft);
        return;
      }
      case ExprKind::Compare: {
        auto* c = static_cast<CompareExpr*>(e);
        expr(c->first.get(), soft);
        for (auto& r : c->rest)
          expr(r.second.get(), soft);
        return;
      }
      case ExprKind::Cond: {
        auto* c = static_cast<CondExpr*>(e);
        expr(c->test.get(), true);
        expr(c->then.get(), true);
        expr(c->otherwise.get(), true);
        return;
      }
      case ExprKind::Concat:
        for (auto& p : static_cast<ConcatExpr*>(e)->parts)
          expr(p.get(), soft);
        return;
    }
  }

  void macro(MacroStmt& m) {
    const bool c = reads_caller_, v = reads_varargs_, k = reads_kwargs_;
    reads_caller_ = reads_varargs_ = reads_kwargs_ = false;
    for (auto& d : m.defaults)
      expr(d.get(), false);
    body(m.body, false);
    m.uses_caller = reads_caller_;
    m.uses_varargs = reads_varargs_;
    m.uses_kwargs = reads_kwargs_;
    // Names read by a nested macro also count for the enclosing one (jinja2 looks at all of it).
    reads_caller_ = c || reads_caller_;
    reads_varargs_ = v || reads_varargs_;
    reads_kwargs_ = k || reads_kwargs_;
  }

  void stmt(Stmt& s, bool soft) {
    switch (s.kind) {
      case StmtKind::Output:
      case StmtKind::Break:
      case StmtKind::Continue:
        return;
      case StmtKind::Print:
        expr(static_cast<PrintStmt&>(s).expr.get(), soft);
        return;
      case StmtKind::If: {
        auto& i = static_cast<IfStmt&>(s);
        for (auto& [test, b] : i.branches) {
          expr(test.get(), true);
          body(b, true);
        }
        body(i.else_body, true);
        return;
      }
      case StmtKind::For: {
        auto& f = static_cast<ForStmt&>(s);
        expr(f.iter.get(), soft);
        expr(f.filter.get(), false);
        body(f.body, false);
        body(f.else_body, false);
        return;
      }
      case StmtKind::Set:
        expr(static_cast<SetStmt&>(s).value.get(), soft);
        return;
      case StmtKind::SetBlock: {
        auto& b = static_cast<SetBlockStmt&>(s);
        body(b.body, false);
        expr(b.filter.get(), false);
        return;
      }
      case StmtKind::Macro:
        macro(static_cast<MacroStmt&>(s));
        return;
      case StmtKind::CallBlock: {
        auto& c = static_cast<CallBlockStmt&>(s);
        expr(c.call.get(), soft);
        macro(*c.caller);
        return;
      }
      case StmtKind::FilterBlock: {
        auto& f = static_cast<FilterBlockStmt&>(s);
        body(f.body, false);
        expr(f.filter.get(), false);
        return;
      }
      case StmtKind::With: {
        auto& w = static_cast<WithStmt&>(s);
        for (auto& a : w.assigns)
          expr(a.second.get(), soft);
        body(w.body, false);
        return;
      }
      case StmtKind::Scope:
        body(static_cast<ScopeStmt&>(s).body, soft);
        return;
    }
  }

  bool reads_caller_ = false, reads_varargs_ = false, reads_kwargs_ = false;
};

}  // namespace

void resolve_names(Body& body) {
  Resolver().body(body, false);
}

}  // namespace strata::jinja
