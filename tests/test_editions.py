"""The student and live editions, the exercises, and the jupytext text sources of every lesson."""

import ast
import re
from concurrent.futures import ThreadPoolExecutor

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

import build_editions as be  # tools/, on pytest's pythonpath

LESSONS = be.lessons()
IDS = [p.name[:2] for p in LESSONS]
HEADING = re.compile(r"^### Exercise (\S+):", re.M)


def read(path):
    return nbformat.read(path, as_version=4)


def edition(name, path):
    return read(be.EDITIONS / name / path.name)


def code_of(cell):
    """A code cell's source as Python: IPython magics and shell lines commented out."""
    return be.python_source(cell.source)


def _params(args):
    every = args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]
    return {a.arg for a in every if a is not None}


def free_names(node, bound=frozenset()):
    """Names a piece of code reads from the notebook's namespace: a function's parameters and
    locals, and a comprehension's targets, are not free in it."""
    if isinstance(node, ast.Module):
        return set().union(*(free_names(n, bound) for n in node.body)) if node.body else set()
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
        outer = node.args.defaults + node.args.kw_defaults + getattr(node, "decorator_list", [])
        free = set().union(set(), *(free_names(n, bound) for n in outer if n is not None))
        body = node.body if isinstance(node.body, list) else [node.body]
        local = _params(node.args) | be.top_level_bindings(ast.unparse(ast.Module(body, [])))
        return free | set().union(set(), *(free_names(n, bound | local) for n in body))
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        targets = [n for g in node.generators for n in ast.walk(g.target)]
        local = {n.id for n in targets if isinstance(n, ast.Name)}
        return set().union(*(free_names(n, bound | local) for n in ast.iter_child_nodes(node)))
    if isinstance(node, ast.Name):
        return {node.id} - bound if isinstance(node.ctx, ast.Load) else set()
    return set().union(set(), *(free_names(n, bound) for n in ast.iter_child_nodes(node)))


def hidden_names_used_later(nb):
    """(live cell, name, later cell) for each name a live cell binds but its hint does not list,
    read by a later cell (an exercise's solution and check included) before any rebinds it."""
    found = []
    for i, cell in enumerate(nb.cells):
        if not be.is_live(cell):
            continue
        hidden = be.top_level_bindings(cell.source) - set(be.live_defines(cell))
        for j, later in enumerate(nb.cells[i + 1 :], i + 1):
            if later.cell_type != "code" or not hidden:
                continue
            reads, hidden = reads_before_rebinding(ast.parse(code_of(later)).body, hidden)
            found += [(i, name, j) for name in sorted(reads)]
    return found


def reads_before_rebinding(statements, names):
    """(the names read before a statement rebinds them, the names still not rebound after)."""
    reads = set()
    for stmt in statements:
        if isinstance(stmt, (ast.For, ast.AsyncFor)):  # the target is bound before the body runs
            reads |= free_names(stmt.iter) & names
            names = names - {n.id for n in ast.walk(stmt.target) if isinstance(n, ast.Name)}
            inner, names = reads_before_rebinding(stmt.body + stmt.orelse, names)
            reads |= inner
        else:
            reads |= free_names(stmt) & names
        names = names - be.top_level_bindings(ast.unparse(stmt))
    return reads, names


def test_committed_editions_are_what_make_editions_builds():
    assert be.main(["--check"]) == 0, "run `make editions` and commit editions/"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_exercise_has_a_solution_and_a_check(path):
    nb = read(path)
    headings = [m for c in nb.cells if c.cell_type == "markdown" for m in HEADING.findall(c.source)]
    exercises = [c for c in nb.cells if be.is_exercise(c)]
    numbers = [be.exercise_task(be.split_solution(c.source)[0])[0] for c in exercises]
    assert len(exercises) >= 3, f"{path.name}: {len(exercises)} exercise cells"
    assert sorted(numbers) == sorted(set(numbers)) == sorted(headings), (numbers, headings)
    for cell, number in zip(exercises, numbers):
        _, solution, check = be.split_solution(cell.source)
        assert any(line.strip() and not line.strip().startswith("#") for line in solution), (
            f"exercise {number}"
        )
        asserts = [n for n in ast.walk(ast.parse("\n".join(check))) if isinstance(n, ast.Assert)]
        assert asserts, f"exercise {number}: no check after {be.END!r}"
        assert all(a.msg is not None for a in asserts), (
            f"exercise {number}: a check without a message"
        )


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_asserts_on_hard_coded_counts_say_what_they_got(path):
    for cell in read(path).cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(code_of(cell))):
            if (
                isinstance(node, ast.Assert)
                and node.msg is None
                and isinstance(node.test, ast.Compare)
            ):
                exact = any(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.test.ops)
                counts = [
                    c
                    for c in node.test.comparators + [node.test.left]
                    if isinstance(c, ast.Constant) and type(c.value) is int
                ]
                assert not (exact and counts), f"{path.name}: add a message: {ast.unparse(node)}"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_no_solution_code_survives_in_the_student_edition(path):
    nb, student = read(path), edition("student", path)
    outside = {
        line.strip() for c in nb.cells if not be.is_exercise(c) for line in c.source.split("\n")
    }
    for c in nb.cells:
        if be.is_exercise(c):
            before, _, after = be.split_solution(c.source)
            outside |= {line.strip() for line in before + after}
    text = "\n".join(c.source for c in student.cells)
    assert be.BEGIN not in text and be.END not in text
    for c in nb.cells:
        if be.is_exercise(c):
            for line in be.split_solution(c.source)[1]:
                line = line.strip()
                if len(line) > 8 and not line.startswith("#") and line not in outside:
                    assert line not in text, (
                        f"{path.name}: solution line in the student edition: {line}"
                    )


@pytest.mark.parametrize("name", ["student", "live"])
@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_other_cell_matches_the_instructor(path, name):
    nb, built = read(path), edition(name, path)
    assert len(built.cells) == len(nb.cells)
    changed = 0
    for mine, theirs in zip(nb.cells, built.cells):
        stubbed = be.is_exercise(mine) or be.is_solution_markdown(mine)
        live = mine.cell_type == "code" and "live" in mine.metadata.get("tags", [])
        if (name == "student" and stubbed) or (name == "live" and live):
            changed += 1
            continue
        assert (theirs.cell_type, theirs.source) == (mine.cell_type, mine.source)
        if name == "live" and mine.cell_type == "code":
            assert theirs.outputs == mine.outputs
    assert changed >= 2, f"{path.name}: only {changed} cells differ in the {name} edition"


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_every_exercise_check_ends_by_saying_it_passed(path):
    """Convention 1 of issue 18: the last line of an exercise cell reports a passing check."""
    for cell in read(path).cells:
        if be.is_exercise(cell):
            number = be.exercise_task(be.split_solution(cell.source)[0])[0]
            last = cell.source.rstrip().split("\n")[-1]
            assert last == f'print("Exercise {number}: check passed.")', (
                f"{path.name}, exercise {number}: its last line is {last!r}"
            )


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_live_hints_name_every_name_a_later_cell_reads(path):
    """Convention 2: `...; defines: a, b` lists every name the live cell binds that a later cell
    reads (exercises included, whose solutions the student-edition run below does not execute),
    and only names the cell binds."""
    nb = read(path)
    for i, cell in enumerate(nb.cells):
        if be.is_live(cell):
            hint, listed = be.live_hint(cell), be.live_defines(cell)
            assert ("defines:" in hint) == bool(listed), f"{path.name} cell {i}: {hint!r}"
            unbound = set(listed) - be.top_level_bindings(cell.source)
            assert not unbound, f"{path.name} cell {i} lists names it does not bind: {unbound}"
    missing = [
        f"cell {i} binds {name!r}, read by cell {j}" for i, name, j in hidden_names_used_later(nb)
    ]
    assert not missing, f"{path.name}: " + "; ".join(missing)


def test_the_static_check_sees_a_hidden_name():
    cells = [
        nbformat.v4.new_code_cell("# type a; defines: a\na, b = 1, 2", metadata={"tags": ["live"]}),
        nbformat.v4.new_code_cell("def f(b):\n    return a + b\nprint([b for b in 'x'])"),
        nbformat.v4.new_code_cell("for a in 'y':\n    print(a)\nprint(f(1) + b)"),
        nbformat.v4.new_code_cell("b = 3\nprint(b)"),
    ]
    assert hidden_names_used_later(nbformat.v4.new_notebook(cells=cells)) == [(0, "b", 2)]


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_live_cells_keep_a_one_line_hint(path):
    live = [c for c in edition("live", path).cells if "live" in c.metadata.get("tags", [])]
    assert len(live) >= 2, f"{path.name}: {len(live)} live cells"
    for cell in live:
        assert cell.source.startswith("# ") and "\n" not in cell.source and not cell.outputs


def keep_only_listed_names(cell):
    """The live cell as typed from its hint: the instructor's code, then every name it binds
    that its hint does not list deleted, so a later cell that needs one fails with NameError."""
    hidden = sorted(be.top_level_bindings(cell.source) - set(be.live_defines(cell)))
    if hidden:
        cell.source += f"\nfor _name in {hidden!r}:\n    globals().pop(_name, None)\ndel _name"


def run_student(path):
    """Run the student edition in a fresh kernel, each live cell keeping only the names its hint
    lists; its errors as (cell source, ename, evalue)."""
    nb = edition("student", path)
    originals = [c.source for c in nb.cells]
    for cell in nb.cells:
        if be.is_live(cell):
            keep_only_listed_names(cell)
    NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(be.EDITIONS / "student")}},
    ).execute()
    return [
        (source, o.ename, o.evalue)
        for c, source in zip(nb.cells, originals)
        if c.cell_type == "code"
        for o in c.outputs
        if o.output_type == "error"
    ]


@pytest.fixture(scope="module")
def student_runs(request):
    """Every selected student edition, two at a time (each notebook pins torch to one thread)."""
    wanted = [
        item.callspec.params["path"]
        for item in request.session.items
        if getattr(item, "originalname", None)
        == "test_student_edition_runs_with_only_the_stubs_not_done"
    ]
    pool = ThreadPoolExecutor(max_workers=2)
    yield {path: pool.submit(run_student, path) for path in wanted}
    pool.shutdown(wait=True)


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_student_edition_runs_with_only_the_stubs_not_done(path, student_runs):
    errors = student_runs[path].result()
    stubs = [
        c.source
        for c in edition("student", path).cells
        if "raises-exception" in c.metadata.get("tags", [])
    ]
    unexpected = [(ename, evalue) for source, ename, evalue in errors if source not in stubs]
    assert not unexpected, f"{path.name}: errors outside the exercise stubs: {unexpected}"
    assert [source for source, _, _ in errors] == stubs
    assert all(
        ename == "NotImplementedError" and be.NOT_DONE in evalue for _, ename, evalue in errors
    )


@pytest.mark.parametrize("path", LESSONS, ids=IDS)
def test_text_source_is_in_sync(path):
    paired = path.with_suffix(".py")
    assert paired.exists(), f"no {paired.name}: run `make sync`"
    expected = jupytext.writes(jupytext.read(path), fmt="py:percent")
    assert paired.read_text(encoding="utf-8") == expected, (
        f"{paired.name} and {path.name} differ: run `make sync`"
    )


CELL = """# Exercise 2: store the answer in `x`, and
#   its square in `y`.
### BEGIN SOLUTION
x = 3
y = x * x
### END SOLUTION
assert y == x * x, f"expected y to be x squared; got {y!r}\""""


def test_the_stub_says_what_to_write_and_keeps_the_check():
    stub = be.student_stub(CELL)
    assert "x = 3" not in stub and be.BEGIN not in stub
    assert stub.startswith(CELL.split(be.BEGIN)[0]) and stub.endswith(CELL.split(be.END)[1])
    with pytest.raises(
        NotImplementedError,
        match="Exercise 2 is not done yet: store the answer in "
        r"`x`, and its square in `y`\. Replace these lines",
    ):
        exec(stub, {})


@pytest.mark.parametrize(
    "source",
    [
        CELL.replace(be.END, ""),  # no end marker
        CELL.replace(be.BEGIN, be.END + "\n" + be.BEGIN, 1),  # end before begin
        CELL.replace("# Exercise 2: ", "# Task: "),  # no task line
        CELL + "\n" + be.BEGIN + "\n" + be.END,  # two solutions in one cell
    ],
)
def test_malformed_exercise_cells_are_value_errors(source):
    with pytest.raises(ValueError):
        be.student_stub(source)
