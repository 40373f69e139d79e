// The interpreter's syntax, construct by construct, against Python's jinja2 in transformers'
// environment (trim_blocks, lstrip_blocks, loopcontrols). Each TEST renders its cases both ways
// and requires identical bytes (or an error from both).
#include "jinja_cases.h"

namespace strata::testing {
namespace {

TEST(JinjaVsJinja2, WhitespaceControl) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::vector<JinjaCase> cases = {
      {"a\n{% if true %}\nb\n{% endif %}\nc"},              // trim_blocks eats the newline
      {"a\n    {% if true %}\n    b\n    {% endif %}\nc"},  // lstrip_blocks eats the indent
      {"a  {% if true %}b{% endif %}  c"},                  // not at line start: kept
      {"a\n  {{ 'x' }}\n  {# c #}\n  z"},                   // lstrip applies to comments, not {{
      {"a \n {%- if true -%} \n b \n {%- endif -%} \n c"},  // - strips all whitespace
      {"a\n  {%+ if true %}b{% endif +%}\nc"},              // + keeps it
      {"x {{- ' y ' -}} z"},
      {"x\n{#- comment -#}\ny"},
      {"x\n{# comment #}\ny\n{# two\nlines #}z"},
      {"{% raw %}{{ not evaluated }} {% if %}{% endraw %}|"},
      {"a\n  {%- raw %}  {{ x }}\n{% endraw -%}\n  b"},
      {"  {% raw -%}   x   {%- endraw %}  "},
      {"line1\r\nline2\rline3\n"},  // newlines normalized, trailing one dropped
      {"ends with two newlines\n\n"},
      {"{% for i in [1, 2] %}\n  item {{ i }}\n{% endfor %}\ndone\n"},
      {"{% for i in [1, 2] -%}\n  item {{ i }}\n{%- endfor %}\ndone"},
      {"\t{% if true %}\ttab\n\t{% endif %}\tend"},
      {"{{ '{{' }} {{ '}}' }} {{ {'a': {'b': 1}} }}"},  // braces inside expressions
      {"{% set x = {'k': [1, {'n': 2}]} %}{{ x['k'][1]['n'] }}"},
      {"{{ 'a' }}{# {{ not printed }} #}{{ 'b' }}"},
      {"{%- if true %}  \n  x{% endif %}"},
      {"{% if true %}{% endif %}\n\nx"},
      {"{{ 1 }}\n{{ 2 }}\n"},
      {"{% macro m() %}\n  body\n{% endmacro %}\n[{{ m() }}]"},
      {"  {#- x #}y"},
      {"{%- if true -%}\u00a0x\u00a0{%- endif -%}"},  // - strips Unicode spaces too
  };
  expect_same_as_jinja2(cases);
}

TEST(JinjaVsJinja2, Statements) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::vector<JinjaCase> cases = {
      {"{% if x %}T{% elif y %}Y{% else %}F{% endif %}", R"({"x": 0, "y": ""})"},
      {"{% if x %}T{% elif y %}Y{% else %}F{% endif %}", R"({"x": [], "y": [0]})"},
      {"{% for x in items %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 "
       "}}"
       "{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
       R"({"items": ["a", "b", "c"]})"},
      {"{% for x in items %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}",
       R"({"items": [1, 2, 3]})"},
      {"{% for x in items %}{{ loop.cycle('odd', 'even') }} {% endfor %}",
       R"({"items": [1, 2, 3]})"},
      {"{% for x in items %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
       R"({"items": [1, 1, 2, 2, 1]})"},
      {"{% for x in items if x is odd %}{{ x }}{{ loop.index }}/{{ loop.length }} {% else %}none{% "
       "endfor %}",
       R"({"items": [1, 2, 3, 4, 5]})"},
      {"{% for x in items if x > 10 %}{{ x }}{% else %}none{% endfor %}", R"({"items": [1, 2]})"},
      {"{% for x in [] %}x{% else %}empty{% endfor %}"},
      {"{% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}",
       R"({"d": {"b": 1, "a": [2], "c": null}})"},
      {"{% for k in d %}{{ k }}{% endfor %}", R"({"d": {"z": 1, "y": 2}})"},
      {"{% for c in 'héllo' %}{{ c }}.{% endfor %}"},
      {"{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %}"},
      {"{% for a, b in [[1, 2, 3]] %}{{ a }}{% endfor %}"},
      {"{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break "
       "%}{% endif %}{{ x }}{% endfor %}"},
      {"{% for x in [1, 2] %}{% for y in [3, 4] %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ "
       "loop.index }}|{% endfor %}"},
      {"{% for x in tree recursive %}{{ x.n }}{% if x.c %}({{ loop(x.c) }}){% endif %}{{ "
       "loop.depth }}{% endfor %}",
       R"({"tree": [{"n": "a", "c": [{"n": "b", "c": [{"n": "c"}]}]}, {"n": "d"}]})"},
      {"{% set x = 1 %}{% for i in [1, 2] %}{% set x = i %}{% endfor %}{{ x }}"},
      {"{% set ns = namespace(x=1) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}{% endfor %}{{ "
       "ns.x }}"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, %}{{ c }}"},
      {"{% set x %}block {{ 1 + 1 }}{% endset %}[{{ x }}]"},
      {"{% set x | upper | replace('A', '4') %}abc{% endset %}{{ x }}"},
      {"{% set ns = namespace() %}{% set ns.a = [1] %}{{ ns.a }}"},
      {"{% set s = 'x' %}{% set s.a = 1 %}"},
      {"{% macro m(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }}|{{ m(1, 2) "
       "}}|{{ m(1, c=3) }}|{{ m(c=4, a=5) }}"},
      {"{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}"},
      {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}"},
      {"{% macro m(a) %}{{ a }}{% endmacro %}{{ m(a=1, z=2) }}"},
      {"{% macro m(a, b=a ~ '!') %}{{ b }}{% endmacro %}{{ m('hi') }}"},
      {"{% macro outer() %}[{{ caller('x') }}]{% endmacro %}{% call(v) outer() %}got {{ v }}{% "
       "endcall %}"},
      {"{% macro m() %}{{ caller() }}{% endmacro %}{{ m() }}"},
      {"{% macro rec(n) %}{{ n }}{% if n > 0 %}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(4) "
       "}}"},
      {"{% set g = 'outer' %}{% macro m() %}{{ g }}{% endmacro %}{% set g = 'later' %}{{ m() }}"},
      {"{% filter upper %}abc {{ 'def' }}{% endfilter %}"},
      {"{% filter replace('a', 'b') | title %}a cat{% endfilter %}"},
      {"{% with a = 1, b = 'x' %}{{ a }}{{ b }}{% endwith %}{{ a }}"},
      {"{% print 1, 'x' %}"},
      {"{% generation %}inside{% endgeneration %}"},
      {"{% for m in messages %}{{ m }}{% else %}no messages{% endfor %}{{ tools }}|{{ documents "
       "}}|{{ add_generation_prompt }}"},
      {"{% if true %}{% elif x|nosuchfilter %}{% endif %}soft"},
      {"{% for i in [1] %}{{ i|nosuchfilter }}{% endfor %}"},
      {"{% break %}"},
      {"{% include 'other.jinja' %}"},
      {"{% if true %}unclosed"},
      {"{% endif %}"},
      {"{% for %}{% endfor %}"},
  };
  expect_same_as_jinja2(cases);
}

TEST(JinjaVsJinja2, Expressions) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::vector<JinjaCase> cases = {
      {"{{ 1 }} {{ -2 }} {{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5 }} {{ 1e3 }} {{ "
       "2.5E-3 }} {{ 1_0.0_1 }}"},
      {"{{ 'a\\tb\\n\\\\ \\'q\\' \\x41\\u00e9\\U0001F600 \\d' }}|{{ \"dq \\\"x\\\"\" }}"},
      {"{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}"},
      {"{{ [1, 'a', [none, true]] }} {{ (1, 'b') }} {{ (1,) }} {{ () }} {{ {'k': 'v', 2: 3.0} }}"},
      {"{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }}"},
      {"{{ -7 // 2 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** -2 }} {{ 2 "
       "** 3 ** 2 }}"},
      {"{{ 1 + 2.5 }} {{ true + 1 }} {{ 10 / 4 }} {{ 0.1 + 0.2 }} {{ 1e300 * 1e10 }} {{ 3 * 'ab' "
       "}} {{ [1] * 3 }}"},
      {"{{ 'a' + 'b' }} {{ [1] + [2] }} {{ (1,) + (2,) }} {{ 'a' ~ 1 ~ none ~ [1] }}"},
      {"{{ 1 / 0 }}"},
      {"{{ 1 // 0 }}"},
      {"{{ 'a' + 1 }}"},
      {"{{ [1] + (2,) }}"},
      {"{{ -'a' }}"},
      {"{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ "
       "(1, 2) == [1, 2] }}"},
      {"{{ 1 != 2 }} {{ 2 >= 2 }} {{ 2 <= 1 }} {{ none == none }} {{ 1 == true }} {{ {'a': 1} == "
       "{'a': 1.0} }}"},
      {"{{ 1 < 'a' }}"},
      {"{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'x' in "
       "undefined_var }}"},
      {"{{ 1 in 'abc' }}"},
      {"{{ 'a' in none }}"},
      {"{{ 0 or 'x' }} {{ 1 and 'y' }} {{ [] and 1 }} {{ none or [] }} {{ not 0 }} {{ not 'a' }}"},
      {"{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'yes' if 0 }}] {{ 1 if 0 else 2 "
       "if 1 else 3 }}"},
      {"{{ x.a }} {{ x['a'] }} {{ x.b.c }} {{ x['b']['c'] }} {{ y.0 }} {{ y[-1] }}",
       R"({"x": {"a": 1, "b": {"c": [2]}}, "y": [5, 6]})"},
      {"[{{ x.missing }}] [{{ x['missing'] }}] [{{ y[10] }}] [{{ none.attr }}]",
       R"({"x": {"a": 1}, "y": [1]})"},
      {"{{ x.missing.deeper }}", R"({"x": {"a": 1}})"},
      {"{{ x.items is callable }}|{{ x['items'] }}", R"({"x": {"items": "value"}})"},
      {"{{ s[1:] }} {{ s[:-1] }} {{ s[::2] }} {{ s[::-1] }} {{ s[-3:-1] }} {{ s[10:] }} {{ "
       "s[1:100:3] }}",
       R"({"s": "héllo wörld"})"},
      {"{{ l[1:] }} {{ l[::-1] }} {{ l[-2:] }} {{ l[::-2] }} {{ l[5:1:-1] }} {{ l[:0] }}",
       R"({"l": [1, 2, 3, 4, 5, 6]})"},
      {"{{ l[::0] }}", R"({"l": [1]})"},
      {"[{{ l[a:] }}]", R"({"l": [1], "a": "x"})"},
      {"[{{ d[1:] }}]", R"({"d": {"a": 1}})"},
      {"[{{ n[1:] }}]", R"({"n": 5})"},
      {"[{{ l[u:] }}]", R"({"l": [1]})"},
      {"[{{ u[1:] }}]"},
      {"[{{ l[none:none:none] }}] [{{ l[true:] }}]", R"({"l": [1, 2]})"},
      {"{{ range(5)[1:3] }} {{ range(10)[::3]|list }} {{ range(2, 10, 3)|list }} {{ range(5, 0, "
       "-2)|list }}"},
      {"{{ -x|abs }} {{ -(x|abs) }} {{ not x is none }}", R"({"x": -3})"},
      {"{{ 2 * 3 + 4 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 2 ~ 3 + 4 }} {{ 10 - 2 - 3 }} {{ 100 "
       "/ 10 / 5 }}"},
      {"{{ 'x' ~ 'y' | upper }} {{ ('x' ~ 'y') | upper }} {{ [3, 1] | sort | first }}"},
      {"{{ d.get('a') }} {{ d.get('z', 'dflt') }} {{ d.get('z') }}", R"({"d": {"a": 1}})"},
      {"{{ f() }}"},
      {"{{ 1() }}"},
      {"{{ dict(a=1, b=[2]) }} {{ dict([('x', 1)]) }} {{ range(3) }} {{ range(1, 7, 2)|list }}"},
      {"{{ range(200000)|length }}"},
      {"{{ 'a' 'b' \"c\" }}"},
      {"{{ x is defined }} {{ x is not defined }} {{ x is undefined }} {{ none is none }}"},
      {"{{ 1 if x is divisibleby 3 else 0 }} {{ 4 is divisibleby 2 }} {{ 'a' is equalto 'a' }}",
       R"({"x": 9})"},
      {"{{ (1, 2)[0] }} {{ [[1, 2], [3]][0][1] }} {{ 'abc'[1] }} {{ 'abc'[-1] }}"},
      {"{{ 9223372036854775806 + 1 }} {{ -9223372036854775807 - 1 }} {{ 3037000499 * 3037000499 }} "
       "{{ 2 ** 62 }}"},
  };
  expect_same_as_jinja2(cases);
}

TEST(JinjaVsJinja2, UndefinedAndPythonStr) {
  STRATA_SKIP_WITHOUT_JINJA2();
  const std::vector<JinjaCase> cases = {
      {"[{{ u }}] [{{ u|string }}] [{{ u|default('d') }}] [{{ u|length }}] [{{ u|list }}] [{{ "
       "u|trim }}]"},
      {"{{ u is defined }} {{ u is none }} {{ u is iterable }} {{ u is sequence }} {{ u is string "
       "}}"},
      {"{% for x in u %}x{% else %}empty{% endfor %} {% if u %}t{% else %}f{% endif %} {{ u == u "
       "}} {{ not u }}"},
      {"{{ u + 1 }}"},
      {"{{ u.attr }}"},
      {"{{ u['k'] }}"},
      {"{{ u() }}"},
      {"{{ u < 1 }}"},
      {"{{ u|tojson }}"},
      {"{{ u ~ 'x' }} {{ [u]|length }}"},
      {"{{ x }} {{ y }} {{ z }} {{ w }} {{ v }}",
       R"({"x": 1.0, "y": 1e16, "z": 1.5e-07, "w": -0.0, "v": 123456789.123})"},
      {"{{ x }}",
       R"({"x": [1, 2.0, "s", "it's", "say \"hi\"", "both ' and \"", null, true, false, {"k": [1]}]})"},
      {"{{ x }}",
       R"({"x": ["tab\there", "nl\nx", "back\\slash", "é", "\u00a0", "\u200b", "😀", "\u0007", "\u007f"]})"},
      {"{{ x }} {{ x|string }} {{ x ~ '' }}", R"({"x": {"a": null, "b": [true, 1.25e-5]}})"},
      {"{{ x.keys() }} {{ x.values() }} {{ x.items() }} {{ x.keys()|list }}",
       R"({"x": {"a": 1, "b": 2}})"},
      {"{{ x.items()|length }} {{ x.items()[0] }}|", R"({"x": {"a": 1}})"},
      {"{{ (1,) }} {{ ('a', [2]) }} {{ [(1, 2)] }} {{ ((),) }}"},
      {"{% set ns = namespace(a=1, b='x') %}{{ ns }}"},
      // list.pop and list.clear are left out: jinja2 < 3.1.5 (Debian's 3.1.2) lets templates call
      // them; strata refuses them like current jinja2 (see JinjaSandbox.MutatingMethodsAreRefused).
      {"{{ l.append }}|{{ d.update }}|{{ l.sort }}|{{ d.clear }}|{{ d.setdefault }}",
       R"({"l": [1], "d": {"a": 1}})"},
      {"{{ [1, 2].append(3) }}"},
      {"{{ {'a': 1}.update({'b': 2}) }}"},
      {"{{ x.__class__ }}|{{ ''.__class__ }}|", R"({"x": {"a": 1}})"},
      {"{{ 1.0 }} {{ 100.0 }} {{ 1e15 }} {{ 1e-4 }} {{ 0.0001234 }} {{ 1e-5 }} {{ 2.5e+20 }} {{ "
       "1/3 }} {{ 2/3 * 3 }}"},
      {"{{ x }}",
       R"({"x": [1e308, 5e-324, 2.2250738585072014e-308, 0.1, 100.5, 1234567890123456789.0]})"},
  };
  expect_same_as_jinja2(cases);
}

}  // namespace
}  // namespace strata::testing
