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
# # 05 · Aggregation and the report
#
# Four lessons gave us four evals, each on its own scale. Perplexity runs from 1 upwards, and lower is
# better. Exact match and token F1 sit in [0, 1]. The judge gives 1 to 5. A dashboard, a model card
# or a CI gate (an automatic check that fails a change whose score drops) wants **one** number, an
# **aggregate** that combines the four. Ours is a weighted mean. Each eval is first mapped onto [0, 1]
# (section 2). The default weights are 0.2 for perplexity, 0.3 for exact match, 0.3 for token F1 and
# 0.2 for the judge (section 4).
#
# **What you will learn**
#
# - `ec.normalise_metric`: one 0-1, higher-is-better scale for every eval, with clipping rules for
#   impossible values (perplexity below 1, NaN);
# - paired differences with 95% intervals, per eval and on the aggregate: is the shipped checkpoint
#   really better than an early one?
# - McNemar's test and Newcombe's interval for 0/1 scores, where the bootstrap is too sure;
# - why the aggregate's interval resamples the **facts** the four evals share;
# - the three layers of a `FinalReport`: aggregate, per eval, per example;
# - why the weights are a product decision, and when they can change a ranking;
# - how `ec.aggregate` renormalises the weights when only some evals ran, and which mistakes it
#   refuses;
# - the strict JSON written for CI: stable keys, and no `NaN` anywhere.
#
# **Time needed:** about 90 minutes.
#
# **Builds on:** lessons 01-04 (perplexity, exact match, token F1, the mock judge). We only *run*
# those evals here.

# %%
import json
import math
import tempfile
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
FOUR = ["perplexity", "exact_match", "token_f1", "judge"]  # the four evals of lessons 01-04

# %% [markdown]
# ## 1. Two models, four numbers each
#
# The shipped checkpoint beats an early one on every eval and on the aggregate. By how much is known
# only roughly.
#
# We compare two checkpoints of the same TinyGPT. The **shipped** one (`ec.load_pretrained()`) trained
# for 600 steps on windows of its full 256-token context. The **early** one (`ec.EARLY_CHECKPOINT_PATH`)
# stopped after 100. Neither trains here: loading takes a moment, and the four evals take a few seconds.

# %%
tok = ec.InstructionTokenizer()
fx = ec.load_fixtures()
models = {"shipped": ec.load_pretrained(), "early": ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH)}
steps = (ec.CHECKPOINT_STEPS, ec.EARLY_CHECKPOINT_STEPS)
assert steps == (600, 100), f"expected (600, 100) training steps, got {steps}"  # the steps quoted above

# ec.core_evals: the four evals of lessons 01-04 on one model, as a list of EvalResults
results = {name: ec.core_evals(m, tok, fx) for name, m in models.items()}
value = {name: {r.name: r.value for r in rs} for name, rs in results.items()}


# %% [markdown]
# Here are the raw values, each in its own unit, with the 95% interval every eval stores in
# `extras["ci95"]`. Exact match uses the Wilson interval (lesson 02), the others a percentile
# bootstrap over the 20 examples (lesson 01). Below are each model's first three exact-match answers:

# %%
# NBVAL_CHECK_OUTPUT
def with_ci(r):
    lo, hi = r.extras["ci95"]
    return f"{r.value:.4g} [{lo:.4g}, {hi:.4g}]"


raw = pd.DataFrame({name: {r.name: with_ci(r) for r in rs} for name, rs in results.items()})
print(raw.to_string())
em_records = {name: rs[1].per_example for name, rs in results.items()}  # rs[1]: exact match
answers = pd.DataFrame({"question": [e["instruction"] for e in em_records["shipped"][:3]],
                        **{name: [e["prediction"] for e in recs[:3]] for name, recs in em_records.items()}})
print(answers.to_string())

# %% [markdown]
# The shipped model is ahead on all four rows. Its perplexity is half the early model's (7.134
# against 14.73; lower is better). It has six exact matches of 20 (EM 0.3) to none, and higher token
# F1 and judge scores. The early model's answers are mostly babble. With 20 questions per eval, each
# value is coarse: one answer moves exact match by 0.05, and the shipped model's interval on it runs
# from 0.1455 to 0.519.
#
# Separate intervals are the wrong tool for comparing two models, though. Both answered the *same*
# questions, and a question that is hard for one tends to be hard for the other. So we compare them
# question by question, as a paired difference (lesson 01). `ec.paired_difference(early, shipped)`
# gives the difference shipped − early with a paired 95% interval: for perplexity, the difference of
# the two corpus perplexities; otherwise, the mean per-question difference. Its `ci_method` names how
# the interval was made:
#
# - token F1 and the judge: a paired percentile bootstrap over the questions;
# - perplexity: the difference recomputed on each resample of the texts;
# - exact match, a 0/1 score: the two tools below.

# %% [markdown]
# **0/1 scores.** The change **broke** some questions (right before, wrong after) and **rescued**
# others (wrong before, right after). All the evidence is in those few changed questions, and
# `paired_difference` counts both.
#
# - **McNemar's exact test** treats each changed question as a fair coin toss, as it would be with no
#   real change. Its **p-value** is how often such coins give a split at least this one-sided, either
#   way. A small p says the split would be rare if nothing had changed. It is not the chance that
#   nothing changed.
# - **Newcombe's paired score interval** is a 95% interval for a difference of two proportions on
#   the same examples. It combines Wilson intervals for the two rates, corrected for the correlation
#   of the pairs. ("Score" comes from Wilson's score interval, lesson 02, not from the eval's scores.)
#
# An interval's **coverage** is how often intervals built by its method would contain the true value
# if the study were repeated on many new samples. A 95% interval should cover it 95% of the time.
# Newcombe's method has been checked this way on small paired samples, and it covers close to 95%.
# The percentile bootstrap is known to cover less there.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Paired comparison: ec.paired_difference(early, shipped) per eval, and the questions the early model wins; defines: by_name, paired, early_higher
by_name = {name: {r.name: r for r in rs} for name, rs in results.items()}
paired = {n: ec.paired_difference(by_name["early"][n], by_name["shipped"][n]) for n in FOUR}
early_higher = {n: sum(a["score"] > b["score"] for a, b in zip(by_name["early"][n].per_example,
                                                              by_name["shipped"][n].per_example))
                for n in FOUR[1:]}  # questions where the early model scores higher
for n, d in paired.items():
    line = f"{n:<12} shipped - early {d['diff']:+.4g}  95% CI [{d['ci95'][0]:+.4g}, {d['ci95'][1]:+.4g}]"
    if "broke" in d:
        line += f"  broke {d['broke']}, rescued {d['rescued']}, McNemar p {d['p_mcnemar']:.4g}"
    print(line + f"\n{'':<12} ({d['ci_method']})")
print("questions where the early model scores higher:", early_higher)

# %% [markdown]
# Every interval lies entirely on the shipped model's side of zero. Its perplexity is lower, by 4.97
# to 8.54 on resamples of the texts. Its exact match, F1 and judge scores are higher. The early model
# scores higher on no question of the three answer-based evals.
#
# On exact match the shipped model rescued six questions and broke none. Six fair coins all land the
# same way, one way or the other, with probability 2 × (1/2)^6 = 2/64. That is McNemar's p of
# 0.03125. The **sign test**, which counts the pairs that moved up and those that moved down, gives
# the same p: on 0/1 scores it is the same test.
#
# Why not bootstrap exact match too? Here is what a percentile bootstrap of the same 20 paired
# differences says:

# %%
# NBVAL_CHECK_OUTPUT
em_diffs = [b["score"] - a["score"] for a, b in zip(by_name["early"]["exact_match"].per_example,
                                                    by_name["shipped"]["exact_match"].per_example)]
em_boot = ec.bootstrap_ci(em_diffs)  # the percentile bootstrap on 0/1 differences: too sure
print(f"exact match, shipped - early: percentile bootstrap [{em_boot[0]:+.4g}, {em_boot[1]:+.4g}], "
      f"Newcombe [{paired['exact_match']['ci95'][0]:+.4g}, {paired['exact_match']['ci95'][1]:+.4g}]")

# %% [markdown]
# The bootstrap is too sure: its 95% interval starts at +0.1. Newcombe's interval reaches down to
# +0.077, closer to zero. Like McNemar's p of 0.031, it puts the gain clear of 0 at the 5% level (the
# usual bar: p below 0.05, or a 95% interval that excludes 0), but not by much. So
# `paired_difference` picks Newcombe for 0/1 scores by itself and says so in `ci_method`.
#
# **How sure are we?**
#
# - All the evidence is the six questions that changed, and all six are rescues. With no real
#   change, six coins would split 6-0 one way or the other once in 32 tries: McNemar's p of 0.031.
#   That is rare enough to pass the usual 5% bar, but only just, and it rests on six questions.
# - The bootstrap cannot see how thin that is. It resamples the 20 observed differences, and none of
#   them is a loss, so no resample can contain one. It treats "nothing broke here" as "nothing can
#   break". Each resample draws about six rescues, more or fewer by luck. Its lower end is the 2.5th
#   percentile of that count: 2 rescues of 20, or +0.1.

# %% [markdown]
# Now the aggregate. `ec.paired_aggregate_difference` scores both models on the same resample and
# takes the difference of their default-weight aggregates. 2,000 such resamples give its interval.
#
# Its unit of resampling (lesson 01) is the **fact**. The four fixtures ask about the same facts. The
# capital of France is a text to score, an exact-match question and a judged question. The spider's
# legs appear in all four. A model that knows a fact tends to do well on it in every eval, so the
# evals' examples are not independent.
#
# Every fixture example carries a fact id (`fx["facts"]`), which `ec.core_evals` copies into each
# record's `"fact"`. There are 25 units: 24 facts, and text 19 of the perplexity fixture, which
# mentions many facts and is its own unit. Each resample draws 25 units with replacement. Every
# example of a drawn unit counts in every eval, once for each time the unit was drawn.
#
# The cell counts the units by their number of examples, then prints all five paired differences:

# %%
# NBVAL_CHECK_OUTPUT
print("fact ids of the first exact-match questions:", fx["facts"]["em"][:5])
per_fact = pd.Series([f for ids in fx["facts"].values() for f in ids]).value_counts()
print(f"{len(per_fact)} fact ids; examples per fact over the four evals:",
      {n: int(k) for n, k in per_fact.value_counts().sort_index().items()}, "(examples: facts)")
agg_diff = ec.paired_aggregate_difference(results["early"], results["shipped"])
print(f"aggregate, shipped - early: {agg_diff['diff']:.4g}  95% CI [{agg_diff['ci95'][0]:.4g}, {agg_diff['ci95'][1]:.4g}]")
print(agg_diff["ci_method"])
all_diffs = pd.DataFrame({n: {"shipped - early": d["diff"], "95% CI low": d["ci95"][0], "95% CI high": d["ci95"][1]}
                          for n, d in [*paired.items(), ("aggregate", agg_diff)]}).T
print(all_diffs.to_string(float_format=lambda v: f"{v:+.4g}"))

# %% [markdown]
# In the counts, `4: 12` means 12 units have four examples, one in each eval. The printed method calls
# all 25 units facts. Its "other examples" are examples with no fact id, and here there are none.

# %%
fig, axes = plt.subplots(1, 5, figsize=(12, 3))
rows = [(n, paired[n]["diff"], paired[n]["ci95"]) for n in FOUR] + [("aggregate", agg_diff["diff"], agg_diff["ci95"])]
for ax, (n, d, (lo, hi)) in zip(axes, rows):
    ax.errorbar([0], [d], yerr=[[d - lo], [hi - d]], fmt="o", color="tab:green", capsize=6)
    ax.axhline(0, color="gray", linestyle=":")
    ax.set(title=n, xticks=[], xlim=(-1, 1))
    ax.set_ylim(min(lo, 0) - 0.1 * abs(hi - lo), max(hi, 0) + 0.1 * abs(hi - lo))
axes[0].set_ylabel("shipped - early (own unit)")
fig.suptitle("Paired differences with 95% intervals: none crosses 0 (perplexity: lower is better)")
fig.tight_layout()
plt.show()

# %% [markdown]
# So "the shipped model is better" is a finding here, on every eval and on the aggregate. The
# aggregate is 0.2085 higher, with an interval from 0.1228 to 0.2932.
#
# **How sure are we?**
#
# - *How much* better is known only roughly. The exact-match gain could be anywhere from 0.077 to
#   0.52, the judge gain from 0.4 to 1.35 points.
# - Read nothing into the second decimal of any of these differences.
# - Five intervals are read here. Tests read together often need a *correction* (lesson 08): a
#   stricter bar for each, since among many tests some pass by luck. "Better on every eval" needs
#   none: it holds only if each interval clears 0 on its own.
#
# Could a different weighting of the four evals say otherwise? Section 4 asks. First, let's check
# the claims:

# %%
assert value["shipped"]["perplexity"] < value["early"]["perplexity"]  # 7.13 < 14.73: lower is better
assert all(value["shipped"][n] > value["early"][n] for n in ["exact_match", "token_f1", "judge"])
assert value["early"]["exact_match"] == 0.0, f"expected no exact match for the early model, got {value['early']['exact_match']}"
assert paired["perplexity"]["ci95"][1] < 0  # lower perplexity, the whole interval below 0
assert all(paired[n]["ci95"][0] > 0 for n in FOUR[1:])  # the other three: the whole interval above 0
n_right = int(sum(e["score"] for e in by_name["shipped"]["exact_match"].per_example))  # the shipped model's exact matches
split = (paired["exact_match"]["broke"], paired["exact_match"]["rescued"])
assert split == (0, n_right), f"expected none broken and all {n_right} shipped exact matches rescued, got {split}"
p_em = paired["exact_match"]["p_mcnemar"]
assert p_em == ec.mcnemar_exact(0, n_right) == 2 / 2 ** n_right, f"expected the sign test's p, got {p_em}"
assert all(k == 0 for k in early_higher.values()), early_higher  # the early model wins no single question
assert agg_diff["ci95"][0] > 0 and abs(agg_diff["diff"] - (ec.aggregate(results["shipped"]).score
                                                           - ec.aggregate(results["early"]).score)) < 1e-12
assert paired["exact_match"]["ci_method"].startswith("Newcombe"), paired["exact_match"]["ci_method"]
assert paired["exact_match"]["ci95"][0] < em_boot[0], "expected Newcombe's lower end below the bootstrap's"
assert "25 facts drawn jointly" in agg_diff["ci_method"], agg_diff["ci_method"]

# %% [markdown]
# *Sources:* Newcombe's interval is method 10 of Newcombe (1998b, *Statistics in Medicine*
# 17:2635-2650).

# %% [markdown]
# ## 2. One scale for all: `normalise_metric`
#
# **Normalising** maps every eval onto one shared scale, here [0, 1] with higher always better. We
# can't average 7.13 with 0.3 and 1.95. `ec.normalise_metric(name, value)` has one rule per eval:
#
# | eval | rule | why |
# | --- | --- | --- |
# | perplexity | `1 / (1 + ln ppl)` | ppl 1 (certain and right) gives 1; the score falls slowly as ppl grows |
# | exact_match, token_f1 | unchanged | already a fraction in [0, 1] |
# | judge | `score / 5` | maps 1-5 onto 0.2-1.0 |
#
# It also has **clipping rules** for values that no working model should produce:
#
# - A perplexity below 1 would need probabilities above 1, so it is clipped to ppl 1 (a score of 1.0).
# - A NaN scores 0, so a broken eval ranks at the bottom instead of disappearing from the average.
# - An infinite or non-positive perplexity also scores 0.
#
# Let's probe each rule:

# %%
# NBVAL_CHECK_OUTPUT
shipped_values = value["shipped"]  # the shipped model's own values are among the probes
probes = [("perplexity", 1.0), ("perplexity", math.e), ("perplexity", shipped_values["perplexity"]),
          ("perplexity", 259.0), ("perplexity", 0.5), ("perplexity", float("nan")), ("perplexity", float("inf")),
          ("exact_match", shipped_values["exact_match"]), ("token_f1", shipped_values["token_f1"]),
          ("judge", 1), ("judge", shipped_values["judge"]), ("judge", 5)]
probe_df = pd.DataFrame([{"eval": n, "value": round(v, 4), "normalised": round(ec.normalise_metric(n, v), 4)}
                         for n, v in probes])
probe_df

# %%
assert ec.normalise_metric("perplexity", math.e) == 0.5        # ln e = 1, so 1 / (1 + 1)
assert ec.normalise_metric("perplexity", 0.5) == 1.0           # ppl < 1 is clipped to 1
assert ec.normalise_metric("perplexity", float("nan")) == 0.0  # NaN scores the worst, not the best
assert ec.normalise_metric("judge", 1) == 0.2                  # the judge's floor is 0.2, not 0

# %% [markdown]
# Two rows are worth a second look.
#
# - **Judge 1 gives 0.2, not 0.** The worst possible answer still collects a fifth of the judge's
#   weight. The judge's part of the aggregate can never drop below 0.2 × its weight.
# - **A perplexity of 259 still scores 0.153.** The vocabulary has 259 tokens, so a model that
#   guesses uniformly at random has perplexity 259. It still earns 15% on this eval.
#
# **How sure are we?** Clipping a perplexity below 1 keeps the aggregate inside [0, 1]. It does not
# make the number trustworthy. In lesson 01, dividing by padded positions made perplexity look too
# good. A value below 1 is a bug to investigate, and here it would earn full marks.
#
# Now the curve, on a logarithmic x axis, with our two models marked:

# %%
grid = np.logspace(0, 3, 300)  # perplexity 1 ... 1000
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(grid, [ec.normalise_metric("perplexity", float(p)) for p in grid], label="1 / (1 + ln ppl)")
for name, colour in [("shipped", "tab:green"), ("early", "tab:orange")]:
    p = value[name]["perplexity"]
    ax.scatter([p], [ec.normalise_metric("perplexity", p)], s=70, color=colour, zorder=3,
               label=f"{name}: ppl {p:.2f} -> {ec.normalise_metric('perplexity', p):.3f}")
ax.axvline(tok.vocab_size, color="gray", linestyle=":", label=f"uniform guess (ppl {tok.vocab_size})")
ax.set(xscale="log", ylim=(0, 1.05), xlabel="perplexity (log scale)", ylabel="normalised score",
       title="normalise_metric for perplexity: steep near 1, nearly flat beyond 100")
ax.legend()
plt.show()

# %% [markdown]
# The curve itself acts as a kind of weight: a large gain in perplexity counts for little in the
# aggregate. It is steep between 1 and 10 and nearly flat after 100. Halving the perplexity, from
# 14.73 (early) to 7.13 (shipped), moves the normalised score by only about 0.07 (from 0.271 to
# 0.337).

# %% [markdown]
# ## 3. The report and its three layers
#
# `ec.aggregate(results)` returns a `FinalReport`. Its three layers run from the most summarised to
# the most detailed:
#
# 1. **the aggregate**: `report.score`, one number in [0, 1], with its 95% interval `report.ci95`;
# 2. **per eval**: `report.table()`, `report.normalised()` and `report.weights` (renormalised to sum
#    to 1, section 5);
# 3. **per example**: `report.to_frame()`, one row for each example of each eval.
#
# We start at the top, with the shipped model's report under the default weights.

# %%
# NBVAL_CHECK_OUTPUT
report = ec.aggregate(results["shipped"], meta={"model": "shipped", "steps": ec.CHECKPOINT_STEPS})
print(f"aggregate: {report.score:.4g}  95% CI [{report.ci95[0]:.4g}, {report.ci95[1]:.4g}]")
print({n: round(w, 4) for n, w in report.weights.items()})

# %%
assert abs(sum(report.weights.values()) - 1) < 1e-12
assert abs(report.score - 0.3248) < 5e-4  # the shipped checkpoint's aggregate, default weights
assert report.ci95[0] < report.score < report.ci95[1]

# %% [markdown]
# The interval resamples facts, as in section 1. That makes it about 17% wider than resampling each
# eval on its own. To see this, strip the fact ids, as if the four fixtures asked about unrelated
# things:

# %%
# NBVAL_CHECK_OUTPUT
def without_facts(rs):
    # The results with every record's "fact" removed: each eval is then resampled on its own.
    return [replace(r, per_example=[{k: v for k, v in e.items() if k != "fact"} for e in r.per_example])
            for r in rs]


independent = ec.aggregate(without_facts(results["shipped"]))
widths = {"facts drawn jointly": report.ci95, "each eval on its own": independent.ci95}
for what, (lo, hi) in widths.items():
    print(f"{what:<20} [{lo:.4g}, {hi:.4g}]  width {hi - lo:.4g}")
widening = (report.ci95[1] - report.ci95[0]) / (independent.ci95[1] - independent.ci95[0])
print(f"resampling facts widens the interval by {widening - 1:.0%}")

# %%
assert independent.score == report.score  # the same number; only its interval changes
assert 1.1 < widening < 1.3, f"expected the joint interval 10-30% wider, got {widening:.3g}"
assert "25 facts drawn jointly" in report.ci_method and "no fact ids" in independent.ci_method

# %% [markdown]
# Same aggregate, wider interval: 0.2370 to 0.4131 instead of 0.2508 to 0.4010. The independent
# interval is too narrow. Resampled on its own, each eval's luck averages out against the others'.
# But a fact the model happens to know lifts all four evals at once. Drawing it twice, or not at all,
# moves them together. The JSON report names how its interval was made (`aggregate_ci_method`,
# section 6).
#
# **How sure are we?**
#
# - The 25 units are 24 facts and text 19, which mentions many facts at once (section 1).
# - Facts are still not independent draws from the questions a user would ask. They were all chosen
#   by one author, from what TinyGPT was trained on.

# %% [markdown]
# One layer down, `report.table()` is the text view that `make demo` (see the README) prints. It
# gives the aggregate with its 95% interval, one row per eval with a "95% CI" in the eval's own unit
# (section 1's `extras["ci95"]`), and each eval's worst examples. Its `n` counts the examples scored.
# For the judge, which may leave some unscored, it reads scored/asked (`20/20`):

# %%
print(report.table(worst=2))

# %% [markdown]
# The same layer as a DataFrame. Each eval **contributes** its normalised value times its weight,
# and the aggregate is the sum of those contributions:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Per-eval layer: each eval contributes normalised value times weight, and the contributions sum to the aggregate; defines: norm, layers
norm = report.normalised()
layers = pd.DataFrame({"value": value["shipped"], "normalised": norm, "weight": report.weights})
layers["contribution"] = layers["normalised"] * layers["weight"]
layers.round(4)

# %%
assert abs(layers["contribution"].sum() - report.score) < 1e-12  # the aggregate is just this sum
assert layers["contribution"].idxmin() == "perplexity"  # weight 0.2 and a flat curve: the least

# %% [markdown]
# The bottom layer, `report.to_frame()`, has one row per example of all four evals. Each row's own
# score passes through `normalise_metric` too:

# %%
frame = report.to_frame()
print(frame.shape)
frame.loc[frame["eval"] == "judge", ["index", "prediction", "reference", "score", "normalised"]].head(8)

# %% [markdown]
# Does the mean of the per-example normalised scores give back each eval's normalised value? For
# three evals it does, because their rule is linear (`x` or `x / 5`). Perplexity is the exception.
# Its value is a **corpus** perplexity (sum every token's loss, divide once, as in lesson 01), and
# `1 / (1 + ln ppl)` is curved. So averaging the normalised per-text perplexities gives a different
# number:

# %%
# NBVAL_CHECK_OUTPUT
per_eval = frame.groupby("eval", sort=False)["normalised"].mean().to_frame("mean of per-example")
per_eval["normalised eval value"] = pd.Series(norm)
per_eval["difference"] = per_eval.iloc[:, 0] - per_eval.iloc[:, 1]
per_eval.round(4) + 0.0  # + 0.0 turns a rounded -0.0 into 0.0

# %%
assert all(abs(per_eval.loc[n, "difference"]) < 1e-12 for n in ["exact_match", "token_f1", "judge"])
assert abs(per_eval.loc["perplexity", "difference"]) > 1e-3  # per-text average != corpus value

# %% [markdown]
# Averaging per text would give the shipped model 0.327 on perplexity instead of 0.337. Two steps
# lead from the eval's value to the per-example average, and they pull in opposite directions:
#
# 1. give every text the same weight, instead of its share of the tokens;
# 2. average the normalised values, instead of normalising the average.
#
# The table's first row is the eval's value. The ln of the corpus perplexity is the token-weighted
# mean of the per-text ln ppl, so `1 / (1 + that mean)` is its normalised value. The next rows apply
# step 1, then step 2:

# %%
# NBVAL_CHECK_OUTPUT
ppl_rows = frame[frame["eval"] == "perplexity"]
log_ppl, share = np.log(ppl_rows["score"]), ppl_rows["n_tokens"] / ppl_rows["n_tokens"].sum()
two_steps = pd.Series({"the eval's value: 1 / (1 + mean ln ppl), weighted by tokens": 1 / (1 + (share * log_ppl).sum()),
                       "after step 1: 1 / (1 + mean ln ppl), every text weighted the same": 1 / (1 + log_ppl.mean()),
                       "after step 2: mean of 1 / (1 + ln ppl), the per-example average": (1 / (1 + log_ppl)).mean()})
print(two_steps.round(4).to_string())
assert abs(two_steps.iloc[0] - norm["perplexity"]) < 1e-9
assert abs(two_steps.iloc[2] - per_eval.loc["perplexity", "mean of per-example"]) < 1e-9
assert two_steps.iloc[1] < two_steps.iloc[0] and two_steps.iloc[2] > two_steps.iloc[1]  # down, then up

# %% [markdown]
# The aggregate uses the corpus value. Use the per-example layer to find *which* texts are hard, not
# to re-derive the eval.
#
# - **The first step lowers the score**, from 0.3373 to 0.3178. The corpus value weights each text
#   by its tokens. So text 19, the 748-byte text and one of the easiest, counts for 42% of it. (It
#   has 747 scored tokens: a text's first token is never a target, lesson 01.) With equal weights,
#   short hard texts such as "Owls hoot." count as much as it does.
# - **The second step raises it again**, to 0.3271. `1 / (1 + x)` is convex in `x = ln ppl`: its
#   curve bends upwards, like a bowl. On a convex curve the average of the values is never below the
#   value at the average (Jensen's inequality).
#
# Here the first step wins. On other data the second can.

# %% [markdown]
# `ec.plot_report` draws the top two layers and the spread of the bottom one. On the left are the
# per-eval normalised values, with the aggregate dashed. Each bar's label gives the eval's raw value
# and raw interval. On the right is every example's normalised score:

# %%
fig = ec.plot_report(report)
fig.suptitle("Shipped checkpoint: per-eval scores and per-example spread")
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 4. Weights are a product decision
#
# For these two models the weights decide the margin, not the winner. Here are both models under the
# default weights:

# %%
# NBVAL_CHECK_OUTPUT
reports = {name: ec.aggregate(rs) for name, rs in results.items()}
both = pd.DataFrame({name: rep.normalised() for name, rep in reports.items()})
both.loc["AGGREGATE"] = [rep.score for rep in reports.values()]
both.round(4)

# %%
assert reports["shipped"].score > reports["early"].score  # 0.325 vs 0.116 under default weights
evals = both.drop("AGGREGATE")
assert (evals["shipped"] > evals["early"]).all()  # ahead on every eval, perplexity included

# %%
ax = both.drop("AGGREGATE").plot.bar(figsize=(8, 4), rot=0, color=["tab:green", "tab:orange"])
for name, colour in [("shipped", "tab:green"), ("early", "tab:orange")]:
    ax.axhline(reports[name].score, color=colour, linestyle="--", label=f"{name} aggregate")
ax.set(ylim=(0, 1), xlabel="eval", ylabel="normalised score (higher is better)",
       title="The shipped model is ahead on every eval")
ax.legend()
plt.show()

# %% [markdown]
# The default weights (`perplexity` 0.2, `exact_match` 0.3, `token_f1` 0.3, `judge` 0.2) say that
# answering questions matters most. A team building a text-completion model might care mostly about
# perplexity. Would that change the verdict? Let's **sweep the perplexity weight** `w` from 0 to 1,
# with the other three evals sharing `1 - w` in their default proportions.

# %% tags=["live"]
# Weight sweep: weights_with(name, w) gives eval `name` weight w, the other three share 1 - w; defines: base, weights_with, ws, sweep
base = {n: ec.DEFAULT_WEIGHTS[n] for n in FOUR}  # the four evals by name: the dict may grow later


def weights_with(name, w):
    # Eval `name` gets w; the other three share 1 - w in their default proportions.
    rest = sum(base[n] for n in FOUR if n != name)
    return {n: w if n == name else (1 - w) * base[n] / rest for n in FOUR}


ws = np.linspace(0, 1, 101)
sweep = pd.DataFrame({name: [ec.aggregate(rs, weights=weights_with("perplexity", float(w))).score for w in ws]
                      for name, rs in results.items()}, index=ws)

# %%
# NBVAL_CHECK_OUTPUT
sweep.iloc[::20].round(4).rename_axis("perplexity weight")

# %% [markdown]
# The shipped model stays ahead at every `w`. Its margin shrinks as perplexity gains weight, because
# on the normalised scale the perplexity gap is the smallest of the four (0.337 against 0.271: the
# flat curve of section 2).
# Each aggregate is a weighted sum, so it is a straight line in `w`. So is the gap between the two
# models, and we can solve exactly for where it would reach zero:

# %%
gap = sweep["shipped"] - sweep["early"]
assert np.allclose(gap, gap.iloc[0] + (gap.iloc[-1] - gap.iloc[0]) * ws)  # a straight line in w
assert (gap > 0).all()  # the shipped model ranks first at every perplexity weight
w_zero = gap.iloc[0] / (gap.iloc[0] - gap.iloc[-1])  # where the line would cross zero
assert w_zero > 1  # ... beyond any weight one can choose

# %%
# NBVAL_CHECK_OUTPUT
print(f"gap at w = 0: {gap.iloc[0]:.4g}   at w = 1: {gap.iloc[-1]:.4g}")
print(f"the line would reach zero at w = {w_zero:.4g}, outside [0, 1]")

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for name, colour in [("shipped", "tab:green"), ("early", "tab:orange")]:
    ax.plot(ws, sweep[name], color=colour, label=f"{name} checkpoint")
ax.fill_between(ws, sweep["early"], sweep["shipped"], color="tab:green", alpha=0.1,
                label="the shipped model's margin")
ax.axvline(base["perplexity"], color="gray", linestyle=":", label="default weight (0.2)")
ax.set(xlim=(0, 1), ylim=(0, 0.6), xlabel="weight on perplexity (others scaled to share the rest)",
       ylabel="aggregate score", title="No perplexity weight ranks the early model first")
ax.legend(loc="upper center", ncol=2)
plt.show()

# %% [markdown]
# The margin falls from about 0.24 to about 0.07. The line would only reach zero at a weight of about
# 1.37, which no one can choose.
#
# The reason is general. The shipped model's normalised value is higher on every eval, and a
# weighted average (with no negative weight) of numbers that are each higher is higher. The shipped
# model **dominates** the early one: no weights can reverse that.
#
# Weights can reorder only models that trade off, each ahead on at least one eval. Even then, one
# sweep like ours may not flip them. It flips the ranking only if the gap has opposite signs at its
# two ends. At w = 1 the gap is the swept eval's alone, and at w = 0 the other three's, in their
# default proportions. So the model ahead on the swept eval must be behind on those three together.
# The line's zero, `w = gap(0) / (gap(0) - gap(1))`, then falls inside [0, 1]: the weight at which
# the ranking flips.
#
# The margin still matters, since it is what a CI gate or a dashboard compares. Between models that
# trade off, the weights can decide the winner too. Treat them like any other product decision:
#
# - write them down and version them (they go into the JSON report, as we'll see);
# - compare two aggregates only if they used the same weights;
# - show the per-eval layer next to the aggregate. A single number can't tell you whether one model
#   wins everything or wins some evals and loses others.
#
# **How sure are we?** The sweep's margins are single numbers with no interval. Only the margin at
# the default weights has one (section 1). And these two models do not trade off.

# %% [markdown]
# ## 5. When only some evals ran
#
# The judge is often the slow or expensive eval, and a quick CI job may skip it. `ec.aggregate`
# accepts any subset of the evals. It **renormalises** the weights of the evals present so they sum
# to 1, keeping their ratios. Let's aggregate perplexity and exact match only:

# %%
# NBVAL_CHECK_OUTPUT
shipped = results["shipped"]
partial = ec.aggregate([shipped[0], shipped[1]])  # perplexity and exact_match only
print({n: round(w, 4) for n, w in partial.weights.items()})
print(f"partial aggregate {partial.score:.4g}   vs   four-eval aggregate {report.score:.4g}")

# %%
assert list(partial.weights) == ["perplexity", "exact_match"]
assert abs(sum(partial.weights.values()) - 1) < 1e-12
expected = base["perplexity"] / (base["perplexity"] + base["exact_match"])  # 0.2 / 0.5
assert abs(partial.weights["perplexity"] - expected) < 1e-12


# %% [markdown]
# A partial aggregate answers a **different question** from the four-eval one. Before you compare
# scores, check that `report.weights` has the same keys in both. Here the weights 0.2 and 0.3 became
# 0.4 and 0.6, and the partial aggregate is 0.315 against 0.325 for all four. The two happen to be
# close for this model, but for another they need not be.
#
# Renormalising is convenient, and that is what makes it risky: a dropped eval quietly shifts its
# weight onto the others. So `ec.aggregate` raises a `ValueError` for three mistakes that would
# otherwise change the average without a word. (The messages also list `calibration`, `humaneval`
# and `robustness`: evals that later lessons add.)

# %%
def error_of(call):
    # The ValueError message that call() raises; fails loudly if it raises none.
    try:
        call()
    except ValueError as exc:
        return str(exc)
    raise AssertionError("expected a ValueError, got none")


# %%
typo = {("perplexty" if n == "perplexity" else n): w for n, w in base.items()}  # a typo'd name
no_judge = {n: w for n, w in base.items() if n != "judge"}                       # an eval unweighted
errors = {"typo'd weight name": error_of(lambda: ec.aggregate(shipped, weights=typo)),
          "eval with no weight": error_of(lambda: ec.aggregate(shipped, weights=no_judge)),
          "duplicate result": error_of(lambda: ec.aggregate(shipped + [shipped[1]]))}
for what, message in errors.items():
    print(f"{what:>20}: {message}")

# %%
assert "unknown eval name 'perplexty'" in errors["typo'd weight name"]
assert "no weight given" in errors["eval with no weight"] and "'judge'" in errors["eval with no weight"]
assert "more than once" in errors["duplicate result"] and "exact_match" in errors["duplicate result"]

# %% [markdown]
# Without these checks, each mistake would give a plausible score, wrong and with no warning:
#
# - a typo'd weight name would leave perplexity without a weight;
# - an eval missing from the weights would vanish from the average;
# - a result passed twice would count double.

# %% [markdown]
# ## 6. The JSON written for CI
#
# `report.to_json(path)` writes the whole report for dashboards and CI gates. Its top-level keys
# form a stable schema, and `schema_version` changes if they ever do. It is now 3:
#
# - version 2 added the aggregate's interval (`aggregate_ci95`) and a `ci95` for every eval;
# - version 3 resamples facts for the aggregate's interval, a different interval under the same key.
#   So the file also says how it was made (`aggregate_ci_method`), and each example record carries
#   its `"fact"`.

# %%
out_dir = Path(tempfile.mkdtemp(prefix="lesson05_"))
path = report.to_json(out_dir / "shipped.json")
data = json.loads(path.read_text(encoding="utf-8"))

# %%
# NBVAL_CHECK_OUTPUT
print("top level:", list(data))
print("evals:    ", list(data["evals"]))
print("per eval: ", list(data["evals"]["perplexity"]))
print("schema_version", data["schema_version"], "| aggregate", f"{data['aggregate']:.4g}", "| meta", data["meta"])
print("aggregate_ci95", [round(x, 4) for x in data["aggregate_ci95"]],
      "| exact_match ci95", [round(x, 4) for x in data["evals"]["exact_match"]["ci95"]])
print("aggregate_ci_method:", data["aggregate_ci_method"])

# %%
assert list(data) == ["schema_version", "aggregate", "aggregate_ci95", "aggregate_ci_method", "weights", "evals", "meta"]
assert list(data["evals"]["judge"]) == ["value", "ci95", "normalised", "weight", "n", "extras", "per_example"]
assert data["schema_version"] == ec.SCHEMA_VERSION == 3, f"expected schema version 3, got {data['schema_version']}"
assert [e["fact"] for e in data["evals"]["judge"]["per_example"]] == fx["facts"]["judge"]
assert data["aggregate"] == report.score and data["aggregate_ci95"] == list(report.ci95)
em_json = data["evals"]["exact_match"]
em_right = int(sum(e["score"] for e in em_json["per_example"]))  # exact matches, out of em_json["n"]
assert em_json["ci95"] == list(ec.wilson_interval(em_right, em_json["n"])), em_json["ci95"]
assert data["weights"] == report.weights
assert data["evals"]["judge"]["n"] == len(fx["judge"]), f"expected {len(fx['judge'])} judged, got {data['evals']['judge']['n']}"


# %% [markdown]
# **Strict JSON.** Python's `json.dumps` writes `float("nan")` as a bare `NaN`. The JSON standard has
# no such value. Strict parsers (JavaScript's `JSON.parse`, Go's `encoding/json`, and so many web
# dashboards) reject the whole file. Here is the problem in Python, with a parser told to refuse
# non-standard constants:

# %% tags=["live"]
# Loose JSON: json.dumps writes NaN bare, and a parser that refuses non-standard constants rejects it; defines: refuse_constant
def refuse_constant(token):
    raise ValueError(f"not strict JSON: {token}")


loose = json.dumps({"agreement": float("nan")})
print(loose, "->", error_of(lambda: json.loads(loose, parse_constant=refuse_constant)))


# %% [markdown]
# NaNs do turn up in real extras. Let's record in the judge eval's `extras` how well the judge
# agrees with exact match: the correlation between each answer's judge score and its EM
# verdict. For the early model, EM is 0 on every answer. The correlation of a constant is undefined,
# so the statistic is NaN.

# %%
def with_em_agreement(rs):
    # The four results, with the judge's correlation to exact match added to its extras.
    judge = rs[3]
    em = pd.Series([ec.exact_match(e["prediction"], e["reference"]) for e in judge.per_example])
    corr = em.corr(pd.Series([e["score"] for e in judge.per_example]))
    return rs[:3] + [replace(judge, extras={**judge.extras, "corr_with_em": corr})]


early_report = ec.aggregate(with_em_agreement(results["early"]), meta={"model": "early"})
early_path = early_report.to_json(out_dir / "early.json")

# %%
# NBVAL_CHECK_OUTPUT
strict = json.loads(early_path.read_text(encoding="utf-8"), parse_constant=refuse_constant)
print("in memory:", early_report.results[3].extras["corr_with_em"])
print("in the file:", strict["evals"]["judge"]["extras"]["corr_with_em"])

# %%
assert math.isnan(early_report.results[3].extras["corr_with_em"])  # NaN in memory ...
assert strict["evals"]["judge"]["extras"]["corr_with_em"] is None   # ... null in the strict file
assert "NaN" not in early_path.read_text(encoding="utf-8")


# %% [markdown]
# `to_json` turned the NaN into `null` (as it would an infinity), so the file parsed strictly. A CI
# job can now compare `data["aggregate"]` with a threshold, after checking that `data["weights"]`
# holds the weights it expects.
#
# **How sure are we?**
#
# - A gate's **tolerance** is the drop it lets pass before it fails. The job should also read
#   `data["aggregate_ci95"]`: here it spans 0.2370 to 0.4131. That is how far this one score could
#   move on another draw of facts. So a drop of 0.01 on these fixtures says little about questions
#   beyond them.
# - A drop is worth acting on when a paired comparison of the two models on the same examples, as in
#   section 1, puts its whole interval below 0.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.normalise_metric` puts every eval on 0-1, higher is better. Perplexity below 1 is clipped to
#   1.0, and NaN scores 0. The judge's floor is 0.2, and a uniform guesser still earns 0.15 on
#   perplexity.
# - A `FinalReport` has three layers: the aggregate (`report.score`, with `report.ci95`, here 0.2370
#   to 0.4131), per eval, and per example. The aggregate is exactly the sum of weight × normalised
#   value. Averaging per-text normalised perplexities does **not** give back the corpus value.
# - The four fixtures share 24 facts (and one text about many), so the aggregate's interval resamples
#   **facts** jointly across the evals. That widens it by about 17% (against 0.2508 to 0.4010 for each
#   eval on its own): the independent interval was too narrow.
# - The under-trained checkpoint (100 steps) is behind the shipped one (600 steps) on every eval.
#   Every paired difference's 95% interval excludes 0 (the `all_diffs` table at the end of section
#   1). On the aggregate the gain is +0.2085 (0.1228 to 0.2932, facts resampled). Each gain's size
#   is known only to within its interval.
# - On exact match the gain is +0.3: six rescued, none broken, McNemar p 0.03125, Newcombe's paired
#   score interval 0.077 to 0.519. The percentile bootstrap (here 0.1 to 0.5) is too sure of a 6-0
#   split. So `paired_difference` uses Newcombe's interval for 0/1 scores and names it in `ci_method`.
# - Under the default weights the shipped model wins, 0.325 to 0.116. It dominates, so no perplexity
#   weight changes that: the weights only move the margin (0.24 at perplexity weight 0, 0.07 at
#   weight 1). Weights can flip a ranking only between models that trade off. Either way they are a
#   product decision: version them and show them next to the score.
# - With only some evals present, the weights are renormalised over them. Such a score answers a
#   different question, so compare only reports whose weights have the same keys. A typo'd weight
#   name, an eval with no weight and a duplicate result each raise a `ValueError`.
# - `report.to_json` writes strict JSON: stable top-level keys (`schema_version` 3), a `ci95` for
#   every eval, and `null` for any NaN or infinity.
#
# **What it did not**
#
# - That the shipped model is better on questions unlike these fixtures, or by how much, more
#   precisely than the intervals above.
# - How it would do on facts chosen another way. One author chose the facts from what TinyGPT was
#   trained on. Resampling them says how much the result depends on which of these facts were asked.
# - Any interval on the margin away from the default weights, or how weights behave between models
#   that trade off (these two do not).

# %% [markdown]
# ## Exercises
#
# Each exercise has a code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: Sweep the judge weight instead
#
# Give the judge weight `w`, with the other three evals sharing `1 - w` in their default proportions.
# Store the shipped model's margin (its aggregate minus the early model's) at `w = 0` and `w = 1` in
# `judge_gap_ends`, in that order. Store in `judge_can_flip` whether any judge weight in [0, 1] ranks
# the early model first.
#
# *Hint:* `weights_with` from section 4 takes any eval's name. The gap is still a straight line in
# `w`, so its two ends settle the question. Recall the dominance argument of section 4.

# %%
# Exercise 1: store the margin at judge weight 0 and 1 in `judge_gap_ends`, and whether any judge
#   weight flips the ranking in `judge_can_flip`.
### BEGIN SOLUTION
judge_gap_ends = tuple(ec.aggregate(results["shipped"], weights=weights_with("judge", w)).score
                       - ec.aggregate(results["early"], weights=weights_with("judge", w)).score
                       for w in (0.0, 1.0))
judge_can_flip = min(judge_gap_ends) < 0  # a straight line above 0 at both ends is above 0 between them
print(f"margin at judge weight 0: {judge_gap_ends[0]:.4g}   at 1: {judge_gap_ends[1]:.4g}   can flip: {judge_can_flip}")
### END SOLUTION
assert len(judge_gap_ends) == 2, f"expected two margins, at w = 0 and at w = 1; got {judge_gap_ends!r}"
assert abs(judge_gap_ends[0] - (ec.aggregate(results["shipped"][:3]).score - ec.aggregate(results["early"][:3]).score)) < 1e-9, f"expected the margin at w = 0 to be the margin on the other three evals alone; got {judge_gap_ends[0]!r}"
assert abs(judge_gap_ends[1] - (both.loc["judge", "shipped"] - both.loc["judge", "early"])) < 1e-9, f"expected the margin at w = 1 to be the gap between the normalised judge scores; got {judge_gap_ends[1]!r}"
assert judge_can_flip in (True, False) and not judge_can_flip, f"expected a bool: does some judge weight in [0, 1] put the early model first? got {judge_can_flip!r}"
print("Exercise 1: check passed.")

# %% [markdown] tags=["solution"]
# The margin falls from 0.218 with no judge weight to 0.17 with all of it. It stays positive, so no
# judge weight flips the ranking. This is the dominance argument again: the shipped model is ahead on
# every eval. The margin at `w = 0` is the renormalised aggregate of section 5 over the other three
# evals, and at `w = 1` the gap in `both.loc["judge"]`.

# %% [markdown]
# ### Exercise 2: Move the judge's floor
#
# Suppose the judge were normalised as `(score - 1) / 4`, so a score of 1 gives 0 instead of 0.2.
# Store each model's aggregate under the default weights with this rule in `floor_scores`, a dict
# with the keys `"shipped"` and `"early"`. Store in `margin_grows` whether the shipped model's margin
# is larger than under the usual `score / 5`.
#
# *Hint:* don't edit `evalcore`. Take each report's `normalised()` and `weights` (the `reports` of
# section 4), replace the judge entry, and sum weight × normalised value yourself.

# %%
# Exercise 2: store each model's aggregate with the judge normalised as (score - 1) / 4 in
#   `floor_scores`, and whether the margin grows in `margin_grows`.
### BEGIN SOLUTION
floor_scores = {}
for name, rep in reports.items():
    judge_value = next(r.value for r in rep.results if r.name == "judge")
    floor_normalised = {**rep.normalised(), "judge": (judge_value - 1) / 4}
    floor_scores[name] = sum(rep.weights[n] * floor_normalised[n] for n in rep.weights)
    print(f"{name:<8} judge / 5: {rep.score:.4f}   (judge - 1) / 4: {floor_scores[name]:.4f}")
margin_grows = bool(floor_scores["shipped"] - floor_scores["early"] > reports["shipped"].score - reports["early"].score)
print("margin grows:", margin_grows)
### END SOLUTION
assert set(floor_scores) == {"shipped", "early"}, f"expected a dict with the keys 'shipped' and 'early'; got {floor_scores!r}"
assert all(abs(floor_scores[n] - ec.aggregate(rs[:3] + [replace(rs[3], value=1.25 * (rs[3].value - 1))]).score) < 1e-9 for n, rs in results.items()), f"expected each model's default-weight aggregate with only the judge's rule changed; got {floor_scores!r}"
assert margin_grows == (floor_scores["shipped"] - floor_scores["early"] > reports["shipped"].score - reports["early"].score), f"expected a bool: is shipped minus early larger with the new floor? got {margin_grows!r}"
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# Both aggregates fall, since `(s - 1) / 4` is below `s / 5` for every score under 5. The shipped
# model's falls from 0.325 to 0.294, the early model's from 0.116 to 0.077. The early model falls
# further, because its judge scores are lower and the new rule takes most from low scores. So the
# margin grows, from 0.209 to 0.217. The floor of 0.2 was a gift to weak models. Where the scale
# starts is a design choice of the same kind as the weights.

# %% [markdown]
# ### Exercise 3: A CI gate
#
# Write `gate(old_path, new_path, tolerance=0.01)`. It reads two report JSON files, raises a
# `ValueError` if their `weights` differ, and returns `False` if the new aggregate dropped by more
# than `tolerance`, `True` otherwise.
#
# *Hint:* `path` (shipped) and `early_path` (early) from section 6 make a good pair. The early file
# has a `corr_with_em` extra that the shipped one lacks, but the gate shouldn't care about extras.

# %%
# Exercise 3: define `gate(old_path, new_path, tolerance=0.01)`, which raises ValueError if the
#   weights differ and returns whether the new aggregate held up.
### BEGIN SOLUTION
def gate(old_path, new_path, tolerance=0.01):
    old, new = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (old_path, new_path))
    if old["weights"] != new["weights"]:
        raise ValueError(f"weights differ: {old['weights']} vs {new['weights']}")
    return new["aggregate"] >= old["aggregate"] - tolerance


print("early -> shipped:", gate(early_path, path), "  shipped -> early:", gate(path, early_path))
### END SOLUTION
assert gate(path, path) is True, f"expected True for a report against itself; got {gate(path, path)!r}"
assert gate(early_path, path) is True, f"expected True for early -> shipped, an improvement; got {gate(early_path, path)!r}"
assert gate(path, early_path) is False, f"expected False for shipped -> early, a large drop; got {gate(path, early_path)!r}"
assert gate(path, early_path, tolerance=1.0) is True, f"expected True when the tolerance covers the drop; got {gate(path, early_path, tolerance=1.0)!r}"
assert isinstance(error_of(lambda: gate(path, ec.aggregate(shipped, weights=weights_with("judge", 0.5)).to_json(out_dir / "reweighted.json"))), str), "expected a ValueError when the two reports' weights differ"
print("Exercise 3: check passed.")

# %% [markdown]
# ### Exercise 4: Per-text or corpus?
#
# Section 3 found the mean of the normalised per-text perplexities (0.327) below the normalised corpus
# perplexity (0.337). Which texts pull the two apart? Store in `heaviest` the index of the text with
# the most tokens. Over the other texts only, store the normalised corpus perplexity in
# `corpus_without` and the mean per-text normalised score in `mean_without`. Compare the two pairs.
#
# *Hint:* sort `ppl_rows` (section 3) by `n_tokens` and by `score`. The corpus value weights each
# text by its token count: it is `1 / (1 + x)`, where `x` is the token-weighted mean of `ln ppl`.

# %%
# Exercise 4: store the index of the longest text in `heaviest`, and the normalised corpus
#   perplexity and the mean per-text score of the other texts in `corpus_without` and
#   `mean_without`.
### BEGIN SOLUTION
per_text = ppl_rows.set_index("index")[["n_tokens", "score", "normalised"]]
per_text["share"] = per_text["n_tokens"] / per_text["n_tokens"].sum()
print(per_text.sort_values("n_tokens", ascending=False).head(3).round(4).to_string())
heaviest = per_text["n_tokens"].idxmax()
others = per_text.drop(heaviest)
corpus_without = 1 / (1 + (others["n_tokens"] * np.log(others["score"])).sum() / others["n_tokens"].sum())
mean_without = others["normalised"].mean()
print(f"all texts:        corpus {norm['perplexity']:.4f}   mean of per-text {per_eval.loc['perplexity', 'mean of per-example']:.4f}")
print(f"without text {heaviest}:  corpus {corpus_without:.4f}   mean of per-text {mean_without:.4f}")
### END SOLUTION
assert ppl_rows.set_index("index").loc[heaviest, "n_tokens"] == ppl_rows["n_tokens"].max(), f"expected the index of the text with the most tokens; got {heaviest!r}"
assert abs(corpus_without - ec.normalise_metric("perplexity", ec.perplexity_eval(models["shipped"], tok, [t for i, t in enumerate(fx["lm"]) if i != heaviest]).value)) < 1e-6, f"expected the normalised corpus perplexity of the other texts, each weighted by its tokens; got {corpus_without!r}"
assert abs(len(ppl_rows) * per_eval.loc["perplexity", "mean of per-example"] - ppl_rows.set_index("index").loc[heaviest, "normalised"] - (len(ppl_rows) - 1) * mean_without) < 1e-9, f"expected the plain mean of the other texts' normalised scores; got {mean_without!r}"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# One text does most of the pulling. Text 19 holds 42% of the tokens and is one of the easier ones
# (perplexity 5.8), so it lifts the corpus value well above an equal weighting of the texts. Without
# it, the corpus value drops from 0.337 to 0.321, and the mean of per-text scores only from 0.327 to
# 0.325. The order even reverses. With the texts' token counts closer to equal, the
# convexity step of section 3 (Jensen's inequality) wins. The short, hard texts ("Owls hoot.",
# perplexity 45) move the per-text mean but barely touch the corpus value.
