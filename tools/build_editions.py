"""Build the student and live editions of the lessons from the instructor notebooks.

The instructor notebooks in notebooks/ are the one source of truth:
- an exercise cell holds its worked solution between `### BEGIN SOLUTION` and `### END SOLUTION`
  (nbgrader's markers), after a `# Exercise N: <what to write>` line and before the check;
- a markdown cell tagged `solution` discusses an answer;
- a code cell tagged `live` is one an instructor types in front of the class; its first comment
  line says what to type and ends with `; defines: a, b, f` naming every name the cell binds that
  a later cell uses (the test runs each lesson with every other name the live cell binds deleted).

editions/student/: solutions replaced by a stub that raises "not done yet" (the cell is tagged
`raises-exception`, so a top-to-bottom run reports it and goes on), outputs cleared.
editions/live/: `live` cells emptied down to their one-line hint, every other cell as executed.

    python tools/build_editions.py          # write both editions
    python tools/build_editions.py --check  # exit 1 if the committed editions are stale
"""

import argparse
import ast
import copy
import json
import re
import sys
import textwrap
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
EDITIONS = ROOT / "editions"
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
TASK = re.compile(r"^# Exercise (\S+): (.+)$")
NOT_DONE = "not done yet"
SOLUTION_MARKDOWN = (
    "*Your answer here. The discussion of this answer is in the instructor edition.*"
)


def lessons(only=()):
    """The instructor notebooks, in lesson order (only those numbered in `only`, if given)."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in paths if not only or p.name[:2] in only]


def split_solution(source):
    """(before, solution, after) lines of an exercise cell's source; ValueError if malformed."""
    lines = source.split("\n")
    begins = [i for i, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [i for i, line in enumerate(lines) if line.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or begins[0] > ends[0]:
        raise ValueError(f"an exercise cell needs one {BEGIN!r} then one {END!r}: {source[:80]!r}")
    return lines[: begins[0]], lines[begins[0] + 1 : ends[0]], lines[ends[0] + 1 :]


def exercise_task(before):
    """(exercise id, what to write) from the `# Exercise N: ...` comment above the solution, with
    any `#   ...` continuation lines that follow it."""
    starts = [i for i, line in enumerate(before) if TASK.match(line)]
    if len(starts) != 1:
        raise ValueError(
            f"an exercise cell needs one '# Exercise N: <what to write>' line: {before}"
        )
    number, task = TASK.match(before[starts[0]]).groups()
    for line in before[starts[0] + 1 :]:
        if not line.startswith("#   "):
            break
        task += " " + line[1:].strip()
    return number, task


def is_exercise(cell):
    return cell.cell_type == "code" and BEGIN in cell.source


def is_solution_markdown(cell):
    return cell.cell_type == "markdown" and "solution" in cell.metadata.get("tags", [])


def student_stub(source):
    """The exercise cell with its solution replaced by a stub that says what to write."""
    before, _, after = split_solution(source)
    number, task = exercise_task(before)
    message = (
        f"Exercise {number} is {NOT_DONE}: {task.rstrip('.')}. Replace these lines with your code."
    )
    pieces = textwrap.wrap(message, width=88, drop_whitespace=False, break_on_hyphens=False)
    stub = ["# YOUR CODE HERE", "raise NotImplementedError("]
    stub += ["    " + json.dumps(piece, ensure_ascii=False) for piece in pieces] + [")"]
    return "\n".join(before + stub + after)


def live_hint(cell):
    """The first comment line of a live cell (NBVAL markers skipped): what the instructor types."""
    for line in cell.source.split("\n"):
        if line.startswith("#") and "NBVAL" not in line:
            return line
    raise ValueError(
        f"a live cell needs a first comment line saying what to type: {cell.source[:80]!r}"
    )


DEFINES = re.compile(r"; defines: ([A-Za-z_]\w*(?:, [A-Za-z_]\w*)*)$")


def is_live(cell):
    return cell.cell_type == "code" and "live" in cell.metadata.get("tags", [])


def live_defines(cell):
    """The names a live cell's hint lists (`...; defines: a, b, f`); () if it lists none."""
    found = DEFINES.search(live_hint(cell))
    return tuple(found.group(1).split(", ")) if found else ()


def python_source(source):
    """A code cell's source as Python: IPython magics and shell lines commented out."""
    return "\n".join(
        "#" + line if line.lstrip().startswith(("%", "!")) else line for line in source.split("\n")
    )


def _target_names(target):
    if isinstance(target, ast.Name):
        return {target.id}
    if isinstance(target, (ast.Tuple, ast.List)):
        return set().union(*(_target_names(t) for t in target.elts))
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return set()  # an attribute or a subscript binds no name


def top_level_bindings(source):
    """Every name a cell binds in the notebook's namespace: assignments, for and with targets,
    imports, def and class, walruses (a function's or a class's own body is not looked into)."""
    names = set()
    todo = list(ast.parse(python_source(source)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.Assign):
            names = names.union(*(_target_names(t) for t in node.targets))
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            names |= _target_names(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            names |= _target_names(node.optional_vars)
        elif isinstance(node, ast.NamedExpr):
            names |= _target_names(node.target)
        todo.extend(ast.iter_child_nodes(node))
    return names


def add_tag(cell, tag):
    tags = cell.metadata.setdefault("tags", [])
    if tag not in tags:
        tags.append(tag)


def student_edition(nb):
    """Solutions stubbed, solution discussions blanked, every output cleared."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if is_exercise(cell):
            cell.source = student_stub(cell.source)
            add_tag(cell, "raises-exception")
        elif is_solution_markdown(cell):
            cell.source = SOLUTION_MARKDOWN
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def live_edition(nb):
    """`live` cells emptied to their hint; every other cell keeps its source and outputs."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if is_live(cell):
            cell.source = live_hint(cell) + "  (type this live)"
            cell.outputs, cell.execution_count = [], None
    return nb


def editions(only=()):
    """{path under editions/: notebook text} for each lesson (or those in `only`), both editions."""
    built = {}
    for path in lessons(only):
        nb = nbformat.read(path, as_version=4)
        for name, build in [("student", student_edition), ("live", live_edition)]:
            built[Path(name) / path.name] = nbformat.writes(build(nb)) + "\n"
    return built


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="fail if the committed editions are stale"
    )
    parser.add_argument("--only", nargs="*", default=(), help="lesson numbers to write, e.g. 05 06")
    args = parser.parse_args(argv)
    built = editions(args.only)
    stale = [
        p
        for p, text in built.items()
        if not (EDITIONS / p).exists() or (EDITIONS / p).read_text(encoding="utf-8") != text
    ]
    extra = [
        p.relative_to(EDITIONS)
        for p in EDITIONS.glob("*/*.ipynb")
        if p.relative_to(EDITIONS) not in built and not args.only
    ]
    if args.check:
        for p in stale + extra:
            print(f"stale: editions/{p}")
        return 1 if stale or extra else 0
    for p in extra:
        (EDITIONS / p).unlink()
    for p in stale:
        (EDITIONS / p).parent.mkdir(parents=True, exist_ok=True)
        (EDITIONS / p).write_text(built[p], encoding="utf-8")
    print(f"editions/: {len(built)} notebooks, {len(stale)} rewritten, {len(extra)} removed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
