// The sandbox: templates that would loop forever, fill memory, recurse without end or nest
// absurdly must stop with a TemplateError of kind Limit (not hang, not crash); errors carry the
// line of the construct that failed; raise_exception keeps the template's message.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "text/jinja/error.h"
#include "text/jinja/template.h"
#include "text/jinja/value_json.h"

namespace strata::jinja {
namespace {

using Clock = std::chrono::steady_clock;

// Renders with no variables; returns the error (fails the test if there is none).
TemplateError render_error(const std::string& source, const Limits& limits = {}) {
  try {
    const Template t(source, limits);
    const std::string out = t.render(Dict());
    ADD_FAILURE() << "expected an error, rendered " << out.size() << " bytes";
  } catch (const TemplateError& e) {
    return e;
  }
  return TemplateError(TemplateError::Kind::Runtime, "no error");
}

TEST(JinjaSandbox, EndlessLoopStopsAtStepLimit) {
  Limits limits;
  limits.max_steps = 200000;
  const auto start = Clock::now();
  const TemplateError e = render_error(
      "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
      limits);
  EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
  EXPECT_NE(std::string(e.what()).find("steps"), std::string::npos) << e.what();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
}

TEST(JinjaSandbox, DefaultStepLimitEndsAQuadraticLoop) {
  // 10^5 x 10^5 iterations would take hours; the default budget ends it.
  const auto start = Clock::now();
  const TemplateError e = render_error(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 30.0);
}

TEST(JinjaSandbox, WorkOnLargeValuesCostsSteps) {
  // Few nodes, but each one scans 100000 items or a 1 MB string: the step budget still ends it
  // (a smaller budget than the default keeps the test quick; without the charge these loops
  // would take about 10^10 item visits).
  Limits limits;
  limits.max_steps = 1'000'000;
  const auto start = Clock::now();
  for (const char* src :
       {"{% set r = range(100000) %}{% for i in range(100000) %}{{ r|select|first }}{% endfor %}",
        "{% set r = range(100000) %}{% for i in range(100000) %}{{ 5 in r }}{% endfor %}",
        "{% set s = 'ab' * 500000 %}{% for i in range(100000) %}{{ s.count('x') }}{% endfor %}",
        "{% set r = range(100000)|list %}{% for i in range(100000) %}{{ 99999 is in r }}{% endfor "
        "%}",
        "{% set r = range(100000)|list %}{% for i in range(100000) %}{{ r|join(',')|length }}{% "
        "endfor %}"}) {
    const TemplateError e = render_error(src, limits);
    EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << src << ": " << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 20.0);
}

TEST(JinjaSandbox, OutputSizeIsBounded) {
  Limits limits;
  limits.max_output_bytes = 1 << 20;
  const TemplateError e =
      render_error("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", limits);
  EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
  EXPECT_NE(std::string(e.what()).find("bytes"), std::string::npos) << e.what();
}

TEST(JinjaSandbox, HugeValuesAreRefusedBeforeAllocation) {
  for (const char* src : {"{{ 'a' * 100000000000 }}", "{{ [1, 2] * 100000000000 }}",
                          "{{ 'ab'.center(100000000000) }}", "{{ ''.zfill(100000000000) }}"}) {
    const TemplateError e = render_error(src);
    EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << src << ": " << e.what();
  }
}

TEST(JinjaSandbox, DoublingAStringHitsTheLimit) {
  const TemplateError e = render_error(
      "{% set ns = namespace(s='x') %}{% for i in range(60) %}{% set ns.s = ns.s ~ ns.s %}{% "
      "endfor %}{{ ns.s|length }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
}

TEST(JinjaSandbox, EndlessRecursionStopsAtCallDepth) {
  for (const char* src :
       {"{% macro m(n) %}{{ m(n + 1) }}{% endmacro %}{{ m(0) }}",
        "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
        "{% for x in [1] recursive %}{{ loop([1]) }}{% endfor %}"}) {
    const TemplateError e = render_error(src);
    EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << src << ": " << e.what();
    EXPECT_NE(std::string(e.what()).find("nest deeper"), std::string::npos) << e.what();
  }
}

TEST(JinjaSandbox, DeepEvaluationStopsAtEvalDepth) {
  // Each macro level evaluates a 240-link chain before recursing: the evaluation depth, not the
  // call depth, runs out first; the stack stays bounded (about 600 bytes per level).
  std::string chain;
  for (int i = 0; i < 240; ++i)
    chain += " + 1";
  const TemplateError e =
      render_error("{% macro m(n) %}{{ (m(n + 1)|length)" + chain + " }}{% endmacro %}{{ m(0) }}");
  EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
  EXPECT_NE(std::string(e.what()).find("evaluation nests deeper"), std::string::npos) << e.what();
}

TEST(JinjaSandbox, AbsurdNestingInTheSourceIsRefused) {
  const std::string parens = std::string(100000, '(') + "1" + std::string(100000, ')');
  const std::string lists = std::string(100000, '[') + std::string(100000, ']');
  const std::string nots = [] {
    std::string s;
    for (int i = 0; i < 100000; ++i)
      s += "not ";
    return s + "x";
  }();
  std::string ifs;
  for (int i = 0; i < 50000; ++i)
    ifs += "{% if true %}";
  for (int i = 0; i < 50000; ++i)
    ifs += "{% endif %}";
  for (const std::string& src :
       {"{{ " + parens + " }}", "{{ " + lists + " }}", "{{ " + nots + " }}",
        "{{ " + std::string(100000, '-') + "1 }}", ifs}) {
    try {
      const Template t(src);
      ADD_FAILURE() << "parsed a template nested 50000+ deep";
    } catch (const TemplateError& e) {
      EXPECT_EQ(e.kind(), TemplateError::Kind::Limit) << e.what();
    }
  }
}

TEST(JinjaSandbox, ReasonableNestingStillParses) {
  const std::string src = "{{ " + std::string(40, '(') + "1" + std::string(40, ')') + " }}";
  EXPECT_EQ(Template(src).render(Dict()), "1");
}

TEST(JinjaSandbox, RangeIsCappedLikeJinja2) {
  const TemplateError e = render_error("{% for i in range(1000000) %}{% endfor %}");
  EXPECT_NE(std::string(e.what()).find("MAX_RANGE"), std::string::npos) << e.what();
}

TEST(JinjaSandbox, SelfReferencingNamespacePrintsWithoutCrashing) {
  const Template t("{% set ns = namespace(a=1) %}{% set ns.me = ns %}{{ ns }}");
  const std::string out = t.render(Dict());
  EXPECT_EQ(out.rfind("<Namespace {'a': 1, 'me': <Namespace", 0), 0u) << out.substr(0, 100);
  EXPECT_NE(out.find("..."), std::string::npos);
}

// ImmutableSandboxedEnvironment: methods that would change a list or dict are not callable
// (jinja2 >= 3.1.5 includes list.pop and list.clear, which 3.1.2 still let through).
TEST(JinjaSandbox, MutatingMethodsAreRefused) {
  int checked = 0;
  for (const char* call : {"l.append(1)", "l.pop()", "l.clear()", "l.extend([1])", "l.insert(0, 1)",
                           "l.remove(1)", "l.reverse()", "l.sort()", "d.pop('a')", "d.popitem()",
                           "d.clear()", "d.update({'b': 2})", "d.setdefault('b', 2)"}) {
    Dict vars;
    vars.set(Value::string("l"), Value::list({Value::integer(1)}));
    Dict d;
    d.set(Value::string("a"), Value::integer(1));
    vars.set(Value::string("d"), Value::dict(d));
    try {
      Template(std::string("{{ ") + call + " }}").render(vars);
      ADD_FAILURE() << call << " was allowed";
    } catch (const TemplateError& e) {
      EXPECT_NE(std::string(e.what()).find("is unsafe"), std::string::npos) << e.what();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 13);
}

TEST(JinjaSandbox, IntegersBeyond64BitsRaiseInsteadOfWrapping) {
  // Python would switch to a big integer; strata refuses rather than give a wrong number.
  for (const char* src :
       {"{{ 9223372036854775807 + 1 }}", "{{ -9223372036854775807 - 2 }}",
        "{{ 3037000500 * 3037000500 }}", "{{ 2 ** 63 }}", "{{ -(-9223372036854775807 - 1) }}"}) {
    const TemplateError e = render_error(src);
    EXPECT_NE(std::string(e.what()).find("64 bits"), std::string::npos) << src << ": " << e.what();
  }
}

TEST(JinjaSandbox, DeeplyNestedJsonInputIsRefused) {
  nlohmann::ordered_json j = 1;
  for (int i = 0; i < 2000; ++i)
    j = nlohmann::ordered_json::array({std::move(j)});
  EXPECT_THROW(from_json(j), TemplateError);
  nlohmann::ordered_json ok = 1;
  for (int i = 0; i < 100; ++i)
    ok = nlohmann::ordered_json::array({std::move(ok)});
  Dict vars;
  vars.set(Value::string("x"), from_json(ok));
  EXPECT_EQ(Template("{{ x|tojson|length }}").render(vars).size(), 3u);  // "201"
}

TEST(JinjaSandbox, InvalidUtf8TemplateIsASyntaxError) {
  const std::string src = std::string("line one\n{{ 'ok' }}\nbad \xff byte");
  try {
    const Template t(src);
    FAIL() << "accepted invalid UTF-8";
  } catch (const TemplateError& e) {
    EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax);
    EXPECT_EQ(e.line(), 3);
  }
}

// The erroring construct is placed on line n by n - 1 lines of text before it.
std::string at_line(int n, const std::string& code) {
  std::string s;
  for (int i = 1; i < n; ++i)
    s += "text line " + std::to_string(i) + "\n";
  return s + code;
}

TEST(JinjaErrors, RuntimeErrorsCarryTheirLine) {
  const char* failing[] = {
      "{{ 1 / 0 }}",
      "{{ missing.attr }}",
      "{{ 'a' + 1 }}",
      "{% for x in 5 %}{% endfor %}",
      "{% set a, b = [1] %}",
      "{{ [1, 2].append(3) }}",
      "{{ 1 | tojson(indent=1.5) }}",
  };
  int checked = 0;
  for (const char* code : failing) {
    for (int line : {1, 2, 7, 30}) {
      const TemplateError e = render_error(at_line(line, code));
      EXPECT_EQ(e.kind(), TemplateError::Kind::Runtime) << code;
      EXPECT_EQ(e.line(), line) << code << ": " << e.what();
      EXPECT_NE(std::string(e.what()).find("line " + std::to_string(line)), std::string::npos)
          << e.what();
      ++checked;
    }
  }
  EXPECT_EQ(checked, 28);
}

TEST(JinjaErrors, ErrorInsideAMacroPointsIntoTheMacro) {
  const std::string src =
      "{% macro m(x) %}\nok\n{{ x.missing.deeper }}\n{% endmacro %}\n\n{{ m({}) }}";
  const TemplateError e = render_error(src);
  EXPECT_EQ(e.line(), 3) << e.what();
}

TEST(JinjaErrors, SyntaxErrorsCarryTheirLine) {
  const char* broken[] = {
      "{% if true %}",           // unclosed block: reported at the end
      "{{ 1 + }}",               // missing operand
      "{% nosuchtag %}",         // unknown tag
      "{{ x | nosuchfilter }}",  // unknown filter outside an if
      "{{ 'unterminated }}",     // string never closed
      "{% for x in %}{% endfor %}",
      "{# never closed",
  };
  int checked = 0;
  for (const char* code : broken) {
    for (int line : {1, 4, 12}) {
      try {
        const Template t(at_line(line, code));
        ADD_FAILURE() << "parsed: " << code;
      } catch (const TemplateError& e) {
        EXPECT_EQ(e.kind(), TemplateError::Kind::Syntax) << code;
        EXPECT_EQ(e.line(), line) << code << ": " << e.what();
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 21);
}

TEST(JinjaErrors, RaiseExceptionKeepsTheMessage) {
  const std::string message =
      "Conversation roles must alternate user/assistant/user/assistant/... ü";
  const TemplateError e = render_error(at_line(5, "{{ raise_exception('" + message + "') }}"));
  EXPECT_EQ(e.kind(), TemplateError::Kind::Raised);
  EXPECT_EQ(e.detail(), message);
  EXPECT_EQ(e.line(), 5);
}

}  // namespace
}  // namespace strata::jinja
