"""docs/trainers.md's package table names each entry point with its parameters: they are the code's,
in the code's order (the table left out StdioClient's `args=()`, which comes before
`state_retries`, so a positional call written from it went wrong), with the code's defaults."""

import ast
import inspect
import os
import re
import unittest

import rollout_budget

from . import support

DOC = os.path.join(support.ROOT, "docs", "trainers.md")
NAMES = ("HttpClient", "StdioClient", "Cli", "expand_plan", "results_rows", "group_advantages", "stable_prompt_id", "run_rounds", "step_metrics")
#: Named in the verl section, from rollout_budget.verl (standard library only until a batch is expanded).
VERL_NAMES = ("generate_in_rounds",)


def _split(params):
    """Top-level comma-separated parts of a parameter list (no nesting in the table's lists but ())."""
    parts, depth, cur = [], 0, ""
    for ch in params:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch in "([" and 1 or ch in ")]" and -1 or 0
        cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def documented(text, name):
    """(parameter names, {name: default text}) of the table's first `name(...)`."""
    m = re.search(r"`%s\(((?:[^`()]|\([^`()]*\))*)\)`" % re.escape(name), text)
    if m is None:
        raise AssertionError("docs/trainers.md has no `%s(...)`" % name)
    names, defaults = [], {}
    for part in _split(m.group(1)):
        key, _, default = part.partition("=")
        names.append(key.strip())
        if default:
            defaults[key.strip()] = default.strip()
    return names, defaults


class DocSignaturesTest(unittest.TestCase):
    def test_the_package_table_gives_each_signature_as_the_code_has_it(self):
        with open(DOC, encoding="utf-8") as f:
            text = f.read()
        from rollout_budget import verl

        for name in NAMES + VERL_NAMES:
            obj = getattr(verl if name in VERL_NAMES else rollout_budget, name)
            sig = inspect.signature(obj.__init__ if inspect.isclass(obj) else obj)
            code = [("**" + p.name) if p.kind is p.VAR_KEYWORD else p.name for p in sig.parameters.values() if p.name != "self"]
            names, defaults = documented(text, name)
            self.assertEqual(names, code, name)
            for key, default in defaults.items():
                want = sig.parameters[key].default
                # The table writes alternatives as "grpo"|"drgrpo"|"rloo": the first is the default.
                self.assertEqual(ast.literal_eval(default.replace("\\|", "|").split("|")[0]), want, "%s(%s=...)" % (name, key))


if __name__ == "__main__":
    unittest.main()
