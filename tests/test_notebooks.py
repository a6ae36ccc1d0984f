"""Structure checks on the committed lessons; nbval (same pytest run) re-executes them."""

import json

import pytest

import build_editions

NOTEBOOKS = build_editions.lessons()


def code_cells(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    return nb, [c for c in nb["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def test_lessons_are_numbered_in_order():
    numbers = [int(p.name[:2]) for p in NOTEBOOKS]
    assert numbers == list(range(1, len(NOTEBOOKS) + 1))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_executed_top_to_bottom_in_one_kernel(path):
    _, cells = code_cells(path)
    assert [c["execution_count"] for c in cells] == list(range(1, len(cells) + 1))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_error_output_and_no_skipped_cell(path):
    _, cells = code_cells(path)
    for c in cells:
        assert not [o for o in c["outputs"] if o["output_type"] == "error"], "".join(c["source"])
        assert "NBVAL_SKIP" not in "".join(c["source"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_lesson_shape(path):
    """Opens with what the student learns, checks itself with asserts, plots, ends in exercises."""
    nb, cells = code_cells(path)
    markdown = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    assert "learn" in markdown[0].lower()
    assert any("## Summary" in m for m in markdown) and any("## Exercises" in m for m in markdown)
    sources = ["".join(c["source"]) for c in cells]
    assert sum("assert " in s for s in sources) >= 5
    assert sum("NBVAL_CHECK_OUTPUT" in s for s in sources) >= 3
    images = [o for c in cells for o in c["outputs"] if "image/png" in o.get("data", {})]
    assert len(images) >= 2
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
