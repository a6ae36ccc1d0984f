"""Structure checks on the committed lessons; nbval (same pytest run) re-executes them."""

import json
import os
import shutil
import subprocess

import nbformat
import pytest

import build_editions
import lesson_time
import prose_stats

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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stated_time_is_the_estimate_from_words_and_cells(path):
    """Issue 18 D.3: "Time needed" is markdown words / 100 + one minute per code cell, to 5 min."""
    nb = nbformat.read(path, as_version=4)
    words, cells = lesson_time.markdown_words(nb), lesson_time.code_cells(nb)
    assert lesson_time.stated(nb) == lesson_time.estimate(nb), (
        f"{path.name}: {words} words, {cells} code cells: about {lesson_time.estimate(nb)} "
        f"minutes; it states {lesson_time.stated(nb)} (python tools/lesson_time.py)"
    )
    assert lesson_time.stated_further(nb) == lesson_time.estimate_further(nb), (
        f"{path.name}: its '## Going further' takes about {lesson_time.estimate_further(nb)} "
        f"minutes; it states {lesson_time.stated_further(nb)} (python tools/lesson_time.py)"
    )


def test_going_further_is_timed_apart_from_the_lesson():
    """Issue 35 item 6: the time up to "## Going further" and the time after it, stated both."""
    first = nbformat.v4.new_markdown_cell(
        "**Time needed:** about 15 minutes. **Going further:** about 5 minutes more. " + "w " * 990
    )
    further = nbformat.v4.new_markdown_cell("## Going further\n" + "w " * 300)
    cells = [first] + [nbformat.v4.new_code_cell("x = 1") for _ in range(5)] + [further]
    nb = nbformat.v4.new_notebook(cells=cells + [nbformat.v4.new_code_cell("y = 2")])
    assert (lesson_time.estimate(nb), lesson_time.stated(nb)) == (15, 15)  # 1,004 words, 5 cells
    assert (lesson_time.estimate_further(nb), lesson_time.stated_further(nb)) == (5, 5)  # 303, 1
    nb.cells.remove(further)
    assert lesson_time.estimate_further(nb) is None and lesson_time.estimate(nb) == 15


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_prose_meets_the_readability_targets(path):
    """Issue 35 item 6: mean sentence <= 18 words, 90th percentile <= 32, none over 55; 90 min."""
    stats = prose_stats.lesson_stats(path)
    longest = prose_stats.longest(path, 3)
    assert not prose_stats.misses(stats), (path.name, prose_stats.misses(stats), longest)


def test_prose_stats_counts_sentences_as_the_issue_defines_them():
    """Code spans, math and links are one word; list items and paragraphs are units; headings, bold
    labels and tables are not prose; a sentence ends at . ! ? : ; before a capital, code or link."""
    markdown = (
        "# A heading is not prose\n\n"
        "One two three. Four five: Six seven; eight nine.\n"
        "Call `ec.token_f1(a, b)` on $p + r$ and see [the script](http://x.org/a b).\n\n"
        "**How sure are we?**\n\n"  # a bold label standing alone is a heading, not a sentence
        "- an item of three\n- another: `code` ends it\n\n"
        "| a | table |\n| --- | --- |\n\n"
        "```\nnot. Prose. At all.\n```\n"
        "Version 1.2 stays one sentence, e.g. here."
    )
    lengths = [len(s) for s in prose_stats.sentences(markdown)]
    # "One two three." | "Four five:" | "Six seven; eight nine." (no capital after the ";") |
    # "Call CODE on MATH and see LINK." | "an item of three" | "another:" | "CODE ends it" |
    # "Version 1.2 stays one sentence, e.g. here."
    assert lengths == [3, 2, 4, 7, 4, 1, 3, 7], lengths
    assert prose_stats.percentile_90(lengths) == 7 and prose_stats.percentile_90([5]) == 5
    assert prose_stats.percentile_90(list(range(1, 11))) == 9  # nearest rank: ceil(0.9 * 10) = 9th


@pytest.mark.parametrize(
    "words, cells, minutes",
    [(0, 1, 5), (1240, 0, 10), (1250, 0, 15), (2000, 13, 35), (4400, 88, 130)],
)
def test_lesson_time_estimate_by_hand(words, cells, minutes):
    md = nbformat.v4.new_markdown_cell("**Time needed:** about 5 minutes. " + "w " * (words - 5))
    code = [nbformat.v4.new_code_cell("x = 1") for _ in range(cells)] + [
        nbformat.v4.new_code_cell("  ")  # an empty cell takes no time
    ]
    nb = nbformat.v4.new_notebook(cells=[md] + code if words else code)
    assert lesson_time.markdown_words(nb) == words and lesson_time.code_cells(nb) == cells
    assert lesson_time.estimate(nb) == minutes


def make_dry_run(target):
    """The commands `make <target>` would run, printed by make -n (nothing is run)."""
    done = subprocess.run(["make", "-n", target], cwd=build_editions.ROOT, capture_output=True)
    return done.stdout.decode()


def test_make_lab_passes_allow_root_exactly_when_run_as_root():
    """Issue 18 D.4: Jupyter refuses to start as root without --allow-root."""
    command = [line for line in make_dry_run("lab").splitlines() if "jupyter lab" in line]
    assert len(command) == 1, command
    assert ("--allow-root" in command[0]) == (os.geteuid() == 0), command[0]


def test_make_sync_is_quiet(tmp_path):
    """Issue 18 D.6: `make sync` printed "Notebook is not trusted" twice per lesson. Its command
    is run here on a copy of one lesson pair, with the .py edited so that there is work to do."""
    (command,) = [line for line in make_dry_run("sync").splitlines() if "jupytext" in line]
    lesson = NOTEBOOKS[0]
    (tmp_path / "notebooks").mkdir()
    for source in (lesson, lesson.with_suffix(".py"), lesson.parent / "jupytext.toml"):
        shutil.copy(source, tmp_path / "notebooks" / source.name)
    paired = tmp_path / "notebooks" / lesson.with_suffix(".py").name
    paired.write_text(paired.read_text(encoding="utf-8") + "\n# %%\n1 + 1\n", encoding="utf-8")
    os.utime(paired, (os.path.getmtime(paired) + 10,) * 2)  # the text source is the newer file
    command = command.replace(".venv/bin/", str(build_editions.ROOT / ".venv" / "bin") + "/")
    done = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "1 + 1" in (tmp_path / "notebooks" / lesson.name).read_text(encoding="utf-8")
    assert "not trusted" not in done.stdout + done.stderr, done.stdout + done.stderr


THREAD_LINE = 'torch.set_num_threads(1)  # on purpose: see the README\'s "Threads" section'


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_thread_line_makes_no_speed_claim(path):
    """Convention 3 of issue 18: the README's "Threads" section says what `make bench` measured."""
    nb = nbformat.read(path, as_version=4)
    lines = [line for c in nb.cells if c.cell_type == "code" for line in c.source.split("\n")]
    threads = [line for line in lines if "set_num_threads" in line]
    assert threads == [THREAD_LINE], threads
    readme = (build_editions.ROOT / "README.md").read_text(encoding="utf-8")
    assert "\n## Threads\n" in readme


# Claims the second review (issue 18) found false, unmeasured or reasoned backwards, each with the
# file it was in: they must not come back.
RETRACTED = [
    ("01_perplexity_pitfalls", "bits per token is also bits per"),
    ("01_perplexity_pitfalls", "the number hardly moves"),
    ("01_perplexity_pitfalls", "does not help, so the textbook order"),
    ("01_perplexity_pitfalls", "much faster than the default"),
    ("03_token_f1", "and lowers the frog answer, because"),
    ("04_mock_judge", "A **real** LLM judge would"),
    ("11_real_model", "much faster than the default"),
    ("11_real_model", "pairs, the closing token included"),
    ("11_real_model", "about half a gigabyte"),
    ("11_real_model", 'misspelt ("Bes make\nhoney.", "A weeek has haseven days.") or babble'),
    ("12_beyond_english", "Under every policy the wrong answers still average more"),
    ("12_beyond_english", "carries roughly what an English"),
    ("12_beyond_english", "make it a little less than three"),
    ("README", "two are\nfaster on an idle machine"),
    # the third review (issue 27), lesson 13
    ("13_real_instruct_model", "is not noise"),
    ("13_real_instruct_model", "never looked at"),
    ("13_real_instruct_model", "The rule fitted the shape of the development answers"),
    ("13_real_instruct_model", "where the one chosen here was worth nothing"),
    ("13_real_instruct_model", "about as over-confident"),
    # the reviews of lessons 09 and 13 after issue 27 (a statistician's and a fact-checker's)
    ("09_real_judge_over_http", "does no better on these answers"),
    ("09_real_judge_over_http", "did no better on these labels"),
    ("09_real_judge_over_http", "that part is length alone"),
    ("09_real_judge_over_http", "and no claim at all"),
    ("09_real_judge_over_http", "Between 65% and 79%"),
    ("09_real_judge_over_http", "Ollama's `docs/openai.md`"),
    ("13_real_instruct_model", "by about that noise floor"),
    ("13_real_instruct_model", "reads high by about that floor"),
    ("13_real_instruct_model", "about twice SmolLM2's"),
    ("13_real_instruct_model", "Both models are more confident than right"),
    ("13_real_instruct_model", "Its answers are mostly right"),
    ("13_real_instruct_model", "while most answers are right"),
    ("13_real_instruct_model", "Most answers are right in substance"),
    ("13_real_instruct_model", "below TinyGPT's 0.30 beyond noise"),
    ("13_real_instruct_model", "The prompt moves the score"),
    ("README", "The mock judge did no better on these labels"),
    ("README", "reads high by about the noise floor"),
    ("README", "while most answers are right"),
    ("README", "most answers are right in a sentence"),
]


@pytest.mark.parametrize("name, claim", RETRACTED, ids=[f"{n}:{c[:24]}" for n, c in RETRACTED])
def test_a_retracted_claim_does_not_come_back(name, claim):
    if name == "README":
        text = (build_editions.ROOT / "README.md").read_text(encoding="utf-8")
    else:
        (path,) = [p for p in NOTEBOOKS if p.stem == name]
        nb = nbformat.read(path, as_version=4)
        text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert " ".join(claim.split()) not in " ".join(text.split()), f"{name}: {claim!r}"
