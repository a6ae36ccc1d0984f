"""evalcore.py as one module read top to bottom: each lesson's section adds names and never
rebinds another's (lesson 16's code-fence pattern once replaced lesson 09's, and 40 tests failed),
and every name the index exports exists."""

import ast
from collections import Counter

import evalcore as ec


def module_level_bindings(path):
    """Each name a top-level def, class or assignment binds, with how often."""
    bound = Counter()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound[node.name] += 1
        targets = node.targets if isinstance(node, ast.Assign) else []
        targets += [node.target] if isinstance(node, ast.AnnAssign) else []
        bound.update(t.id for t in targets if isinstance(t, ast.Name))
    return bound


def test_no_section_rebinds_another_sections_name(root):
    twice = sorted(n for n, c in module_level_bindings(root / "evalcore.py").items() if c > 1)
    assert twice == [], f"bound more than once at module level: {twice}"


def test_the_rebinding_check_can_fail(tmp_path):
    path = tmp_path / "m.py"
    path.write_text('_FENCE = "a"\n\ndef f():\n    _FENCE = 1\n\n_FENCE = "b"\n', encoding="utf-8")
    assert module_level_bindings(path)["_FENCE"] == 2  # the nested one is not module level


def test_every_exported_name_exists():
    missing = [n for n in ec.__all__ if not hasattr(ec, n)]
    assert missing == [] and len(ec.__all__) == len(set(ec.__all__)), missing
