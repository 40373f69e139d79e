#include "text/jinja/renderer.h"

#include <fmt/format.h>

#include <new>

#include "text/jinja/access.h"
#include "text/jinja/error.h"

namespace strata::jinja {

class Renderer::CallDepth {
 public:
  explicit CallDepth(Renderer& r) : r_(r) {
    if (++r_.call_depth_ > r_.budget_.limits().max_call_depth) {
      --r_.call_depth_;
      throw TemplateError(TemplateError::Kind::Limit,
                          fmt::format("macro calls nest deeper than {} (endless recursion?), the "
                                      "sandbox limit",
                                      r_.budget_.limits().max_call_depth));
    }
  }
  ~CallDepth() { --r_.call_depth_; }
  CallDepth(const CallDepth&) = delete;
  CallDepth& operator=(const CallDepth&) = delete;

 private:
  Renderer& r_;
};

namespace {

// Restores a member on scope exit (output buffer, innermost frame, filter-block input).
template <class T>
class Restore {
 public:
  Restore(T& slot, T value) : slot_(slot), saved_(std::move(slot)) { slot_ = std::move(value); }
  ~Restore() { slot_ = std::move(saved_); }
  Restore(const Restore&) = delete;
  Restore& operator=(const Restore&) = delete;

 private:
  T& slot_;
  T saved_;
};

}  // namespace

Renderer::Renderer(const Body& program, const Limits& limits)
    : program_(program), budget_(limits) {}

Renderer::~Renderer() {
  // Macros hold their defining frame, which holds the macro: break those cycles, and the ones a
  // namespace stored into itself can make.
  for (auto& s : macro_scopes_)
    s->vars.clear();
  for (auto& n : namespaces_)
    n.ns().attrs = Dict();
}

std::string Renderer::render(const Dict& variables) {
  variables_ = &variables;
  scope_ = std::make_shared<Scope>();
  std::string out;
  out_ = &out;
  try {
    exec_body(program_);
  } catch (const TemplateError&) {
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError(TemplateError::Kind::Limit, "out of memory while rendering");
  } catch (const std::exception& e) {
    throw TemplateError(TemplateError::Kind::Runtime, e.what());
  }
  return out;
}

void Renderer::write(const std::string& text) {
  if (out_->size() + text.size() > budget_.limits().max_output_bytes) {
    throw TemplateError(TemplateError::Kind::Limit,
                        fmt::format("rendered output exceeds {} bytes, the sandbox limit",
                                    budget_.limits().max_output_bytes));
  }
  budget_.charge(text.size());
  out_->append(text);
}

Renderer::Flow Renderer::exec_body(const Body& body) {
  for (const auto& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

std::string Renderer::render_body(const Body& body, ScopePtr scope) {
  std::string buf;
  Restore<std::string*> out(out_, &buf);
  Restore<ScopePtr> frame(scope_, std::move(scope));
  exec_body(body);
  return buf;
}

Renderer::Flow Renderer::exec(const Stmt& s) {
  budget_.step();
  try {
    EvalDepth depth(*this);
    switch (s.kind) {
      case StmtKind::Output:
        write(static_cast<const OutputStmt&>(s).text);
        return Flow::Normal;
      case StmtKind::Print:
        write(to_str(eval(*static_cast<const PrintStmt&>(s).expr)));
        return Flow::Normal;
      case StmtKind::If: {
        const auto& i = static_cast<const IfStmt&>(s);
        for (const auto& [test, body] : i.branches)
          if (truthy(eval(*test))) return exec_body(body);
        return exec_body(i.else_body);
      }
      case StmtKind::For:
        return exec_for(static_cast<const ForStmt&>(s));
      case StmtKind::Set: {
        const auto& set = static_cast<const SetStmt&>(s);
        assign(set.target, eval(*set.value));
        return Flow::Normal;
      }
      case StmtKind::SetBlock: {
        const auto& set = static_cast<const SetBlockStmt&>(s);
        auto frame = std::make_shared<Scope>();
        frame->parent = scope_;
        Value value = Value::string(render_body(set.body, frame));
        if (set.filter) {
          Restore<const Value*> input(block_input_, &value);
          value = eval(*set.filter);
        }
        assign(set.target, value);
        return Flow::Normal;
      }
      case StmtKind::Macro: {
        const auto& m = static_cast<const MacroStmt&>(s);
        scope_->vars[m.name] = define_macro(m);
        return Flow::Normal;
      }
      case StmtKind::CallBlock:
        exec_call_block(static_cast<const CallBlockStmt&>(s));
        return Flow::Normal;
      case StmtKind::FilterBlock: {
        const auto& f = static_cast<const FilterBlockStmt&>(s);
        auto frame = std::make_shared<Scope>();
        frame->parent = scope_;
        const Value text = Value::string(render_body(f.body, frame));
        Restore<const Value*> input(block_input_, &text);
        write(to_str(eval(*f.filter)));
        return Flow::Normal;
      }
      case StmtKind::With: {
        const auto& w = static_cast<const WithStmt&>(s);
        std::vector<Value> values;
        for (const auto& a : w.assigns)
          values.push_back(eval(*a.second));
        auto frame = std::make_shared<Scope>();
        frame->parent = scope_;
        Restore<ScopePtr> inner(scope_, frame);
        for (size_t i = 0; i < values.size(); ++i)
          assign(w.assigns[i].first, values[i]);
        return exec_body(w.body);
      }
      case StmtKind::Scope: {
        auto frame = std::make_shared<Scope>();
        frame->parent = scope_;
        Restore<ScopePtr> inner(scope_, frame);
        return exec_body(static_cast<const ScopeStmt&>(s).body);
      }
      case StmtKind::Break:
        return Flow::Break;
      case StmtKind::Continue:
        return Flow::Continue;
    }
  } catch (TemplateError& e) {
    e.locate(s.line);
    throw;
  } catch (const std::bad_alloc&) {
    throw TemplateError(TemplateError::Kind::Limit, "out of memory while rendering", s.line);
  } catch (const std::length_error& e) {
    throw TemplateError(TemplateError::Kind::Limit, e.what(), s.line);
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec_for(const ForStmt& s) {
  const Value iterable = eval(*s.iter);
  run_for(s, iterable, 0);
  return Flow::Normal;
}

void Renderer::run_for(const ForStmt& s, const Value& iterable, int depth0) {
  auto items = iterate(iterable);
  const ScopePtr outer = scope_;
  if (s.filter) {
    // `for x in y if cond`: filter first, so loop.length / loop.last count kept items only.
    std::vector<Value> kept;
    for (const auto& item : *items) {
      auto frame = std::make_shared<Scope>();
      frame->parent = outer;
      Restore<ScopePtr> inner(scope_, frame);
      assign(s.target, item);
      if (truthy(eval(*s.filter))) kept.push_back(item);
    }
    items = std::make_shared<const std::vector<Value>>(std::move(kept));
  }
  if (items->empty()) {
    auto frame = std::make_shared<Scope>();
    frame->parent = outer;
    Restore<ScopePtr> inner(scope_, frame);
    exec_body(s.else_body);
    return;
  }
  auto changed_state = std::make_shared<std::vector<Value>>();
  for (size_t i = 0; i < items->size(); ++i) {
    budget_.step();
    auto frame = std::make_shared<Scope>();
    frame->parent = outer;
    Restore<ScopePtr> inner(scope_, frame);
    assign(s.target, (*items)[i]);
    LoopData data;
    data.items = items;
    data.index0 = i;
    data.depth0 = depth0;
    data.last_changed = changed_state;
    if (s.recursive) {
      data.recurse = [this, &s, outer, depth0](Renderer&, const Value& next) -> Value {
        CallDepth depth(*this);
        std::string buf;
        Restore<std::string*> out(out_, &buf);
        Restore<ScopePtr> at(scope_, outer);
        run_for(s, next, depth0 + 1);
        return Value::string(std::move(buf));
      };
    }
    frame->vars["loop"] = Value::loop(std::move(data));
    if (exec_body(s.body) == Flow::Break) break;
  }
}

void Renderer::assign(const Target& t, const Value& v) {
  switch (t.kind) {
    case Target::Kind::Name:
      scope_->vars[t.name] = v;
      return;
    case Target::Kind::Tuple: {
      const auto items = iterate(v);
      if (items->size() < t.items.size()) {
        runtime_error(fmt::format("not enough values to unpack (expected {}, got {})",
                                  t.items.size(), items->size()));
      }
      if (items->size() > t.items.size())
        runtime_error(fmt::format("too many values to unpack (expected {})", t.items.size()));
      for (size_t i = 0; i < t.items.size(); ++i)
        assign(t.items[i], (*items)[i]);
      return;
    }
    case Target::Kind::NamespaceAttr: {
      const Value ns = lookup(t.name);
      if (ns.kind() != Kind::Namespace)
        runtime_error("Cannot assign attribute on non-namespace object");
      ns.ns().attrs.set(Value::string(t.attr), v);
      return;
    }
  }
}

Value Renderer::define_macro(const MacroStmt& m) {
  const ScopePtr defined_in = scope_;
  macro_scopes_.push_back(defined_in);
  const MacroStmt* macro = &m;
  return Value::callable(
      fmt::format("macro '{}'", m.name),
      [macro, defined_in](Renderer& r, CallArgs& args) {
        return r.call_macro(*macro, defined_in, args);
      },
      /*is_macro=*/true);
}

// jinja2.runtime.Macro.__call__: positional arguments fill the parameters in order, keywords
// fill the rest, `caller` is special, extras go to varargs / kwargs only if the body reads them.
Value Renderer::call_macro(const MacroStmt& m, const ScopePtr& defined_in, CallArgs& args) {
  CallDepth depth(*this);
  auto frame = std::make_shared<Scope>();
  frame->parent = defined_in;
  const size_t n_params = m.params.size();
  const size_t n_positional = std::min(args.args.size(), n_params);
  std::vector<bool> given(n_params, false);
  for (size_t i = 0; i < n_positional; ++i) {
    frame->vars[m.params[i]] = args.args[i];
    given[i] = true;
  }
  Dict extra_kwargs;
  Value caller = Value::undefined("No caller defined");
  bool caller_given = false;
  for (auto& [key, value] : args.kwargs) {
    size_t i = n_positional;
    while (i < n_params && m.params[i] != key)
      ++i;
    if (i < n_params && !given[i]) {
      frame->vars[key] = value;
      given[i] = true;
    } else if (key == "caller" && m.uses_caller && !caller_given) {
      caller = value;
      caller_given = true;
    } else if (m.uses_kwargs) {
      extra_kwargs.set(Value::string(key), value);
    } else {
      runtime_error(fmt::format("macro '{}' takes no keyword argument '{}'", m.name, key));
    }
  }
  if (args.args.size() > n_params && !m.uses_varargs) {
    runtime_error(fmt::format("macro '{}' takes not more than {} argument(s)", m.name, n_params));
  }
  Restore<ScopePtr> inner(scope_, frame);
  for (size_t i = 0; i < n_params; ++i) {
    if (given[i]) continue;
    frame->vars[m.params[i]] =
        m.defaults[i]
            ? eval(*m.defaults[i])
            : Value::undefined(fmt::format("parameter '{}' was not provided", m.params[i]));
  }
  if (m.uses_caller) frame->vars["caller"] = caller;
  if (m.uses_varargs) {
    std::vector<Value> extra;
    for (size_t i = n_params; i < args.args.size(); ++i)
      extra.push_back(args.args[i]);
    frame->vars["varargs"] = Value::list(std::move(extra), Seq::Tuple);
  }
  if (m.uses_kwargs) frame->vars["kwargs"] = Value::dict(std::move(extra_kwargs));
  return Value::string(render_body(m.body, frame));
}

void Renderer::exec_call_block(const CallBlockStmt& s) {
  const ScopePtr here = scope_;
  macro_scopes_.push_back(here);
  const MacroStmt* body = s.caller.get();
  Value caller = Value::callable(
      "caller",
      [body, here](Renderer& r, CallArgs& args) { return r.call_macro(*body, here, args); },
      /*is_macro=*/true);
  const Value callee = eval(*s.call->callee);
  CallArgs args = eval_args(s.call->args);
  args.kwargs.emplace_back("caller", std::move(caller));
  write(to_str(call(callee, args)));
}

Value Renderer::make_namespace(Dict attrs) {
  Value v = Value::make_namespace(std::move(attrs));
  namespaces_.push_back(v);
  return v;
}

}  // namespace strata::jinja
