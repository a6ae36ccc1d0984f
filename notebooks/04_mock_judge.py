# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 04 · The mock judge: LLM-as-judge without the LLM
#
# In **LLM-as-judge**, a large language model (LLM) grades another model's answers. This lesson builds that
# interface with no LLM inside. Its judge, `ec.mock_judge`, scores an answer from exact match and token
# F1 alone, so it is deterministic and free to call.
#
# **What you will learn**
#
# - the rules of `ec.mock_judge`, a deterministic stand-in for an LLM judge, and the one-line rationale
#   it gives with every score;
# - how to check those rules on hand-made answers that sit exactly on each boundary;
# - how to run `ec.judge_eval` on the shipped model and read its score distribution and per-example table;
# - how the judge lines up against exact match and token F1 (crosstabs and heatmaps), and why this
#   judge can never *really* disagree with them;
# - how to plug in a different judge with the same signature (a stricter and a more lenient one), and
#   how far that moves the eval's value;
# - what happens when a judge returns something malformed;
# - what a real LLM judge would add, and what it would cost.
#
# **Time needed:** about 80 minutes.
#
# **Builds on:** lesson 02 (exact match and `normalise_em`), lesson 03 (token F1) and lesson 01 (the
# percentile bootstrap). Every score here is built from EM and token F1. The real judge over HTTP comes
# in lesson 09.

# %%
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
model = ec.load_pretrained()  # the shipped TinyGPT: no training in this notebook
tok = ec.InstructionTokenizer()
fx = ec.load_fixtures()
len(fx["judge"])

# %% [markdown]
# The judge fixture holds 20 `(instruction, reference)` pairs. Unlike the EM fixture, the references are
# whole sentences: the sort of answer key a human grader would be given.

# %%
# NBVAL_CHECK_OUTPUT
for instruction, reference in fx["judge"][:4]:
    print(f"{instruction!r:50} -> {reference!r}")

# %% [markdown]
# ## 1. The rules
#
# The mock judge scores an answer from 1 to 5 by how much it overlaps the reference, and it explains
# each score in one line. An answer exactly on one of the thresholds below (0.8, 0.5, 0.2) gets the
# higher score.
#
# An LLM judge is handed the instruction, the model's answer and (often) a reference. It is asked for a
# score on a 1-5 scale plus a short justification. `ec.mock_judge` keeps that interface,
# `(instruction, prediction, reference) -> (score, rationale)`, but replaces the LLM with two metrics
# you already know:
#
# | condition (checked in this order) | score | rationale begins |
# | --- | --- | --- |
# | exact match after `normalise_em` | 5 | "matches the reference" |
# | token F1 >= 0.8 | 4 | "near match" |
# | 0.5 <= token F1 < 0.8 | 3 | "partly right" |
# | 0.2 <= token F1 < 0.5 | 2 | "mostly wrong" |
# | token F1 < 0.2 | 1 | "unrelated to the reference" |
#
# It ignores the instruction entirely. Here is one call:

# %%
# NBVAL_CHECK_OUTPUT
ec.mock_judge("Which planet is the red planet?", "Mars is the red world.", "Mars is the red planet.")

# %% [markdown]
# Four of the five tokens are shared (`world.` is not `planet.`), so F1 is 2 x 4 / (5 + 5) = 0.8
# exactly, and the rule `>= 0.8` gives 4. (These are F1's tokens, whitespace words, as in lesson 03.)
#
# Boundaries are where an implementation usually goes wrong: a `>` written for a `>=`, or an F1
# computed as $2PR/(P+R)$ (precision and recall) that lands on 0.7999999 through floating-point
# rounding. So let us put hand-made answers on each boundary and just below it. All of them answer the
# same question against the same reference.

# %%
REF = "Mars is the red planet."
probes = ["mars is the red planet",        # exact match after normalisation
          "Mars is the red world.",        # F1 exactly 0.8
          "Mars is the small red world.",  # one extra token: just below 0.8
          "Mars is hot.",                  # F1 exactly 0.5
          "Mars is very hot.",             # just below 0.5
          "Venus is a hot world.",         # F1 exactly 0.2 (only "is" is shared)
          "Venus is a very hot world.",    # just below 0.2
          "Mars"]                          # the right answer, in one word
rows = [(p, ec.exact_match(p, REF), ec.token_f1(p, REF), *ec.mock_judge("q", p, REF)) for p in probes]
boundaries = pd.DataFrame(rows, columns=["prediction", "em", "f1", "score", "rationale"])

# %%
# NBVAL_CHECK_OUTPUT
print(boundaries.round(4).to_string())

# %%
assert boundaries.f1[1] == 0.8 and boundaries.f1[3] == 0.5 and boundaries.f1[5] == 0.2  # exact floats
assert boundaries.score.tolist() == [5, 4, 3, 3, 2, 2, 1, 2], f"expected scores 5 4 3 3 2 2 1 2, got {boundaries.score.tolist()}"
assert boundaries.f1[0] == 0.8 and boundaries.score[0] == 5, \
    f"expected F1 0.8 and score 5, got {boundaries.f1[0]} and {boundaries.score[0]}"  # EM is checked before F1

# %% [markdown]
# Three things to take from the table:
#
# - **Exactly on a boundary goes up.** F1 0.8 scores 4, 0.5 scores 3, and 0.2 scores 2. One extra token
#   (`small`, `very`) pushes each answer just under its boundary and costs a point.
# - **EM is checked first.** `mars is the red planet` has token F1 only 0.8, because token F1 keeps
#   punctuation and `planet` is not `planet.`. But `normalise_em` drops the trailing full stop, so the
#   answer scores 5.
# - **The right answer in one word scores 2.** `Mars` shares one token with a five-token reference:
#   F1 = 2/6 = 0.33. The mock judge measures *overlap with the reference*, not *correctness*. Keep this
#   row in mind: it is the main source of everything odd in the rest of the notebook. Meanwhile
#   `Venus is a hot world.`, which is simply wrong, also scores 2 for sharing the word `is`.

# %% [markdown]
# ## 2. Judging the shipped model
#
# The mock judge gives the shipped model a mean of 1.95 on its 1-5 scale, with a 95% interval from 1.5
# to 2.45. Its most common verdict is 1, "unrelated to the reference".
#
# `ec.judge_eval(model, tok, pairs)` generates an answer for every instruction and calls the judge on
# each. It returns an `EvalResult` (lesson 01) whose `value` is the mean score. The answers come from
# the same **greedy decoding** as every other eval. At each step the model takes its single most likely
# next token (a model token, one byte: lesson 01), so nothing is sampled. The same prompt, model and
# settings give the same answer every time they are run. (Across machines, a near tie between the two
# most likely tokens can in principle flip: see the README's "The same on every machine".)

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Judge the shipped model: ec.judge_eval(model, tok, fx["judge"]), then its value and ci95; defines: hi, lo, result
result = ec.judge_eval(model, tok, fx["judge"])
lo, hi = result.extras["ci95"]  # percentile bootstrap over the 20 answers
print(result.name, f"{result.value:.4g}", "over", len(result.per_example), "examples,",
      f"95% interval [{lo:.4g}, {hi:.4g}]")

# %%
assert result.name == "judge" and len(result.per_example) == len(fx["judge"]), \
    f"expected a 'judge' result over {len(fx['judge'])} examples, got {result.name!r} over {len(result.per_example)}"
assert abs(result.value - 1.95) < 1e-9, result.value  # the figure quoted for the shipped checkpoint
assert abs(lo - 1.5) < 1e-9 and abs(hi - 2.45) < 1e-9, (lo, hi)  # the interval quoted below

# %% [markdown]
# A mean of 1.95 on a 1-5 scale sounds like "mostly wrong". With 20 answers it is also rough. The
# interval in `result.extras["ci95"]` is a percentile bootstrap (lesson 01): resample the 20 answers
# with replacement 2000 times, and keep the middle 95% of the means. It runs from 1.5 to 2.45, nearly a
# full point of the scale.
#
# The distribution of the scores says more:

# %%
# NBVAL_CHECK_OUTPUT
scores = pd.Series([r["score"] for r in result.per_example])
counts = scores.value_counts().reindex(range(1, 6), fill_value=0)
print(counts.to_string())

# %%
fig, ax = plt.subplots(figsize=(8, 4))
ax.bar(counts.index, counts.values, color="tab:blue")
ax.axvline(result.value, color="tab:red", linestyle="--", label=f"mean = {result.value:.2f}")
ax.set(title="Mock judge scores of the shipped TinyGPT (20 instructions)",
       xlabel="judge score (1 = unrelated, 5 = matches the reference)", ylabel="number of answers",
       xticks=range(1, 6))
ax.legend()
plt.show()

# %%
assert counts.sum() == len(fx["judge"]) and counts[4] == 0, f"expected {len(fx['judge'])} scores and no 4s, got {counts.to_dict()}"
assert counts.idxmax() == 1 and counts[1] == 9, f"expected 1 the most common score, 9 times, got {counts.to_dict()}"  # the most common verdict is "unrelated"

# %% [markdown]
# Nine answers are judged unrelated to their reference, and not a single one gets a 4. Only one answer
# reproduces its reference. Even the closest miss, `"No, penguins cannnnot fly."` (one misspelt word of
# four), has token F1 0.75. With references this short, one wrong token is enough to fall below 0.8.
#
# The per-example table shows the rest. Each record carries the prediction, the reference, the score
# and the judge's rationale.

# %%
df = pd.DataFrame(result.per_example)[["prediction", "reference", "score", "rationale"]]
df

# %% [markdown]
# **How sure are we?**
# - The interval (1.5 to 2.45) covers the uncertainty from which 20 questions were drawn, with the judge
#   held fixed. The shipped model's mean judge score on questions like these is plausibly anywhere in
#   it, so it is known only to about ±0.5.
# - A judge that does not give the same score twice adds noise that this interval leaves out (section 7).

# %% [markdown]
# ## 3. The judge against exact match and token F1
#
# The mock judge cannot really disagree with exact match and token F1. Once you know an answer's EM and
# its F1 bucket, you know its score.
#
# We score the **same predictions** with `ec.exact_match` and `ec.token_f1`. Then we bucket F1 at the
# judge's own thresholds with `pd.cut` (`right=False` makes each bucket `[low, high)`, matching the rules).

# %%
F1_LABELS = ["[0, 0.2)", "[0.2, 0.5)", "[0.5, 0.8)", "[0.8, 1]"]
df["em"] = [ec.exact_match(p, r) for p, r in zip(df.prediction, df.reference)]
df["f1"] = [ec.token_f1(p, r) for p, r in zip(df.prediction, df.reference)]
df["f1_bucket"] = pd.cut(df.f1, bins=[0, 0.2, 0.5, 0.8, np.inf], right=False, labels=F1_LABELS)
df[["prediction", "em", "f1", "f1_bucket", "score"]].round(4)

# %% [markdown]
# A **crosstab** (`pd.crosstab`) counts the answers in each combination of a row value and a column
# value. Here the rows are the judge's scores, and the columns are EM or the F1 bucket.

# %%
# NBVAL_CHECK_OUTPUT
by_em = pd.crosstab(df.score, df.em).reindex(index=range(1, 6), columns=[0.0, 1.0], fill_value=0)
by_f1 = pd.crosstab(df.score, df.f1_bucket).reindex(index=range(1, 6), columns=F1_LABELS,
                                                    fill_value=0)
print("judge score x exact match\n", by_em.to_string(), "\n")
print("judge score x token F1 bucket\n", by_f1.to_string())

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4), gridspec_kw={"width_ratios": [1, 2]})
for ax, table, xlabel in [(axes[0], by_em, "exact match"), (axes[1], by_f1, "token F1 bucket")]:
    ax.imshow(table.values, cmap="Blues", vmin=0, aspect="auto")
    for (i, j), n in np.ndenumerate(table.values):
        ax.text(j, i, n, ha="center", va="center", color="white" if n > 4 else "black")
    ax.set(xticks=range(table.shape[1]), xticklabels=table.columns, yticks=range(5),
           yticklabels=table.index, xlabel=xlabel, ylabel="judge score")
axes[0].set_title("Judge score vs exact match")
axes[1].set_title("Judge score vs token F1 bucket")
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the heatmaps like this:
#
# - in the **EM** heatmap, the one answer with EM = 1 sits in the score-5 row, and no answer with EM = 0
#   does: score 5 *is* exact match;
# - in the **F1** heatmap, each bucket feeds exactly one row (apart from exact matches, which jump to 5).
#   The picture is a staircase, because the judge is a **step function** of F1: constant inside each
#   bucket, with a jump at each threshold.
#
# So the judge adds no information beyond EM and F1: knowing (EM, F1 bucket), you know the judge's
# score with certainty. Let us assert exactly that.

# %%
assert ((df.score == 5) == (df.em == 1.0)).all(), f"expected 5 exactly when EM is 1, got {df[['score', 'em']].values.tolist()}"  # 5 if and only if exact match
n_scores = df.groupby(["em", "f1_bucket"], observed=True).score.nunique().max()
assert n_scores == 1, f"expected one score per (EM, F1 bucket), got up to {n_scores}"  # a function of them
assert by_em.loc[5, 1.0] == 1 and by_em[0.0].sum() == len(df) - 1, f"expected one exact match scored 5, got {by_em.to_dict()}"
closest = df[df.em == 0].sort_values("f1").iloc[-1]  # the best non-match, quoted above
assert closest.prediction == "No, penguins cannnnot fly." and closest.f1 == 0.75, closest.to_dict()

# %% [markdown]
# ## 4. Where the judge and EM "disagree", and why
#
# The judge's only "disagreement" with EM is partial credit, and that credit follows token overlap, not
# correctness.
#
# What differs from EM is the resolution: how finely a score tells answers apart. EM gives 0 to every one
# of the 19 non-matching answers, while the judge spreads them over 1-3. Those are the
# "disagreements": partial credit where EM gives none. The table also shows the question each answer
# was given.

# %%
partial = df[(df.em == 0) & (df.score >= 2)]
questions = pd.Series([r["instruction"] for r in result.per_example])  # the question each answer was given
partial.assign(question=questions[partial.index])[["question", "prediction", "reference", "f1", "score"]].round(4)

# %%
# NBVAL_CHECK_OUTPUT
print(len(partial), "answers with EM 0 get partial credit; scores:",
      partial.score.value_counts().sort_index().to_dict())

# %%
assert len(partial) == 10 and set(partial.score) == {2, 3}, \
    f"expected 10 answers scored 2 or 3, got {partial.score.value_counts().to_dict()}"

# %% [markdown]
# Ten of the 19 non-matches get partial credit, five of them a 2 and five a 3. Here are three rows from
# the table, with what a careful human grader would say:

# %%
notes = {"Paris is the capital of France.": "correct, in one word",
         "The Sun is a star.": "wrong: garbled, and it never says 'star'; its credit is 'the', 'sun', 'is' and 'a'",
         "Mount Everest is the tallest mountain.": "wrong: it shares only 'is' and 'the'"}
cases = df[df.reference.isin(notes)][["prediction", "reference", "f1", "score"]].round(4)
cases["a human grader"] = cases.reference.map(notes)
pd.set_option("display.max_colwidth", 100)  # show the grader's whole note
cases

# %%
assert cases.set_index("reference").score.to_dict() == {
    "Paris is the capital of France.": 2, "The Sun is a star.": 3,
    "Mount Everest is the tallest mountain.": 2}, cases.score.tolist()
assert "star" not in ec.normalise_f1(cases.set_index("reference").prediction["The Sun is a star."]).split()


# %% [markdown]
# The correct `Paris` scores *lower* than the garbled Sun answer, which never says "star". `Paris` also
# scores no higher than the answer to the mountain question, which names the wrong thing entirely. The
# mock judge cannot see this, by construction: it is a function of EM and F1, and it inherits every
# blind spot of token overlap (lesson 03).
#
# A judge that reads is *meant* to disagree with EM and F1, for more interesting reasons. It is meant to
# give `Paris`, `Mars` and `Pacific Ocean` full marks, because the meaning matches, and the Sun answer a
# low score despite the shared words.
#
# **How sure are we?**
# - Whether a given LLM judge does so is not something this lesson can show: it has no real judge.
# - A real judge must be checked on answers like these before it is trusted (lesson 09 runs such
#   checks). This one only counts.

# %% [markdown]
# ## 5. Swapping the judge
#
# The judge is part of the eval's definition. Two other judges move the value of the same 20 answers
# from 1.20 to 2.35, so a report must say which judge produced its number.
#
# `judge_eval` takes any `judge_fn` with the same signature,
# `(instruction, prediction, reference) -> (score, rationale)`. The judge is a *policy*, and the eval's
# value is only as meaningful as that policy. Here are two alternatives, written here and not taken
# from `evalcore`:
#
# - **strict**: all or nothing, 5 for an exact match and 1 otherwise;
# - **lenient**: 5 when every word of the answer appears in the reference, so a terse `Paris` counts as
#   right; otherwise whatever the mock judge says. It uses `ec.f1_counts`, which returns (shared tokens,
#   prediction length, reference length).

# %% tags=["live"]
# Two judges with mock_judge's signature: strict (EM or nothing), lenient (every answer token in the reference); defines: lenient_judge, strict_judge
def strict_judge(instruction, prediction, reference):
    if ec.exact_match(prediction, reference):
        return 5, "exact match"
    return 1, "no exact match: no credit"

def lenient_judge(instruction, prediction, reference):
    overlap, n_pred, _ = ec.f1_counts(prediction, reference)
    if n_pred > 0 and overlap == n_pred:
        return 5, "every token of the answer appears in the reference"
    return ec.mock_judge(instruction, prediction, reference)


# %% [markdown]
# We run all three judges on the same answers. The table also shows each value divided by 5, the form
# lesson 05 uses. There, the course combines its evals into one **aggregate** score: a weighted average
# of their values, each first mapped into [0, 1] with higher meaning better (the judge's 1-5 becomes
# 0.2-1). The judge's default weight in that average is 0.2.

# %%
judges = {"strict": strict_judge, "mock (default)": None, "lenient": lenient_judge}
runs = {name: ec.judge_eval(model, tok, fx["judge"], judge_fn=fn) for name, fn in judges.items()}
values = pd.DataFrame({"judge value (1-5)": {n: r.value for n, r in runs.items()},
                       "normalised (value / 5)": {n: ec.normalise_metric("judge", r.value)
                                                  for n, r in runs.items()}})

# %%
# NBVAL_CHECK_OUTPUT
print(values.round(4).to_string())

# %%
fig, ax = plt.subplots(figsize=(8, 4))
bars = ax.bar(values.index, values["judge value (1-5)"], color=["tab:gray", "tab:blue", "tab:green"])
ax.bar_label(bars, fmt="%.2f")
spread = values["judge value (1-5)"].max() - values["judge value (1-5)"].min()
ax.set(title=f"Same 20 answers, three judges: the eval's value moves by {spread:.3g} points",
       xlabel="judge_fn passed to judge_eval", ylabel="mean judge score (1-5)", ylim=(0, 5))
plt.show()

# %%
v = values["judge value (1-5)"]
assert v["strict"] < v["mock (default)"] < v["lenient"]
assert abs(v["strict"] - (1 + 4 * df.em.mean())) < 1e-9  # strict is EM rescaled to 1-5
assert abs(v["lenient"] - 2.35) < 1e-9 and abs(v["strict"] - 1.2) < 1e-9, v.to_dict()
fixed = [r["prediction"] for r, m in zip(runs["lenient"].per_example, runs["mock (default)"].per_example)
         if r["score"] != m["score"]]
print("the lenient judge changes:", fixed)
assert fixed == ["Paris", "Pacific Ocean", "Mars"], fixed

# %% [markdown]
# The model and its 20 answers did not change, yet the eval's value went from 1.20 to 2.35 (0.24 to
# 0.47 once divided by 5). With the judge's default weight of 0.2, that alone moves the course's
# aggregate score by 0.2 x 0.23 = 0.046. Which judge is right depends on what the eval is for, and the
# report should say which judge produced the number.
#
# The strict judge is EM in disguise (`1 + 4 x EM`, asserted above). The lenient one fixes `Paris`,
# `Pacific Ocean` and `Mars`, but look at what else it forgives:

# %%
# NBVAL_CHECK_OUTPUT
print(lenient_judge("q", "The", "The Pacific Ocean is the largest."))
print(lenient_judge("Tell me what the Moon travels around.", "The Moon", "The Moon orbits the Earth."))

# %%
assert lenient_judge("q", "The", "The Pacific Ocean is the largest.")[0] == 5, "expected 5 for 'The'"
assert lenient_judge("q", "The Moon", "The Moon orbits the Earth.")[0] == 5, "expected 5 for 'The Moon'"  # wrong, yet full marks


# %% [markdown]
# The single word `The` earns full marks. So does `The Moon` as the answer to "what does the Moon travel
# around?", though it merely echoes the question. Any judge built from surface rules can be gamed by an
# answer shaped for the rule. A model trained against such a judge would learn to answer with safe
# fragments of the question, since the question's words are the likeliest to be in the reference.
# (Exercise 1 repairs this one.)
#
# **How sure are we?**
# - The strict and lenient judges re-score the same answers, so their spread (1.20 to 2.35) is a
#   difference of definition, not of sampling. Their order is fixed by construction: the strict judge
#   never scores above the mock judge, and the lenient one never below it.

# %% [markdown]
# ## 6. A broken judge is an error, not a number
#
# `judge_eval` checks every verdict. A malformed one raises `ValueError` naming the example, so a broken
# score is never averaged into the result.
#
# Real judges break: a prompt written for a 1-7 scale, a parser that returns the bare score and forgets
# the rationale, a reply with no score in it. Here are two broken judges:

# %% tags=["live"]
# Two broken judges: one scores 7 for an exact match, one sometimes returns a bare number; defines: bare_number_judge, seven_point_judge
# BUGGY ON PURPOSE: a 1-7 scale, outside the judge contract
def seven_point_judge(instruction, prediction, reference):
    score, why = ec.mock_judge(instruction, prediction, reference)
    return (7 if score == 5 else score), why  # someone's rubric tops out at 7

# BUGGY ON PURPOSE: sometimes returns a bare number, no rationale
def bare_number_judge(instruction, prediction, reference):
    score, why = ec.mock_judge(instruction, prediction, reference)
    return score if len(prediction.split()) == 1 else (score, why)  # forgets the rationale sometimes


# %%
errors = {}
for name, fn in [("seven_point", seven_point_judge), ("bare_number", bare_number_judge)]:
    try:
        ec.judge_eval(model, tok, fx["judge"], judge_fn=fn)
    except ValueError as err:
        errors[name] = str(err)
        print(f"{name}: ValueError: {err}")

# %%
assert set(errors) == {"seven_point", "bare_number"}, f"expected both judges to raise, got {errors}"  # neither produced a value
assert "example 4" in errors["seven_point"] and "7" in errors["seven_point"], errors  # the only exact match
assert "example 0" in errors["bare_number"], errors  # 'Paris', the first one-word answer

# %% [markdown]
# The 7 appears on example 4, the only exact match (the spider). The bare number appears on example 0,
# the first one-word answer (`Paris`). Each message points straight at the record to inspect.
#
# Raising is one policy among several. Widely used frameworks differ over what happens to a verdict
# they cannot parse. Besides lighteval, OpenAI evals and Inspect (lesson 03), the table names:
# - **FastChat**, LMSYS's open-source code for serving and judging chat models;
# - **MT-Bench**, its benchmark of multi-turn questions, graded by an LLM judge;
# - **G-Eval**, a judging method from a 2023 paper, and the code released with it;
# - **DeepEval**, Confident AI's library for testing LLM applications.
#
# | framework | a verdict it cannot parse | what that changes in the mean |
# | --- | --- | --- |
# | FastChat's MT-Bench code | recorded as -1; every -1 is dropped before taking the mean | the denominator |
# | G-Eval's code | scored 0 and kept in the mean | the numerator |
# | lighteval's MT-Bench task | scored 0 and kept in the mean | the numerator |
# | OpenAI evals | given the lowest score on the scale | the numerator |
# | Inspect's `model_graded_qa`, up to inspect-ai 0.3.244 | scored as wrong: `Score(value=INCORRECT, explanation="Grade not found in model output: ...")` | the numerator |
# | Inspect's `model_graded_qa`, since 0.3.245 (0.3.285 still) | the sample is left unscored (`Score.unscored(...)`) | the denominator |
# | DeepEval | raises `ValueError` when the judge's reply is not valid JSON | nothing: by default the run stops |
#
# Dropping a failure changes the denominator, and scoring it low changes the numerator. Either is
# silent unless the report says how many verdicts failed. Raising, as `judge_eval` and (by default)
# DeepEval do, stops the run instead of changing the number. Inspect's change between two releases
# shows that the choice is not obvious. Lesson 09's HTTP judge has to pick one and report it.
#
# *Sources:* each policy as checked in the file named. FastChat: `fastchat/llm_judge/common.py`
# (`run_judge_single`) and `fastchat/llm_judge/show_result.py`. G-Eval: `meta_eval_summeval.py`
# (`parse_output`). lighteval: `src/lighteval/tasks/tasks/mt_bench/main.py` (`process_judge_response`).
# OpenAI evals: `evals/elsuite/modelgraded/classify_utils.py` (`get_choice_score`). Inspect:
# `src/inspect_ai/scorer/_model.py`. DeepEval: `deepeval/metrics/utils.py` (`trimAndLoadJson`), and its
# default `ErrorConfig(ignore_errors=False)` in `deepeval/evaluate/configs.py`.

# %% [markdown]
# ## 7. What a real judge would add, and what it would cost
#
# A real judge could read meaning, which the mock judge cannot. In exchange it costs money and time, its
# scores can vary from run to run, and it has biases of its own.
#
# **What it could add.** An LLM judge is asked to read meaning, not tokens. It is asked to score `Paris`
# as right, and the garbled Sun sentence as wrong however many tokens it shares. It is asked, too, to
# score a paraphrase such as `France has Paris as its capital.` as highly as the reference `Paris is the
# capital of France.`. The mock judge gives that paraphrase a 1. With the full stops kept, the two share
# only the token `paris`:

# %%
# NBVAL_CHECK_OUTPUT
paraphrase = ec.mock_judge("q", "France has Paris as its capital.", "Paris is the capital of France.")
print(paraphrase)
assert paraphrase[0] == 1, paraphrase  # a correct paraphrase, judged unrelated

# %% [markdown]
# A real judge can also be given a **rubric**: a written list of what to check (correct? complete?
# follows the instruction's "briefly"?). And it can grade answers that have no single reference at all.
#
# How well a particular judge does any of this is an empirical question, measured against human
# verdicts. It is not a property of LLM judges, and nothing in this lesson measures it.
#
# **What it costs.**
#
# - **Money and latency**: one model call per example per run, often with a long prompt (instruction,
#   rubric, reference, answer). The mock judge is a free function call.
# - **Variance**: the spread of a result over repeated runs of the same measurement (the square of its
#   standard deviation). A judge that samples its reply, rather than decoding greedily, need not give
#   the same score twice; see the simulation below.
# - **Biases**:
#   - *position* bias: in a pairwise comparison the judge is shown two answers and asked which is
#     better, and the verdict can depend on which answer is shown first (often the first one wins).
#     That is why FastChat judges each pair in both orders.
#   - *verbosity* bias: longer answers look better to the judge.
#   - *self-preference*: a judge favours answers from its own model family (its own or closely related
#     models).
# - **Parsing failures**: the score arrives as text and must be parsed (section 6).
#
# The mock judge has neither of the first two costs. Its biases are its own: it rewards overlap over
# correctness (section 4), and it has the reverse of verbosity bias (shown below). That makes it a good
# *unit-test double*, a cheap and predictable stand-in that tests call in place of the real thing. It
# has none of the benefits.
#
# First, variance. Suppose a judge gave the mock judge's score, but wobbled by one point on 30% of the
# answers, up or down with equal chance, and never left the 1-5 scale. We re-judge the same 20
# predictions 500 times:

# %%
rng = np.random.default_rng(0)
base = df.score.to_numpy()
wobble = rng.choice([-1, 0, 1], p=[0.15, 0.70, 0.15], size=(500, len(base)))
rerun_means = np.clip(base + wobble, 1, 5).mean(axis=1)

# %%
# NBVAL_CHECK_OUTPUT
print(f"mean of reruns {rerun_means.mean():.4g}, std {rerun_means.std():.4g}, "
      f"range {rerun_means.min():.4g} to {rerun_means.max():.4g}")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
edges = np.arange(rerun_means.min() - 0.025, rerun_means.max() + 0.05, 0.05)  # one bar per 1/20
ax.hist(rerun_means, bins=edges, color="tab:purple", edgecolor="white")
ax.axvline(result.value, color="tab:red", linestyle="--", label=f"deterministic mock judge: {result.value:.2f}")
ax.set(title="500 reruns of a judge that wobbles by one point on 30% of answers",
       xlabel="eval value (mean judge score over 20 answers)", ylabel="number of reruns")
ax.legend()
plt.show()

# %%
assert 0.05 < rerun_means.std() < 0.2, rerun_means.std()  # same answers, same model: the value still moves
assert rerun_means.max() - rerun_means.min() > 0.4, rerun_means.max() - rerun_means.min()
assert rerun_means.mean() > result.value  # the clip at 1 makes the wobble lean upward (see below)

# %% [markdown]
# Same model, same 20 answers, and yet the value lands anywhere from 1.75 to 2.3. Two standard
# deviations is roughly ±0.2 either side of 2.0.
#
# The reruns centre on 2.0, not on the deterministic 1.95. Nine answers sit at 1, where the wobble down
# (chance 0.15) is clipped away, so on average each gains 0.15. Only one sits at 5, where the wobble up
# is lost. So this noise is not **unbiased**. Noise is unbiased when its average is zero, so that the
# mean over many reruns lands on the score without noise. This noise pushes the mean up, by about
# (9 − 1) × 0.15 / 20 = 0.06 in expectation.
#
# **Verbosity bias.** The mock judge has the *opposite* bias to the one real judges are known for:
# padding a correct answer lowers its F1, so it loses points.

# %%
# NBVAL_CHECK_OUTPUT
plain = "Mars is the red planet."
padded = "Mars is the red planet, as anyone who has looked at the night sky will know."
print(ec.mock_judge("q", plain, REF))
print(ec.mock_judge("q", padded, REF))

# %%
assert ec.mock_judge("q", plain, REF)[0] == 5 and ec.mock_judge("q", padded, REF)[0] == 2, \
    f"expected 5 plain and 2 padded, got {ec.mock_judge('q', plain, REF)[0]} and {ec.mock_judge('q', padded, REF)[0]}"

# %% [markdown]
# A real judge might well score the padded answer *higher*. A test suite for an HTTP judge (lesson 09)
# should probe exactly these things: the same answer padded, the same pair in swapped order, the same
# call repeated.
#
# **How sure are we?**
# - The wobble's noise comes on top of the interval of section 2 (1.5 to 2.45). That interval held the
#   judge fixed and varied the questions. Here the questions are fixed and the judge varies.
# - The two sources of spread add as variances (squared standard deviations), not as widths. For one
#   eval's mean, the choice of questions dominates here. The interval of section 2, 1.5 to 2.45, implies
#   a standard deviation of about 0.24 from the questions. The judge's wobble (standard deviation about
#   0.1) widens the interval only a little.
# - Comparing two checkpoints on the same questions is different. Part of the question-to-question
#   spread cancels in the paired difference (how much depends on how alike the two checkpoints' scores
#   are), but the judge's run-to-run noise does not cancel at all. Such a comparison needs repeated runs
#   or many more examples, and an interval that accounts for both sources.
# - The wobble is an assumed noise model (one point on 30% of answers), not one measured on a real judge.
#
# *Sources:* FastChat's judging in both orders is `play_a_match_pair` in `fastchat/llm_judge/common.py`.
# DeepEval issue #1265, on run-to-run variance, is titled "testcase score fluctuate significantly".

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.mock_judge` gives 5 for an exact match after `normalise_em`, then 4 / 3 / 2 / 1 for token F1 in
#   `[0.8, 1]`, `[0.5, 0.8)`, `[0.2, 0.5)`, `[0, 0.2)`. A value exactly on a boundary goes up, and every
#   score comes with a one-line rationale.
# - On the shipped TinyGPT, `judge_eval` gives **1.95**, with a 95% bootstrap interval over the 20
#   answers of 1.5 to 2.45 (`result.extras["ci95"]`). There is one 5 and no 4s, and 1 is the most common
#   score (9 of 20).
# - The mock judge is a function of EM and the F1 bucket (asserted). Its only "disagreement" with EM is
#   partial credit (10 of 19 non-matches). That credit follows overlap, not correctness: the right answer
#   `Paris` scores 2, while a garbled Sun sentence that never says "star" scores 3.
# - Any function `(instruction, prediction, reference) -> (score, rationale)` can be passed as
#   `judge_fn`. A strict and a lenient judge moved the value of the same answers from 1.20 to 2.35, so
#   the judge is part of the eval's definition and belongs in its report.
# - A malformed verdict (a 7, a bare number) raises `ValueError` naming the example. It is never
#   averaged in.
# - A real judge is asked to read meaning and can be given a rubric; how well it does is measured, not
#   assumed. It costs money, latency, run-to-run variance, position/verbosity/self-preference bias and
#   parsing failures. Lesson 09 plugs one in over HTTP.
#
# **What it did not**
#
# - It did not pin down the shipped model's judge score beyond these 20 questions to better than about
#   ±0.5.
# - It did not show how a real judge would score these answers. The wobble simulation assumes a noise
#   model (one point on 30% of answers) rather than measuring one.
# - The strict and lenient judges' spread (1.20 to 2.35) is not a sampling effect: they re-score the
#   same answers, so it is a difference of definition.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell. Its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: Repair the lenient judge
#
# Write `repaired_lenient_judge`, with the signature of `lenient_judge`. It gives 5 only if every token
# of the answer appears in the reference **and** the answer contains a word that is not a function word.
# (Function words, lesson 03, are words such as "the" or "is" that carry no content.)
# Otherwise it returns the mock judge's verdict. `The` must no longer earn full marks; `Paris` still must.
#
# *Hint:* keep a small set such as `{"the", "a", "an", "is", "of"}`. Before awarding 5, check that
# `set(ec.normalise_em(prediction).split()) - STOP` is non-empty.

# %%
# Exercise 1: define `repaired_lenient_judge(instruction, prediction, reference)`, returning (score,
#   rationale).
### BEGIN SOLUTION
STOP = {"the", "a", "an", "is", "of"}

def repaired_lenient_judge(instruction, prediction, reference):
    overlap, n_pred, _ = ec.f1_counts(prediction, reference)
    content = set(ec.normalise_em(prediction).split()) - STOP
    if n_pred > 0 and overlap == n_pred and content:
        return 5, "every token of the answer appears in the reference, and one of them carries meaning"
    return ec.mock_judge(instruction, prediction, reference)

print(repaired_lenient_judge("q", "The", "The Pacific Ocean is the largest."))
print(repaired_lenient_judge("q", "Paris", "Paris is the capital of France."))
### END SOLUTION
assert repaired_lenient_judge("q", "The", "The Pacific Ocean is the largest.") == ec.mock_judge("q", "The", "The Pacific Ocean is the largest."), \
    f"expected the mock judge's verdict for the bare 'The'; got {repaired_lenient_judge('q', 'The', 'The Pacific Ocean is the largest.')!r}"
assert repaired_lenient_judge("q", "Paris", "Paris is the capital of France.")[0] == 5, \
    f"expected full marks for 'Paris'; got {repaired_lenient_judge('q', 'Paris', 'Paris is the capital of France.')!r}"
assert all(isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], str)
           for v in (repaired_lenient_judge(r["instruction"], r["prediction"], r["reference"]) for r in result.per_example)), \
    f"expected (score, rationale) tuples; got {repaired_lenient_judge('q', 'Paris', 'Paris is the capital of France.')!r}"
assert [repaired_lenient_judge(r["instruction"], r["prediction"], r["reference"])[0] for r in result.per_example] \
    == [r["score"] for r in runs["lenient"].per_example], \
    "expected the lenient judge's scores on the shipped model's 20 answers, which all contain a content word"
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: Judge the under-trained checkpoint
#
# Run `ec.judge_eval` with the default judge on the under-trained checkpoint of lessons 01 and 03,
# `ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH)`, and store
# the result in `early_result`. Redraw the crosstab of judge score against exact match for its answers,
# with every score from 1 to 5 as a row. Store in `empty_rows` the sorted list of scores that no answer
# received.
#
# *Hint:* the early model has EM 0.0, so expect no 5s. Use `.reindex(index=range(1, 6), fill_value=0)`.

# %%
# Exercise 2: store the early checkpoint's judge_eval result in `early_result`, and the sorted list
#   of scores no answer got in `empty_rows`.
### BEGIN SOLUTION
early = ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH)
early_result = ec.judge_eval(early, tok, fx["judge"])
early_df = pd.DataFrame(early_result.per_example)
early_df["em"] = [ec.exact_match(p, r) for p, r in zip(early_df.prediction, early_df.reference)]
early_by_em = pd.crosstab(early_df.score, early_df.em).reindex(index=range(1, 6), fill_value=0)
print(early_by_em.to_string())
empty_rows = [s for s in early_by_em.index if early_by_em.loc[s].sum() == 0]
print(f"early value {early_result.value:.4g} (shipped {result.value:.4g}); empty rows: {empty_rows}")
### END SOLUTION
assert early_result.name == "judge" and len(early_result.per_example) == len(fx["judge"]), \
    f"expected a judge_eval result over the {len(fx['judge'])} judge pairs; got {early_result!r:.120}"
assert early_result.value < result.value, \
    f"expected the early checkpoint to score below the shipped model's {result.value:.4g}; got {early_result.value!r}"
assert empty_rows == sorted(set(range(1, 6)) - {r["score"] for r in early_result.per_example}), \
    f"expected the scores from 1 to 5 that none of the early model's answers received; got {empty_rows!r}"
print("Exercise 2: check passed.")

# %% [markdown]
# ### Exercise 3: Move the thresholds
#
# Write `shifted_judge`, with the mock judge's signature and rules but the boundaries 0.7 / 0.4 / 0.1
# instead of 0.8 / 0.5 / 0.2. An exact match still scores 5, and a value exactly on a boundary still
# goes up. Re-score the shipped model's 20 answers (`df.prediction`, `df.reference`; no need to generate
# them again), and store the mean score in `shifted_value`. How far does it move from the mock judge's
# `result.value`?
#
# *Hint:* call `ec.exact_match` and `ec.token_f1` inside your judge. `np.searchsorted` or a chain of
# `if`s both work.

# %%
# Exercise 3: define `shifted_judge(instruction, prediction, reference)` and store its mean score on
#   the shipped model's answers in `shifted_value`.
### BEGIN SOLUTION
def shifted_judge(instruction, prediction, reference):
    if ec.exact_match(prediction, reference):
        return 5, "matches the reference after normalisation"
    f = ec.token_f1(prediction, reference)
    score = 1 + int(np.searchsorted([0.1, 0.4, 0.7], f, side="right"))
    return score, f"token F1 {f:.2f} under thresholds 0.1 / 0.4 / 0.7"

shifted_value = float(np.mean([shifted_judge("q", p, r)[0] for p, r in zip(df.prediction, df.reference)]))
print(f"shifted thresholds: {shifted_value:.4g} vs mock judge: {result.value:.4g}")
### END SOLUTION
assert [shifted_judge("q", p, r)[0] for p, r in [
    ("mars is the red planet", REF),  # exact match
    ("one two three four five six seven x y z", "one two three four five six seven eight nine ten"),  # F1 exactly 0.7
    ("one two three four five six x y z w", "one two three four five six seven eight nine ten"),  # F1 0.6
    ("Mars is a hot world.", REF),  # F1 exactly 0.4
    ("Mars is a very hot world.", REF),  # F1 0.36
    ("one a b c d e f g h i", "one two three four five six seven eight nine ten"),  # F1 exactly 0.1
    ("a b c d e f g h i j", "one two three four five six seven eight nine ten"),  # F1 0
]] == [5, 4, 3, 3, 2, 2, 1], "expected 5 for an exact match, then 4 / 3 / 2 / 1 at F1 0.7 / 0.4 / 0.1, a value on a boundary going up"
assert abs(shifted_value - np.mean([shifted_judge("q", p, r)[0] for p, r in zip(df.prediction, df.reference)])) < 1e-9, \
    f"expected the mean of shifted_judge's scores over the 20 answers in df; got {shifted_value!r}"
assert shifted_value >= result.value, f"expected lower thresholds not to lower the mean {result.value:.4g}; got {shifted_value!r}"
print("Exercise 3: check passed.")

# %% [markdown]
# ### Exercise 4: Parse a judge's reply
#
# A real judge answers in text, e.g. `"Reasoning: the answer names the right planet. Score: 4"`. Write
# `parse_reply(text)` that returns `(score, rationale)`. The score is an `int` from 1 to 5, and the
# rationale is the text before `Score:`. Return `None` when the reply holds no such score. Then write
# `canned_judge`, a `judge_fn` that ignores its arguments and returns `parse_reply` of the reply above.
# What should happen to `"Score: four"`?
#
# *Hint:* `re.search(r"Score:\s*([1-5])\b", text)`.

# %%
# Exercise 4: define `parse_reply(text)`, returning (score, rationale) or None, and
#   `canned_judge(instruction, prediction, reference)`.
### BEGIN SOLUTION
import re

def parse_reply(text):
    found = re.search(r"Score:\s*([1-5])\b", text)
    if found is None:
        return None
    return int(found.group(1)), text[: found.start()].strip()

def canned_judge(instruction, prediction, reference):
    return parse_reply("Reasoning: the answer names the right planet. Score: 4")

print(parse_reply("Reasoning: fine. Score: 4"), parse_reply("Score: four"), parse_reply("Score: 7"))
### END SOLUTION
assert parse_reply("Reasoning: fine. Score: 4") == (4, "Reasoning: fine."), \
    f"expected the score as an int and the text before 'Score:'; got {parse_reply('Reasoning: fine. Score: 4')!r}"
assert parse_reply("Reasoning: close.\nScore: 2\n") == (2, "Reasoning: close."), \
    f"expected a score on its own line to parse too; got {parse_reply('Reasoning: close.' + chr(10) + 'Score: 2')!r}"
assert parse_reply("Score: four") is None and parse_reply("Reasoning: great. Score: 7") is None, \
    "expected None for a reply with no score from 1 to 5 in digits"
assert ec.judge_eval(model, tok, fx["judge"][:3], judge_fn=canned_judge).value == 4, \
    "expected judge_eval with canned_judge to score every example 4, the score in the canned reply"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# `"Score: four"` holds no score in digits, so `parse_reply` returns `None`. A judge that passed that on
# would make `judge_eval` raise `ValueError` naming the example. That is the honest outcome: a reply that
# cannot be read is not silently counted as a 1, a 0 or a 3. Turning it into a number would be one of
# the framework choices listed in section 6, and the report would have to say so. Lesson 09 meets the
# same choice with a judge over HTTP.
