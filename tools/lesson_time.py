"""Each lesson's "Time needed", estimated from its size: the words of its markdown at 100 a minute
(students read slowly and work along), plus one minute per code cell, rounded to 5 minutes. A
lesson whose deeper sections follow its Summary under "## Going further" states two times: up to
that heading ("**Time needed:** about N minutes.") and for the rest ("**Going further:** about M
minutes more.").

    python tools/lesson_time.py          # each lesson's counts, its estimate and the time it states
    python tools/lesson_time.py --check  # exit 1 if a lesson states another time than its estimate
"""

import argparse
import re
import sys

import nbformat

import build_editions as be

WORDS_PER_MINUTE = 100
MINUTES_PER_CODE_CELL = 1
STATED = re.compile(r"\*\*Time needed:\*\* about (\d+) minutes\.")
STATED_FURTHER = re.compile(r"\*\*Going further:\*\* about (\d+) minutes more\.")
GOING_FURTHER = "## Going further"


def markdown_words(nb):
    """Whitespace-separated words in every markdown cell, the solution discussions included."""
    return _words(nb.cells)


def code_cells(nb):
    """Code cells that hold any code (an empty cell costs no time)."""
    return _code(nb.cells)


def parts(nb):
    """(the cells before the "## Going further" heading, the cells from it on: empty if none)."""
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown" and GOING_FURTHER in cell.source:
            return nb.cells[:i], nb.cells[i:]
    return nb.cells, []


def _words(cells):
    return sum(len(c.source.split()) for c in cells if c.cell_type == "markdown")


def _code(cells):
    return sum(1 for c in cells if c.cell_type == "code" and c.source.strip())


def minutes(cells):
    """Minutes: words / 100 + one per code cell, rounded half up to a multiple of 5 (at least 5)."""
    raw = _words(cells) / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * _code(cells)
    return max(5, 5 * int(raw / 5 + 0.5))


def estimate(nb):
    """The minutes up to "## Going further" (the whole lesson when it has no such section)."""
    return minutes(parts(nb)[0])


def estimate_further(nb):
    """The minutes of the "## Going further" section and what follows it, or None without one."""
    further = parts(nb)[1]
    return minutes(further) if further else None


def _stated(nb, pattern):
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    found = pattern.search(first)
    return int(found.group(1)) if found else None


def stated(nb):
    """The minutes the first markdown cell states ("**Time needed:** about N minutes."), or None."""
    return _stated(nb, STATED)


def stated_further(nb):
    """The minutes it states for "Going further" ("**Going further:** about M minutes more.")."""
    return _stated(nb, STATED_FURTHER)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a stated time differs")
    args = parser.parse_args(argv)
    wrong = 0
    print(f"{'lesson':<36} {'words':>6} {'cells':>6} {'estimate':>9} {'stated':>7} {'further':>8}")
    for path in be.lessons():
        nb = nbformat.read(path, as_version=4)
        est, says = (estimate(nb), estimate_further(nb)), (stated(nb), stated_further(nb))
        wrong += est != says
        counts = f"{markdown_words(nb):>6} {code_cells(nb):>6}"
        further = "" if est[1] is None else f" {est[1]:>4} ({says[1]})"
        mark = "" if est == says else "  <- differs"
        print(f"{path.stem:<36} {counts} {est[0]:>9} {says[0]!s:>7}{further}{mark}")
    return 1 if args.check and wrong else 0


if __name__ == "__main__":
    sys.exit(main())
