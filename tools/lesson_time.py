"""Each lesson's "Time needed", estimated from its size: the words of its markdown at 100 a minute
(students read slowly and work along), plus one minute per code cell, rounded to 5 minutes.

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


def markdown_words(nb):
    """Whitespace-separated words in every markdown cell, the solution discussions included."""
    return sum(len(c.source.split()) for c in nb.cells if c.cell_type == "markdown")


def code_cells(nb):
    """Code cells that hold any code (an empty cell costs no time)."""
    return sum(1 for c in nb.cells if c.cell_type == "code" and c.source.strip())


def estimate(nb):
    """Minutes: words / 100 + one per code cell, rounded half up to a multiple of 5 (at least 5)."""
    minutes = markdown_words(nb) / WORDS_PER_MINUTE + MINUTES_PER_CODE_CELL * code_cells(nb)
    return max(5, 5 * int(minutes / 5 + 0.5))


def stated(nb):
    """The minutes the first markdown cell states ("**Time needed:** about N minutes."), or None."""
    first = next((c.source for c in nb.cells if c.cell_type == "markdown"), "")
    found = STATED.search(first)
    return int(found.group(1)) if found else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="fail if a stated time differs")
    args = parser.parse_args(argv)
    wrong = 0
    print(f"{'lesson':<36} {'words':>6} {'cells':>6} {'estimate':>9} {'stated':>7}")
    for path in be.lessons():
        nb = nbformat.read(path, as_version=4)
        est, says = estimate(nb), stated(nb)
        wrong += est != says
        counts = f"{markdown_words(nb):>6} {code_cells(nb):>6}"
        mark = "" if est == says else "  <- differs"
        print(f"{path.stem:<36} {counts} {est:>9} {says!s:>7}{mark}")
    return 1 if args.check and wrong else 0


if __name__ == "__main__":
    sys.exit(main())
