"""How long each lesson's sentences are, counted over its markdown prose (issue 35's smoke alarms).

    python tools/prose_stats.py          # each lesson's mean, 90th percentile and longest sentence
    python tools/prose_stats.py --check  # exit 1 if a lesson misses a target
    python tools/prose_stats.py --longest 5 notebooks/16_code_execution.ipynb  # its 5 longest

The count: headings, bold lines standing alone (labels such as "How sure are we?"), tables, code
blocks and HTML comments are not prose; a code span, a piece of
math and a link each count as one word; each list item is a unit of its own, as is each paragraph;
a sentence ends at `.`, `!`, `?`, `:` or `;` followed by a space and a capital (or a code span, a
link or an opening bold), and at the end of its unit. A lesson may put its deeper sections after its
Summary under "## Going further"; its time up to that heading is what the 90-minute target reads.
"""

import argparse
import math
import re
import sys
from pathlib import Path

import nbformat

import build_editions
import lesson_time

MEAN_MAX, P90_MAX, LONGEST_MAX, MINUTES_MAX = 18.0, 32, 55, 90

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+\$", re.S)
_CODE = re.compile(r"`[^`\n]+`")
_LINK = re.compile(r"!?\[[^\]\n]*\]\([^)\n]*\)")
_LABEL = re.compile(r"\*\*[^*]+\*\*:?")  # a bold line alone ("**How sure are we?**") is a heading
_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M)
# a sentence ends at . ! ? : ; then whitespace, then a capital, a code span, a link or bold text
_END = re.compile(r"(?<=[.!?:;])[)\"'*_]*\s+(?=[\"'(*_]*[A-Z\u00c0-\u00de`\[])")


def prose_units(markdown):
    """The paragraphs and list items of one markdown cell, with code, math and links as one word."""
    text = _COMMENT.sub(" ", _FENCE.sub("\n\n", markdown))
    text = _LINK.sub("LINK", _CODE.sub("CODE", _MATH.sub("MATH", text)))
    lines = [ln for ln in text.split("\n") if not re.match(r"\s*(#|\|)", ln)]
    text = _ITEM.sub("\n\n", "\n".join(lines))
    units = [u.strip() for u in re.split(r"\n\s*\n", text) if u.strip()]
    return [u for u in units if not _LABEL.fullmatch(u)]


def sentences(markdown):
    """The sentences of one markdown cell, each a list of its words."""
    return [s.split() for u in prose_units(markdown) for s in _END.split(u) if s.split()]


def percentile_90(lengths):
    """The nearest-rank 90th percentile: the smallest length at least 90% of sentences reach."""
    ranked = sorted(lengths)
    return ranked[max(0, math.ceil(0.9 * len(ranked)) - 1)]


def lesson_sentences(nb):
    """Every sentence of a lesson's markdown cells, in order, each a list of its words."""
    return [s for c in nb.cells if c.cell_type == "markdown" for s in sentences(c.source)]


def lesson_stats(path):
    """A lesson's sentence count, mean and 90th-percentile words, longest, and its minutes."""
    nb = nbformat.read(path, as_version=4)
    lengths = [len(s) for s in lesson_sentences(nb)]
    return {
        "sentences": len(lengths),
        "mean": sum(lengths) / len(lengths),
        "p90": percentile_90(lengths),
        "longest": max(lengths),
        "minutes": lesson_time.estimate(nb),
        "further": lesson_time.estimate_further(nb),
    }


def misses(stats):
    """The targets a lesson's stats miss, in words (empty when it meets them all)."""
    found = []
    if stats["mean"] > MEAN_MAX:
        found.append(f"mean {stats['mean']:.1f} words > {MEAN_MAX}")
    if stats["p90"] > P90_MAX:
        found.append(f"90th percentile {stats['p90']} > {P90_MAX}")
    if stats["longest"] > LONGEST_MAX:
        found.append(f"longest {stats['longest']} > {LONGEST_MAX}")
    if stats["minutes"] > MINUTES_MAX:
        found.append(
            f"{stats['minutes']} minutes before '{lesson_time.GOING_FURTHER}' > {MINUTES_MAX}"
        )
    return found


def longest(path, n):
    """The n longest sentences of a lesson, longest first, as (words, text)."""
    found = lesson_sentences(nbformat.read(path, as_version=4))
    return [(len(s), " ".join(s)) for s in sorted(found, key=len, reverse=True)[:n]]


def main(argv=None):
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--check", action="store_true", help="exit 1 if a lesson misses a target")
    parser.add_argument("--longest", type=int, default=0, help="print each lesson's N longest")
    parser.add_argument("paths", nargs="*", type=Path, help="lessons (default: all)")
    args = parser.parse_args(argv)
    paths = args.paths or build_editions.lessons()
    missed = 0
    print(f"{'lesson':<32} {'sent.':>5} {'mean':>5} {'p90':>4} {'max':>4} {'min':>4} {'more':>4}")
    for path in paths:
        s = lesson_stats(path)
        found = misses(s)
        missed += bool(found)
        row = f"{s['sentences']:>5} {s['mean']:>5.1f} {s['p90']:>4} {s['longest']:>4}"
        mark = "  <- " + "; ".join(found) if found else ""
        further = "" if s["further"] is None else s["further"]
        print(f"{path.stem:<32} {row} {s['minutes']:>4} {further:>4}{mark}")
        for words, text in longest(path, args.longest):
            print(f"    {words:>3}  {text}")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
