// Runs a parsed template: one Renderer per render call. Statements are in renderer.cpp,
// expressions in eval.cpp.
//
// Scoping follows jinja2: `set` writes to the innermost frame; a for-loop iteration, a macro call,
// a call/filter/with/set block body are new frames, so `set` inside a loop is not seen after it
// (templates use namespace() for that); `if` blocks are not frames. Lookups walk the frames out
// to the render variables and then the builtin globals. Every node charges one step against the
// sandbox budget, and an error is tagged with the line of the innermost node that saw it.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "text/jinja/ast.h"
#include "text/jinja/call_args.h"
#include "text/jinja/error.h"
#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace strata::jinja {

class Renderer {
 public:
  Renderer(const Body& program, const Limits& limits);
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  // Renders once with these variables (messages, tools, add_generation_prompt, ...).
  std::string render(const Dict& variables);

  Budget& budget() { return budget_; }
  // Calls a callable value: macro, builtin, bound method, or a recursive loop.
  Value call(const Value& callee, CallArgs& args);
  // environment.call_filter / call_test by name, for map(), select() and friends.
  Value call_filter(const std::string& name, const Value& input, CallArgs& args);
  bool call_test(const std::string& name, const Value& input, CallArgs& args);
  // namespace(): namespaces are the one mutable value, so a namespace can end up holding itself;
  // the renderer remembers them and clears them when done, which frees such cycles.
  Value make_namespace(Dict attrs);

 private:
  struct Scope {
    std::unordered_map<std::string, Value> vars;
    std::shared_ptr<Scope> parent;
  };
  using ScopePtr = std::shared_ptr<Scope>;
  enum class Flow { Normal, Break, Continue };

  // statements (renderer.cpp)
  Flow exec_body(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const ForStmt& s);
  void run_for(const ForStmt& s, const Value& iterable, int depth0);
  void exec_call_block(const CallBlockStmt& s);
  std::string render_body(const Body& body, ScopePtr scope);
  void assign(const Target& t, const Value& v);
  Value define_macro(const MacroStmt& m);
  Value call_macro(const MacroStmt& m, const ScopePtr& defined_in, CallArgs& args);
  void write(const std::string& text);

  // expressions (eval.cpp)
  Value eval(const Expr& e);
  Value eval_inner(const Expr& e);
  Value lookup(const std::string& name) const;
  CallArgs eval_args(const CallArgsExpr& a);
  Value eval_filter(const FilterExpr& f);
  Value eval_getitem(const GetitemExpr& g);
  Value eval_compare(const CompareExpr& c);

  class CallDepth;
  class EvalDepth;

  const Body& program_;
  Budget budget_;
  const Dict* variables_ = nullptr;
  ScopePtr scope_;                      // innermost frame
  std::string* out_ = nullptr;          // where output goes (a macro call redirects it)
  const Value* block_input_ = nullptr;  // body text for {% filter %} / {% set x | f %}
  int call_depth_ = 0;
  int eval_depth_ = 0;
  std::vector<ScopePtr> macro_scopes_;  // frames captured by macros: cleared after the render
  std::vector<Value> namespaces_;
};

// Every statement and expression evaluation nests one C++ call deeper; bounding the nesting
// bounds the stack whatever the template and its macros do.
class Renderer::EvalDepth {
 public:
  explicit EvalDepth(Renderer& r) : r_(r) {
    if (++r_.eval_depth_ > r_.budget_.limits().max_eval_depth) {
      --r_.eval_depth_;
      throw TemplateError(TemplateError::Kind::Limit,
                          fmt::format("evaluation nests deeper than {} levels, the sandbox limit",
                                      r_.budget_.limits().max_eval_depth));
    }
  }
  ~EvalDepth() { --r_.eval_depth_; }
  EvalDepth(const EvalDepth&) = delete;
  EvalDepth& operator=(const EvalDepth&) = delete;

 private:
  Renderer& r_;
};

}  // namespace strata::jinja
