#!/usr/bin/env python3
"""Reference renderer for the chat-template tests: renders cases with Python's jinja2 in the
environment transformers builds for apply_chat_template (transformers/utils/chat_template_utils.py
_compile_jinja_template): ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
extensions=[AssistantTracker, loopcontrols]), tojson replaced by json.dumps with ensure_ascii=False,
and the globals raise_exception and strftime_now; rendered with messages, tools, documents,
add_generation_prompt, the special tokens and the extra kwargs.

usage: render_with_jinja2.py CASES.json RESULTS.json
CASES: [{"template": path, "messages": [...], "tools": [...] or null, "add_generation_prompt": bool,
         "kwargs": {...}, "bos_token": str or null, "eos_token": str or null}, ...]
       (or "source": template text instead of "template": path)
RESULTS: [{"ok": true, "text": str} or {"ok": false, "error": str}, ...] in the same order.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %} block; it renders its body (the mask tracking is not needed)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(format):
    return datetime.now().strftime(format)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_case(env, compiled, case):
    if "source" in case:
        template = env.from_string(case["source"])
    else:
        path = case["template"]
        if path not in compiled:
            with open(path, encoding="utf-8", newline="") as f:
                compiled[path] = env.from_string(f.read())
        template = compiled[path]
    kwargs = dict(case.get("kwargs") or {})
    documents = kwargs.pop("documents", None)
    for key in ("bos_token", "eos_token"):
        if case.get(key) is not None:
            kwargs.setdefault(key, case[key])
    return template.render(messages=case.get("messages", []), tools=case.get("tools"),
                           documents=documents,
                           add_generation_prompt=case.get("add_generation_prompt", False), **kwargs)


def main():
    cases_path, results_path = sys.argv[1], sys.argv[2]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    env = make_env()
    compiled = {}
    results = []
    for case in cases:
        try:
            results.append({"ok": True, "text": render_case(env, compiled, case)})
        except Exception as e:  # the test only needs to know that jinja2 raised, and why
            results.append({"ok": False, "error": f"{type(e).__name__}: {e}"})
    with open(results_path, "w", encoding="utf-8") as f:
        json.dump(results, f, ensure_ascii=True)


if __name__ == "__main__":
    main()
