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
# # 02 · Exact-match normalisation: what each step forgives
#
# **Exact match** (EM) asks one yes-or-no question: is the model's answer *the same string* as the
# reference? "The same" is never literal. Before comparing, we **normalise** both strings: we rewrite
# them into a standard form, so that differences of mere formatting disappear. evalcore's
# `normalise_em` lowercases, strips, collapses whitespace and drops trailing `. ! ?`. Every one of
# those steps is a decision about which differences count as wrong answers and which are only
# formatting.
#
# **What you will learn**
#
# - the four steps of `ec.normalise_em`, built one at a time, and how many EM verdicts each one flips
#   on the model's answers and on a set of hand-written answer variants;
# - how sure an EM score on 20 questions is: the Wilson interval for a proportion;
# - how to read a per-example table of prediction, reference, normalised forms and verdict;
# - why normalisation is a policy choice: the official rules of SQuAD, a widely used
#   reading-comprehension benchmark (`ec.normalise_squad`), against ours
#   on articles, inner punctuation, `"U.S.A."`, Unicode punctuation, full-width letters and the
#   multiple-choice letter `"A"`;
# - how a list of acceptable references is scored: best over the list with `normalise_em`, and the
#   SQuAD v2.0 script's extra step (drop the references that normalise to `""`) with `normalise_squad`.
#
# **Time needed:** about 80 minutes.
#
# **Builds on:** lesson 01 (loading the shipped TinyGPT and the fixtures, and the 95% confidence
# interval). Here we only need the model's answers to the 20 EM questions; nothing is trained.

# %% [markdown]
# ## Setup
#
# We load the shipped checkpoint, the byte tokenizer and the fixtures. Then evalcore generates the
# model's answers to the 20 EM questions and scores them. Besides the score, it reports a 95%
# confidence interval (lesson 01) of a kind made for proportions, the Wilson interval, explained below
# the output.

# %%
import string
import unicodedata

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section

model = ec.load_pretrained()
tok = ec.InstructionTokenizer()
fx = ec.load_fixtures()

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# The evalcore call: em = ec.exact_match_eval(model, tok, fx["em"]); then predictions, references, Wilson interval; defines: em, hi, lo, preds, refs
em = ec.exact_match_eval(model, tok, fx["em"])
preds = [r["prediction"] for r in em.per_example]
refs = [r["reference"] for r in em.per_example]
lo, hi = em.extras["ci95"]  # Wilson 95% interval for 6 right out of 20
print(f"{len(preds)} questions, exact match = {em.value:.4g}, 95% interval [{lo:.4g}, {hi:.4g}] ({em.extras['ci_method']})")

# %%
assert len(preds) == 20, len(preds)
assert abs(em.value - 0.30) < 1e-9, em.value  # the shipped model gets 6 of the 20 questions right
assert em.extras["ci95"] == list(ec.wilson_interval(6, 20)) and 0.14 < lo < 0.15 and 0.51 < hi < 0.52, (lo, hi)


# %% [markdown]
# The shipped model gets 6 of the 20 questions right, an EM of 0.3, with a 95% interval from 0.1455
# to 0.519.
#
# The **Wilson score interval** is a standard confidence interval for a proportion, such as 6 right
# out of 20. Like lesson 01's bootstrap, it treats each question as one unit. The 20 questions are
# taken as independent draws from a large pool of questions like these, each answered right with the
# same unknown rate *p*. If the rate is *p*, the share right in 20 questions varies from sample to
# sample with standard deviation √(p(1 − p)/20). The interval keeps every rate *p* under which 6 out
# of 20 would not be surprising. That is every *p* whose distance from 0.3 is at most 1.96 of those
# standard deviations, computed at that *p* itself. `em.extras["ci95"]` holds it.
#
# The textbook *normal* interval, p̂ ± 1.96·√(p̂(1 − p̂)/n) with p̂ the observed share (0.3), uses
# that share's spread for every *p* instead. The next cell sets the two side by side.

# %%
# NBVAL_CHECK_OUTPUT
# The textbook normal interval against Wilson's, at 6, 1 and 0 right out of 20.
from math import comb

def normal_interval(k, n):
    rate = k / n
    half = 1.96 * np.sqrt(rate * (1 - rate) / n)
    return rate - half, rate + half

for k in (6, 1, 0):
    (a, b), (c, d) = normal_interval(k, 20), ec.wilson_interval(k, 20)
    print(f"{k:>2} of 20 right   normal [{a:+.3f}, {b:.3f}]   Wilson [{c:.3f}, {d:.3f}]")
# How often does each interval hold a true rate of 0.1? Add up the chance of every count k it holds for.
chance = [comb(20, k) * 0.1**k * 0.9 ** (20 - k) for k in range(21)]
held = {name: sum(c for k, c in enumerate(chance) if f(k, 20)[0] <= 0.1 <= f(k, 20)[1])
        for name, f in [("normal", normal_interval), ("Wilson", ec.wilson_interval)]}
print("samples of 20 whose interval holds a true rate of 0.1:",
      ", ".join(f"{name} {v:.1%}" for name, v in held.items()))
assert normal_interval(1, 20)[0] < 0 and normal_interval(0, 20) == (0, 0) and ec.wilson_interval(0, 20)[1] > 0.15
assert held["normal"] < 0.9 < 0.95 < held["Wilson"]

# %% [markdown]
# Here the two are close: 0.10 to 0.50 against Wilson's 0.15 to 0.52. But near 0 or 1 the normal
# interval breaks:
#
# - at 1 right out of 20 it reaches below 0, where Wilson's stays inside [0, 1];
# - at 0 (or 20) right its width drops to zero, as if we were certain, where Wilson's still runs up to
#   0.161;
# - with few questions and a rate near 0 or 1 it holds the true rate less often than 95% of the
#   time: at 20 questions and a rate of 0.1, in 87.6% of samples, against Wilson's 95.7%.
#
# **How sure are we?**
#
# - 20 questions is a small sample. The interval is about the model's rate of right answers on
#   questions of this kind: anywhere from about 0.15 to 0.52, that is about 3 to 10 right per 20
#   questions on average. It is not a range for what one fresh set of 20 questions would score. That
#   count would scatter more widely still, because a new set adds its own luck of the draw on top.
# - Everything below re-scores these *same* 20 answers under different normalisers. On these answers
#   a difference between normalisers is exact, not sampling noise. How large it would be on other
#   questions is a sampling question again. And the model's EM itself is only known to within this
#   interval.

# %% [markdown]
# ## The four steps, one at a time
#
# `ec.normalise_em` is one line of code, but it does four things in order:
#
# 1. **lowercase** (`"Paris"` and `"paris"` are the same answer);
# 2. **strip** leading and trailing whitespace;
# 3. **collapse whitespace**: every run of spaces, tabs, newlines or other Unicode whitespace (such as
#    the no-break space `\u00a0`) becomes one space;
# 4. **drop trailing `. ! ?`** (with any spaces between them), so `"Paris."` equals `"Paris"`.
#
# To see what each step contributes, the next cell rebuilds the normaliser *cumulatively*: each
# function applies all the steps before it plus one more. These functions are teaching scaffolding,
# not a second implementation. Everything after this section scores with `ec.normalise_em` itself, and
# we check below that the last step is exactly it.

# %% tags=["live"]
# Rebuild normalise_em cumulatively: lowercase; + strip; + collapse whitespace; + drop trailing .!?; defines: step_collapse, step_lowercase, step_strip, step_trailing
# Teaching scaffolding: normalise_em rebuilt one step at a time (each step includes the ones before).
def step_lowercase(s):
    return s.lower()

def step_strip(s):
    return step_lowercase(s).strip()

def step_collapse(s):
    return " ".join(step_strip(s).split())

def step_trailing(s):
    return step_collapse(s).rstrip(".!? ")


# %%
# NBVAL_CHECK_OUTPUT
STEPS = {"raw": lambda s: s, "lowercase": step_lowercase, "strip": step_strip,
         "collapse whitespace": step_collapse, "drop trailing .!?": step_trailing}

messy = "  PARIS\u00a0 \t!? "
pd.DataFrame({"after step": list(STEPS), "text (repr)": [repr(f(messy)) for f in STEPS.values()]})


# %% [markdown]
# Note the no-break space: the list above writes it `\u00a0`, and Python's repr shows it as `\xa0`.
# `str.split()` treats it as whitespace, so step 3 folds it away.
#
# Now we apply each cumulative normaliser to both sides of every question and record the verdict.
# `ec.exact_match` takes any normaliser through its `normalise=` argument, and it already handles a
# list of references (more on that at the end).

# %% tags=["live"]
# Verdicts per example and step: ec.exact_match(p, r, normalise=f) for each step; flips = changes from the step before; defines: flips, verdict_table
def verdict_table(predictions, references):
    """One row per example, one column per cumulative step: the EM verdict (0 or 1)."""
    return pd.DataFrame({name: [ec.exact_match(p, r, normalise=f)
                                for p, r in zip(predictions, references)]
                         for name, f in STEPS.items()}).astype(int)

def flips(table):
    """How many verdicts each step changes, relative to the step before it."""
    cols = list(table.columns)
    return pd.Series({b: int((table[b] != table[a]).sum()) for a, b in zip(cols, cols[1:])})


# %%
# NBVAL_CHECK_OUTPUT
model_verdicts = verdict_table(preds, refs)
model_flips = flips(model_verdicts)
print("accepted after each step:", model_verdicts.sum().to_dict())
print("verdicts flipped by each step:", model_flips.to_dict())

# %%
assert model_verdicts["raw"].sum() == 6, model_verdicts["raw"].sum()  # six answers already match character for character
assert model_flips.sum() == 0, model_flips.to_dict()  # no step changes a single verdict of this model

# %% [markdown]
# On the model's answers, no step flips a single verdict. Every step removes a *form* difference
# (capitals, spaces, a final `.`), so a step can only matter for an answer whose form differs from its
# reference. Three quick looks at the model's answers follow:
#
# - does any answer shout in capitals?
# - which answers end in `. ! ?`, the marks step 4 drops?
# - what are the fourteen misses, next to their questions?

# %%
# NBVAL_CHECK_OUTPUT
marked = [(p, r) for p, r in zip(preds, refs) if p != p.rstrip(".!?")]
print("in capitals:", [p for p in preds if p.isupper()])
print(f"{len(marked)} end in . ! or ?, right after normalisation: {sum(ec.exact_match(p, r) for p, r in marked):.4g}")
for p, r in marked:
    print(f"  {p!r:52} reference {r!r}")

# %%
assert not any(p.isupper() for p in preds)
assert len(marked) == 5 and not any(ec.exact_match(p, r) for p, r in marked), marked  # all five are wrong anyway

# %%
# NBVAL_CHECK_OUTPUT
# The fourteen misses next to their questions (the text below quotes from this list).
misses = pd.DataFrame([(q, p, r) for (q, r), p, right in zip(fx["em"], preds, model_verdicts["raw"]) if not right],
                      columns=["question", "model's answer", "reference"])
print(misses.to_string(index=False))
assert len(misses) == 14, f"expected the 14 misses of the model, got {len(misses)}"
assert (model_verdicts["raw"] == model_verdicts["drop trailing .!?"]).all()  # the same misses after every step

# %% [markdown]
# **No step flips anything.** The six right answers are already identical to their references. The
# fourteen misses fail on *content*, never on formatting alone:
#
# - a wrong fact: `"Italy"` for the capital of Italy, `"Cairo"` for a baby frog;
# - a garbled sentence: `"The swat make dpro ducows."` for the drink cows give;
# - a misspelling no normaliser should forgive: `"0 degres Celsius"`.
#
# TinyGPT learned its answers from text written in the same style as the references, so it never
# shouts in capitals. And the five answers that end in `.` or `?` are garbled sentences that fail
# anyway. A chattier model would add a full stop to right answers too: that is why normalisation
# exists.
#
# So that every step has something to do, here is a small set of **hand-written answer variants**.
# They are *not* model output; each one is aimed at one step.

# %%
# HAND-WRITTEN answer variants (not model output): (prediction, reference), each aimed at one step.
VARIANTS = [
    ("Paris", "Paris"),                               # already identical
    ("paris", "Paris"),                               # case only
    (" paris ", "Paris"),                             # case + surrounding spaces
    ("Pacific  Ocean", "Pacific Ocean"),              # two spaces inside
    ("100\tdegrees Celsius", "100 degrees Celsius"),  # a tab inside
    ("Paris.", "Paris"),                              # trailing full stop
    ("PARIS!", "Paris"),                              # capitals + exclamation mark
    ("Paris\u00a0 .", "Paris"),                       # no-break space, space, full stop
    ("Mars?!", "Mars"),                               # two trailing marks
    ("Seven.", ["7", "seven"]),                       # a list of acceptable references
    ("Paris, France", "Paris"),                       # extra content: nothing should forgive it
    ("Ｐａｒｉｓ", "Paris"),                          # full-width letters: no step folds them
]
var_preds, var_refs = [p for p, _ in VARIANTS], [r for _, r in VARIANTS]

# %%
# NBVAL_CHECK_OUTPUT
var_verdicts = verdict_table(var_preds, var_refs)
first_ok = var_verdicts.idxmax(axis=1).where(var_verdicts.any(axis=1), "never")
pd.DataFrame({"prediction": [repr(p) for p in var_preds], "reference": var_refs,
              "accepted from step": first_ok})

# %% [markdown]
# Read the last column as "the first step at which this variant counts as correct". Two variants are
# never accepted:
#
# - `"Paris, France"` says more than the reference, and is rightly rejected;
# - the full-width `"Ｐａｒｉｓ"` is the right word in other Unicode characters, so it is arguably
#   wrongly rejected (we come back to it). Full-width letters are the wide forms of Latin letters used
#   in Chinese, Japanese and Korean (*CJK*) text. Each is its own *code point*, Unicode's number for a
#   character, written like U+FF30 (hexadecimal) for `"Ｐ"`.
#
# Now count the flips per step.

# %%
# NBVAL_CHECK_OUTPUT
var_flips = flips(var_verdicts)
print("accepted after each step:", var_verdicts.sum().to_dict())
print("verdicts flipped by each step:", var_flips.to_dict())

# %%
assert (var_flips >= 1).all()  # every step earns its place on the variants
# Normalising BOTH sides can only forgive: a flip always goes from 0 to 1, never back.
assert (var_verdicts.diff(axis=1).iloc[:, 1:] >= 0).all().all()
assert (model_verdicts.diff(axis=1).iloc[:, 1:] >= 0).all().all()
assert var_verdicts["drop trailing .!?"].sum() == 10, f"expected 10 of the 12 variants accepted, got {var_verdicts['drop trailing .!?'].sum()}"

# %% [markdown]
# Every normalisation step can only *raise* EM, or leave it as it was. If two strings are already
# equal, any function applied to both leaves them equal. The monotonicity asserts above check it on
# our 32 examples. So normalisation can turn a mismatch into a match, but never the reverse. That
# holds for the normaliser itself. SQuAD v2.0's extra rule, in the lesson's last section, drops
# references and can undo a match: `"the the"` against `["the the", "3.14"]`. The question is always
# whether normalisation raises EM for the right reasons.
#
# Here are the flips side by side, for the model's real answers and for the hand-written variants.

# %%
x = np.arange(len(var_flips))
fig, ax = plt.subplots(figsize=(8, 4))
bars_model = ax.bar(x - 0.2, model_flips.values, width=0.4, label="model's answers (20)")
bars_var = ax.bar(x + 0.2, var_flips.values, width=0.4, label="hand-written variants (12)")
ax.bar_label(bars_model, padding=2)  # the model's bars are all zero: label them so the zeros show
ax.bar_label(bars_var, padding=2)
ax.set_ylim(0, var_flips.max() + 1)
ax.set_xticks(x, var_flips.index)
ax.set_xlabel("normalisation step (applied cumulatively)")
ax.set_ylabel("verdicts flipped (0 -> 1)")
ax.set_title("How many EM verdicts each normalisation step flips")
ax.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# The same story as a waterfall for the variants: start from the raw matches, add each step's flips,
# and end at the number `ec.normalise_em` accepts. The table's `bottom` and `height` place each bar of
# the chart below.

# %%
# NBVAL_CHECK_OUTPUT
start = int(var_verdicts["raw"].sum())
gained_before = np.cumsum(var_flips.values) - var_flips.values  # flips of the earlier steps
waterfall = pd.DataFrame({"bottom": [0, *(start + gained_before), 0],
                          "height": [start, *var_flips.values, start + var_flips.sum()]},
                         index=["raw", *var_flips.index, "normalise_em"]).astype(int)
waterfall

# %%
colours = ["grey"] + ["tab:green"] * len(var_flips) + ["tab:blue"]
fig, ax = plt.subplots(figsize=(8, 4))
bars = ax.bar(range(len(waterfall)), waterfall["height"], bottom=waterfall["bottom"], color=colours)
ax.bar_label(bars, labels=[""] + [f"+{v}" for v in var_flips] + [""], label_type="center")
ax.axhline(len(VARIANTS), ls="--", color="black", lw=1)
ax.text(-0.4, len(VARIANTS) + 0.3, f"all {len(VARIANTS)} variants", fontsize=9)
ax.set_xticks(range(len(waterfall)), waterfall.index, rotation=15)
ax.set_ylim(0, len(VARIANTS) + 1.5)
ax.set_xlabel("cumulative normalisation step")
ax.set_ylabel("variants counted as correct")
ax.set_title("Waterfall: matches gained at each step (hand-written variants)")
plt.tight_layout()
plt.show()


# %% [markdown]
# ### The last step *is* `ec.normalise_em`
#
# The scaffolding is only useful if it rebuilds the real thing. We check it on every string we have
# seen: the model's answers, every fixture reference (list references flattened) and the variants.

# %%
def flat(references):
    return [r for ref in references for r in ([ref] if isinstance(ref, str) else ref)]

all_strings = preds + flat(refs) + var_preds + flat(var_refs) + [messy]
assert all(step_trailing(s) == ec.normalise_em(s) for s in all_strings)
assert [r["prediction_normalised"] for r in em.per_example] == [step_trailing(p) for p in preds]
print(f"step_trailing == ec.normalise_em on all {len(all_strings)} strings")

# %% [markdown]
# ## The per-example table
#
# When an EM number surprises you, the per-example table is the first thing to look at.
# `exact_match_eval` keeps, for each question, the prediction, the reference, both normalised forms
# and the verdict. Here it is as a DataFrame.

# %%
# NBVAL_CHECK_OUTPUT
per_example = pd.DataFrame(em.per_example)[
    ["prediction", "reference", "prediction_normalised", "reference_normalised", "score"]
].rename(columns={"prediction_normalised": "pred (norm)", "reference_normalised": "ref (norm)",
                  "score": "EM"}).astype({"EM": int})
per_example

# %%
n_right = round(em.value * len(preds))  # six
assert per_example["EM"].sum() == n_right, f"expected the {n_right} right answers of em.value, got {per_example['EM'].sum()}"
assert per_example["EM"].tolist() == model_verdicts["drop trailing .!?"].tolist()

# %% [markdown]
# Exact match gives nothing to a sentence, even one that holds the right word. Sorted this time by
# what partial credit could do for them, the fourteen misses fall into three kinds:
#
# - three wrong answers are fluent and simply wrong: `"Italy"` as the capital of Italy, `"Cairo"` for
#   a baby frog, `"The Sun"` as the tallest mountain;
# - most of the others are garbled, such as `"Whales adoes the wealungs to a l l ourourourm?"`;
# - two answers hold the right word inside a sentence: `"The Sun is a a a a a a star."` against
#   `"A star"`, and `"Beeeeees produce honey from the nectar of f weee"` against `"Honey"`.
#
# No normaliser could or should rescue the first two kinds. **Token F1** (lesson 03 builds it) gives
# partial credit for the words an answer shares with its reference. Here a *token* is a word, a run of
# characters between spaces, not lesson 01's byte. F1 is 2 × shared tokens / (answer tokens +
# reference tokens). It gives the two sentences a little credit, but look where that credit comes
# from. The last column uses SQuAD's normaliser, which the next section introduces:

# %%
# NBVAL_CHECK_OUTPUT
inside = {r: (p, r) for p, r in zip(preds, refs) if r in ("A star", "Honey")}
for p, r in inside.values():
    print(f"{r!r:8} EM {ec.exact_match(p, r):.4g}   F1 {ec.token_f1(p, r):.4g}   "
          f"F1 with SQuAD's normaliser {ec.token_f1(p, r, normalise=ec.normalise_squad):.4g}")
star, honey = inside["A star"], inside["Honey"]
print("star answer: (overlap, answer tokens, reference tokens) =", ec.f1_counts(*star),
      "| its last token:", repr(ec.normalise_f1(star[0]).split()[-1]))

# %%
assert ec.token_f1(*star) == 2 / 12 and ec.f1_counts(*star) == (1, 10, 2)  # the one shared token is "a"
assert ec.token_f1(*star, normalise=ec.normalise_squad) == 0.5  # "sun is star" against "star"
assert ec.token_f1(*honey) == 0.2 and ec.token_f1(*honey, normalise=ec.normalise_squad) == 2 / 9

# %% [markdown]
# The star answer shares one token with `"A star"`: 2 × 1 / (10 + 2) = 0.1667. That token is the
# article `"a"`, not `"star"`: evalcore's F1 keeps punctuation, so the answer's `"star."` is not
# `"star"`. A normaliser that strips punctuation, such as SQuAD's, credits the word that matters.
# SQuAD's also drops the articles, so `"sun is star"` against `"star"` gives 2 × 1 / (3 + 1) = 0.5. The
# honey answer gets 0.2 for `"honey"`, diluted by eight other words.
#
# ## Normalisation is a policy: SQuAD's rules against ours
#
# Normalisation is a choice, and other evaluations choose differently. SQuAD is a widely used
# reading-comprehension benchmark, and its official evaluation script normalises in its own way.
# `ec.normalise_squad` ports the script's `normalize_answer`, which the v1.1 and v2.0 scripts share. It
# works in the script's order:
#
# 1. lowercase;
# 2. delete every character in `string.punctuation` (ASCII only), *anywhere* in the string;
# 3. replace the articles *a*, *an*, *the* (whole words) with a space;
# 4. collapse whitespace.
#
# SQuAD v2.0 also has questions that its passage cannot answer, and for those the right answer is the
# empty string. So the v2.0 script has one more rule, for a question's list of references. It first
# drops every reference that normalises to `""`, and if none is left, it scores against `[""]`.
# In evalcore this rule applies when the normaliser passed is `ec.normalise_squad` itself, and only
# then. So the `normalise_squad` column of the table below follows it; the end of the lesson shows
# the rule in full.
#
# Both normalisers are reasonable; they forgive different things. A quick look at the same strings
# under each:

# %%
# NBVAL_CHECK_OUTPUT
for s in ["The Pacific Ocean.", "U.S.A.", "U.S. A", "The.Eiffel.Tower", "A"]:
    print(f"{s!r:22} normalise_em -> {ec.normalise_em(s)!r:22} normalise_squad -> {ec.normalise_squad(s)!r}")


# %% [markdown]
# SQuAD's rules have odd corners:
#
# - `"U.S. A"` becomes `"us"`. Punctuation goes first, which leaves the `a` standing alone, and then
#   it is removed as an article.
# - `"The.Eiffel.Tower"` is glued into one word, because the dots are *deleted*, not replaced by
#   spaces.
# - The multiple-choice letter `"A"` vanishes entirely.
#
# Neither normaliser does anything about Unicode look-alikes. **NFKC** is one of Unicode's standard
# normal forms: it folds *compatibility* characters, such as full-width letters and `！`, to their
# plain forms. Python has it as `unicodedata.normalize("NFKC", ...)`, so we add it as a third column.
# It is **not an evalcore function**, only a possible extra policy, labelled as such.

# %%
# A POSSIBLE EXTRA POLICY (not in evalcore): fold compatibility characters with NFKC, then normalise_em.
def normalise_nfkc_em(text):
    return ec.normalise_em(unicodedata.normalize("NFKC", text))

NORMALISERS = {"normalise_em": ec.normalise_em, "normalise_squad": ec.normalise_squad,
               "NFKC + normalise_em (extra)": normalise_nfkc_em}

# %% [markdown]
# The chosen cases. The first column is a plain-ASCII label (it is also what the chart below prints).
# The last column of the table is the prediction after `ec.normalise_squad`.

# %%
POLICY_CASES = [  # (label, prediction, reference), all hand-written
    ("article: the", "the Pacific Ocean", "Pacific Ocean"),
    ("article in reference", "star", "A star"),
    ("inner comma", "Paris, France", "Paris France"),
    ("U.S.A. vs USA", "U.S.A.", "USA"),
    ("U.S. A vs USA", "U.S. A", "USA"),
    ("dots between words", "The.Eiffel.Tower", "Eiffel Tower"),
    ("CJK full stop U+3002", "東京。", "東京"),
    ("full-width ! U+FF01", "Paris！", "Paris"),
    ("full-width letters", "Ｐａｒｉｓ", "Paris"),
    ("letter A vs A", "A", "A"),
    ("empty vs letter A", "", "A"),
    ("(A) vs letter A", "(A)", "A"),
    ("letter B vs A", "B", "A"),
]

# %%
# NBVAL_CHECK_OUTPUT
policy = pd.DataFrame(POLICY_CASES, columns=["case", "prediction", "reference"]).set_index("case")
for name, f in NORMALISERS.items():
    policy[name] = [int(ec.exact_match(p, r, normalise=f))
                    for p, r in zip(policy["prediction"], policy["reference"])]
policy["squad form of pred"] = [ec.normalise_squad(p) for p in policy["prediction"]]
policy

# %% [markdown]
# Now the claims, one assert each:
#
# - **articles**: SQuAD forgives a missing or extra *the*/*a*; our rules do not;
# - **inner punctuation**: SQuAD accepts `"U.S.A."` for `"USA"` and `"Paris, France"` for
#   `"Paris France"`; ours only drops punctuation at the end;
# - **`"The.Eiffel.Tower"`** fails under both, and under SQuAD for an odd reason (one glued word);
# - **Unicode punctuation**: `"。"` and `"！"` are not in `string.punctuation`, so SQuAD keeps them,
#   and so does our trailing-punctuation step. NFKC turns `"！"` into `"!"` but leaves `"。"` alone;
# - **full-width letters**: neither evalcore normaliser folds them; NFKC does;
# - **the letter `"A"`**: SQuAD normalises it to `""`, so the v2.0 rule drops it and scores against
#   `[""]`. An *empty* answer, or `"(A)"`, then counts as correct against the reference `"A"`.

# %%
def verdicts(case):  # (normalise_em, normalise_squad, NFKC + normalise_em) verdicts of one policy case
    return tuple(int(policy.loc[case, n]) for n in NORMALISERS)

for case in ["article: the", "article in reference", "U.S.A. vs USA", "inner comma"]:  # SQuAD forgives, we do not
    assert verdicts(case)[:2] == (0, 1), f"{case}: expected normalise_em to reject and SQuAD to accept, got {verdicts(case)[:2]}"
assert ec.normalise_squad("U.S. A") == "us", ec.normalise_squad("U.S. A")
assert verdicts("U.S. A vs USA")[1] == 0, f"expected SQuAD to reject 'U.S. A', got {verdicts('U.S. A vs USA')[1]}"
assert ec.normalise_squad("The.Eiffel.Tower") == "theeiffeltower"
assert sum(verdicts("dots between words")) == 0, f"expected no normaliser to accept it, got {verdicts('dots between words')}"

# %%
assert "。" not in string.punctuation and "！" not in string.punctuation
assert ec.normalise_squad("東京。") == "東京。" and ec.normalise_em("Paris！") == "paris！"
assert unicodedata.normalize("NFKC", "！") == "!" and unicodedata.normalize("NFKC", "。") == "。"
assert sum(verdicts("CJK full stop U+3002")) == 0, f"expected no normaliser to accept it, got {verdicts('CJK full stop U+3002')}"
for case in ["full-width ! U+FF01", "full-width letters"]:  # only NFKC folds them
    assert verdicts(case) == (0, 0, 1), f"{case}: expected only NFKC + normalise_em to accept, got {verdicts(case)}"
assert ec.normalise_squad("A") == "", ec.normalise_squad("A")
assert verdicts("empty vs letter A")[:2] == (0, 1), f"expected SQuAD alone to accept the empty answer, got {verdicts('empty vs letter A')[:2]}"
assert verdicts("(A) vs letter A")[1] == 1, f"expected SQuAD to accept '(A)', got {verdicts('(A) vs letter A')[1]}"
assert verdicts("letter B vs A")[1] == 0, f"expected SQuAD to reject 'B', got {verdicts('letter B vs A')[1]}"

# %% [markdown]
# The whole table as a picture: green is "counted as correct".

# %%
grid = policy[list(NORMALISERS)].to_numpy()
fig, ax = plt.subplots(figsize=(8, 5.5))
ax.imshow(grid, cmap="RdYlGn", vmin=-0.3, vmax=1.3, aspect="auto")
for (i, j), v in np.ndenumerate(grid):
    ax.text(j, i, "match" if v else "no", ha="center", va="center", fontsize=9)
ax.set_xticks(range(grid.shape[1]), ["normalise_em", "normalise_squad", "NFKC + em\n(extra policy)"])
ax.set_yticks(range(grid.shape[0]), policy.index)
ax.set_xlabel("normaliser")
ax.set_ylabel("hand-written case")
ax.set_title("Exact match on the policy cases under each normaliser")
plt.tight_layout()
plt.show()


# %% [markdown]
# ### Does the policy move the model's score?
#
# `ec.exact_match` takes the normaliser as `normalise=...`, so re-scoring the model's 20 answers under
# each policy takes one line per policy. We add "no normalisation at all" as a baseline. For contrast,
# the hand-written variants and the policy cases sit beside the fixture.

# %%
# NBVAL_CHECK_OUTPUT
def em_score(predictions, references, f):
    return float(np.mean([ec.exact_match(p, r, normalise=f) for p, r in zip(predictions, references)]))

POLICIES = {"none (raw)": lambda s: s, **NORMALISERS}
scores = pd.DataFrame({
    "model on EM fixture": [em_score(preds, refs, f) for f in POLICIES.values()],
    "hand-written variants": [em_score(var_preds, var_refs, f) for f in POLICIES.values()],
    "policy cases": [em_score(policy["prediction"], policy["reference"], f) for f in POLICIES.values()],
}, index=list(POLICIES)).round(4)
scores

# %%
assert (scores["model on EM fixture"] == 0.3).all()   # the model's EM does not move at all
assert scores.loc["normalise_em", "model on EM fixture"] == round(em.value, 4)
assert scores["hand-written variants"].nunique() > 1 and scores["policy cases"].nunique() > 1
assert scores.loc["normalise_squad", "hand-written variants"] == scores.loc["normalise_em", "hand-written variants"]
assert scores.loc["normalise_squad", "policy cases"] == scores["policy cases"].max()

# %%
ax = scores.plot.bar(figsize=(8, 4), rot=0, width=0.8)
ax.set_xlabel("normalisation policy")
ax.set_ylabel("exact match (mean)")
ax.set_title("EM under each policy: the model's fixture score vs hand-written cases")
ax.set_xticks(range(len(scores)), ["none (raw)", "normalise_em", "normalise_squad", "NFKC + em\n(extra)"])
ax.set_ylim(0, 1)
ax.legend(loc="upper left", fontsize=9)
plt.tight_layout()
plt.show()

# %% [markdown]
# On this fixture the policy changes nothing: **0.3 under every normaliser, even with none.** That is
# a real finding, not a failure of the demo. The policy only matters where the answers differ in form,
# and TinyGPT's answers differ in content. The other two columns show that the policies do differ:
#
# - on the hand-written variants, SQuAD's rules accept the same 10 of 12 as ours, and NFKC one more,
#   the full-width Paris;
# - on the policy cases SQuAD is the most forgiving, for good reasons and bad.
#
# **How sure are we?**
#
# - The 0.3 holds for these 20 answers, which differ from their references in content, not form.
# - That no normaliser changed a verdict on 20 answers does not show the policy is harmless for this
#   model in general. For no change out of 20, the Wilson interval runs from 0 to 0.161 (printed
#   above). So on questions like these a normaliser could still change up to about one verdict in six.
# - Yet the policy is not idle on the fixture. Four of its references begin with an article, so SQuAD's
#   rules would already accept a bare `"star"` or `"heart"` where ours would not.
#
# *Sources:* the SQuAD scripts as kept by Hugging Face `evaluate`, in `metrics/squad/compute_score.py`
# (v1.1) and `metrics/squad_v2/compute_score.py` (v2.0).

# %%
# NBVAL_CHECK_OUTPUT
changed = [r for r in flat(refs) if ec.normalise_squad(r) != ec.normalise_em(r)]
print(changed, "->", [ec.normalise_squad(r) for r in changed])

# %%
assert changed == ["A star", "A mammal", "A tadpole", "The heart"]
assert ec.exact_match("Heart", "The heart", normalise=ec.normalise_squad) == 1.0
assert ec.exact_match("Heart", "The heart") == 0.0

# %% [markdown]
# ## Multiple acceptable references
#
# evalcore scores a question with several acceptable answers by the **best over the list**: a
# prediction is correct if it matches *any* reference in the list (any *alternative*). Two EM
# questions are like that: their references are lists. This is the rule with `normalise_em`, the
# default. SQuAD's v2.0 script adds one step first, shown at the end of this section. In the table
# below, `instruction` is the question.

# %%
# NBVAL_CHECK_OUTPUT
list_rows = [(q, p, r) for (q, r), p in zip(fx["em"], preds) if not isinstance(r, str)]
extra = [("(hand-written)", "Eight.", ["8", "eight"]), ("(hand-written)", "Seven", ["7", "seven"])]
multi = pd.DataFrame(list_rows + extra, columns=["instruction", "prediction", "references"])
multi["per alternative"] = [[int(ec.exact_match(p, a)) for a in r]
                            for p, r in zip(multi["prediction"], multi["references"])]
multi["EM (best)"] = [int(ec.exact_match(p, r)) for p, r in zip(multi["prediction"], multi["references"])]
multi


# %% [markdown]
# The model's `"7"` matches the first alternative; its `"The he Sun"` matches neither. The hand-written
# `"Eight."` and `"Seven"` are each accepted by exactly one alternative, the word.
#
# A common slip is to score against the first reference only. The next cell does that **on purpose**,
# with the correct evalcore call next to it.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# First reference only, on purpose: exact_match_first_only, printed next to ec.exact_match on a list; defines: exact_match_first_only
# BUGGY ON PURPOSE: only the first acceptable reference is consulted.
def exact_match_first_only(prediction, reference):
    first = reference if isinstance(reference, str) else reference[0]
    return ec.exact_match(prediction, first)

for p, r in [("Seven", ["7", "seven"]), ("Eight.", ["8", "eight"])]:
    print(f"{p!r:9} first-only: {exact_match_first_only(p, r):.4g}   ec.exact_match: {ec.exact_match(p, r):.4g}")

# %%
assert multi["per alternative"].tolist() == [[0, 0], [1, 0], [0, 1], [0, 1]]
assert multi["EM (best)"].tolist() == [0, 1, 1, 1]
assert exact_match_first_only("Seven", ["7", "seven"]) == 0.0 and ec.exact_match("Seven", ["7", "seven"]) == 1.0

# %% [markdown]
# ### SQuAD v2.0 first drops the references that normalise to nothing
#
# The official SQuAD v2.0 script does not take the best over *every* reference. In `get_raw_scores`
# it first drops each gold answer (reference) that normalises to `""`. If none is left, it uses
# `[""]`, the one right answer to an unanswerable question. Only then does it take the best. The v1.1
# script keeps every reference.
#
# evalcore has both rules:
#
# - with `normalise=ec.normalise_squad`, `ec.exact_match` and `ec.token_f1` follow the v2.0 script;
# - with any other normaliser, `normalise_em` included, no reference is dropped (v1.1's rule).
#
# evalcore checks whether the function passed *is* `ec.normalise_squad`. A function that merely calls
# it, like `squad_keep_all` below, gets the keep-everything rule. That is how the next cell shows both
# rules with one normaliser.
#
# The rules differ only when a reference normalises to `""`, such as `"the the"` under SQuAD's rules.
# Here is an empty answer against `["the the", "3.14"]` under both:

# %%
# NBVAL_CHECK_OUTPUT
golds = ["the the", "3.14"]

def squad_keep_all(text):  # the SQuAD normaliser under another name: evalcore keeps every reference
    return ec.normalise_squad(text)

print("references normalised:", [ec.normalise_squad(g) for g in golds])
for pred in ["", "3.14"]:
    print(f"prediction {pred!r:7} v2.0 rule (ec.normalise_squad) "
          f"{ec.exact_match(pred, golds, normalise=ec.normalise_squad):.4g}   "
          f"every reference kept {ec.exact_match(pred, golds, normalise=squad_keep_all):.4g}")

# %%
assert ec.exact_match("", golds, normalise=ec.normalise_squad) == 0.0  # "the the" is dropped first
assert ec.token_f1("", golds, normalise=ec.normalise_squad) == 0.0
assert ec.exact_match("", golds, normalise=squad_keep_all) == 1.0  # kept: "" equals ""
assert ec.exact_match("3.14", golds, normalise=ec.normalise_squad) == 1.0  # a real answer is unaffected
# normalise_em keeps its rule: "..." normalises to "" and still matches the empty answer
assert ec.normalise_em("...") == "" and ec.exact_match("", ["...", "3.14"]) == 1.0
assert ec.exact_match("", "A", normalise=ec.normalise_squad) == 1.0  # nothing left, so [""]
assert not any(ec.normalise_squad(r) == "" or ec.normalise_em(r) == "" for r in flat(refs))  # fixture unaffected

# %% [markdown]
# Under the v2.0 rule the empty answer is wrong. `"the the"` says nothing once articles are gone, so it
# is not a usable reference, and the question still has a real answer, `"3.14"`. Keep every reference,
# and the empty answer matches `"the the"`.
#
# - With SQuAD's normaliser, both rules accept the empty answer against `"A"` alone. `"A"` normalises
#   to `""`: keeping every reference matches it, and the v2.0 rule drops it and falls back to `[""]`.
#   `normalise_em` rejects it.
# - No reference in the EM fixture normalises to `""` under either normaliser, so the model's EM is
#   the same under both rules.
#
# *Sources:* `get_raw_scores` in `metrics/squad_v2/compute_score.py` of Hugging Face `evaluate` (the
# v2.0 script); `metrics/squad/compute_score.py` there is v1.1's.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.normalise_em` is four steps: lowercase, strip, collapse whitespace, drop trailing `. ! ?`.
#   Built cumulatively, the last step equals `ec.normalise_em` on every string we tried.
# - On the shipped model's 20 answers **no step flips a verdict**: EM is 0.3 raw and 0.3 normalised (6
#   of 20; Wilson 95% interval 0.1455 to 0.519, from `em.extras["ci95"]`), because its misses are
#   wrong facts, garbled sentences and misspellings, not formatting.
# - On 12 hand-written variants, every step flips at least one verdict (1, 1, 2 and 5), taking 1 match
#   to 10.
# - Normalising both sides can only turn mismatches into matches, never the reverse. So each step
#   raises EM or leaves it, and the question is whether it raises it for the right reasons. SQuAD
#   v2.0's rule of dropping references (last bullet) is the exception: it can undo a match.
# - SQuAD's rules forgive more: articles, and ASCII punctuation anywhere (`"U.S.A."` = `"USA"`). They
#   also produce oddities: `"The.Eiffel.Tower"` becomes one word, `"U.S. A"` becomes `"us"`, and the
#   letter `"A"` becomes `""`, so an empty answer matches it.
# - Neither normaliser touches Unicode look-alikes: `"。"` and `"！"` are not in `string.punctuation`,
#   and full-width letters stay full-width. NFKC folds `"！"` and `"Ｐａｒｉｓ"` but not `"。"`. It is
#   a further policy choice, not part of evalcore.
# - A list of references is scored best-over-the-list. Scoring against the first one only rejects
#   correct answers such as `"Seven"`.
# - With `ec.normalise_squad`, evalcore follows the SQuAD v2.0 script and first drops the references
#   that normalise to `""`. An empty answer scores 0 against `["the the", "3.14"]`, where SQuAD's
#   normaliser with every reference kept (v1.1's rule, which evalcore applies with any other
#   normaliser) gives 1.
#
# **What it did not**
#
# - That the shipped model's EM is 0.3 beyond these 20 questions: the interval allows anything from
#   about 0.15 to 0.52.
# - That normalisation never matters for this model: its fixture answers just happen to have no
#   formatting-only misses.
# - Which normaliser is right. That is a policy choice: the lesson shows what each one does, not which
#   to pick.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer. The exercises do not depend on each other; each may use anything the
# lesson defined above (`preds`, `refs`, `POLICY_CASES`, `em_score`, ...).

# %% [markdown]
# ### Exercise 1: A fifth step
#
# Write `normalise_em_no_articles(text)`: `ec.normalise_em`, then remove the articles *a*, *an* and
# *the* (whole words only), then collapse whitespace again. Compare it with `ec.normalise_em`:
#
# - store the labels of the policy cases whose verdict it changes in the list `flipped_cases`;
# - store the model's EM on the fixture under it in `fixture_em`.
#
# Look closely at the multiple-choice rows: is every flip one you would want?
#
# *Hint:* `re.sub(r"\b(a|an|the)\b", " ", ...)`; score with `ec.exact_match(p, r, normalise=your_function)`
# and with `em_score(preds, refs, your_function)`.

# %%
# Exercise 1: define `normalise_em_no_articles`, and store the labels of the policy cases it flips
#   in `flipped_cases` and the model's fixture EM under it in `fixture_em`.
import re

### BEGIN SOLUTION
def normalise_em_no_articles(text):
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", ec.normalise_em(text)).split())

flipped_cases = []
for c, p, r in POLICY_CASES:
    before, after = ec.exact_match(p, r), ec.exact_match(p, r, normalise=normalise_em_no_articles)
    if after != before:
        flipped_cases.append(c)
        print(f"{c:<22} {before:.0f} -> {after:.0f}   {p!r} against {r!r}")
fixture_em = em_score(preds, refs, normalise_em_no_articles)
print(f"fixture EM: {fixture_em:.4g}")
### END SOLUTION
for s, want in [("The Pacific Ocean.", "pacific ocean"), ("  A  star ", "star"), ("Theatre an apple", "theatre apple")]:
    assert normalise_em_no_articles(s) == want, f"expected normalise_em, then whole-word articles removed, then whitespace collapsed, for {s!r}; got {normalise_em_no_articles(s)!r}"
for c, p, r in POLICY_CASES:
    flips = ec.exact_match(p, r) != ec.exact_match(p, r, normalise=normalise_em_no_articles)
    assert (c in flipped_cases) == flips, f"expected flipped_cases to hold exactly the labels whose verdict your normaliser changes; look again at {c!r}"
assert abs(fixture_em - em_score(preds, refs, normalise_em_no_articles)) < 1e-9, f"expected the model's EM on the 20 fixture questions under your normaliser; got {fixture_em!r}"
print("Exercise 1: check passed.")

# %% [markdown] tags=["solution"]
# Three cases flip: the two article cases, as intended, and `"empty vs letter A"`. The article rule
# cannot tell the multiple-choice letter `"A"` from the article *a*. The reference `"A"` normalises to
# `""`, so an empty answer now counts as right, the same oddity as SQuAD's. The model's fixture EM
# does not move (0.3): none of its misses differs from its reference by an article alone.

# %% [markdown]
# ### Exercise 2: A chattier model
#
# Turn each of the model's 20 answers into a sentence-style answer, in capitals with a trailing `"."`,
# and store the list in `chatty`. Store its EM with no normalisation in `raw_em` and with
# `ec.normalise_em` in `norm_em`. How much of the model's score does the formatting cost, and how
# much does normalisation give back?
#
# *Hint:* `p.upper() + "."`; `em_score(...)` with `lambda s: s` and with `ec.normalise_em`.

# %%
# Exercise 2: store the sentence-style answers in `chatty`, and their EM without and with
#   `ec.normalise_em` in `raw_em` and `norm_em`.
### BEGIN SOLUTION
chatty = [p.upper() + "." for p in preds]
raw_em, norm_em = em_score(chatty, refs, lambda s: s), em_score(chatty, refs, ec.normalise_em)
print(f"raw EM {raw_em:.4g}, normalise_em EM {norm_em:.4g} (the model's own answers: {em.value:.4g})")
### END SOLUTION
assert len(chatty) == len(preds), f"expected one chatty answer per model answer ({len(preds)}); got {len(chatty)}"
assert all(c.endswith(".") and c == c.upper() for c in chatty), f"expected answers in capitals ending in '.'; got {chatty[:3]!r}..."
assert [ec.normalise_em(c) for c in chatty] == [ec.normalise_em(p) for p in preds], "expected each chatty answer to be its model answer in capitals plus a full stop"
assert abs(raw_em - em_score(chatty, refs, lambda s: s)) < 1e-9, f"expected EM of the chatty answers with no normalisation; got {raw_em!r}"
assert abs(norm_em - em_score(chatty, refs, ec.normalise_em)) < 1e-9, f"expected EM of the chatty answers under ec.normalise_em; got {norm_em!r}"
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# With no normalisation the chatty answers score 0: not one matches its reference character for
# character. `ec.normalise_em` lowercases and drops the full stop, so it recovers exactly the six
# right answers, 0.3, the model's own score. This is the case normalisation exists for: a difference
# in form only.

# %% [markdown]
# ### Exercise 3: A false match
#
# Find a numeric prediction and a numeric reference that are *different numbers*, yet
# `ec.normalise_squad` counts as an exact match while `ec.normalise_em` does not. Store them as
# strings in `false_pred` and `false_ref`.
#
# *Hint:* think about what deleting a decimal point does to `"3.5"`.

# %%
# Exercise 3: store a prediction and a reference that are different numbers but match under SQuAD's
#   rules in `false_pred` and `false_ref`.
### BEGIN SOLUTION
false_pred, false_ref = "3.5", "35"  # SQuAD deletes the point: "3.5" becomes "35"
print(ec.normalise_squad(false_pred), ec.normalise_squad(false_ref))
### END SOLUTION
assert float(false_pred) != float(false_ref), f"expected two different numbers; got {false_pred!r} and {false_ref!r}"
assert ec.exact_match(false_pred, false_ref, normalise=ec.normalise_squad) == 1.0, f"expected a match under ec.normalise_squad; got none for {false_pred!r} and {false_ref!r}"
assert ec.exact_match(false_pred, false_ref) == 0.0, f"expected no match under ec.normalise_em; got one for {false_pred!r} and {false_ref!r}"
print("Exercise 3: check passed.")

# %% [markdown]
# ### Exercise 4: Japanese punctuation
#
# Write `normalise_em_cjk(text)`: `ec.normalise_em`, then also drop any trailing full-width `"。"`,
# `"！"` and `"？"` (and spaces between them). Store the labels of the policy cases it turns from a
# miss into a match, compared with `ec.normalise_em`, in the list `fixed_cases`.
#
# *Hint:* `str.rstrip` takes a string of characters to strip.

# %%
# Exercise 4: define `normalise_em_cjk`, and store the labels of the policy cases it fixes in
#   `fixed_cases`.
### BEGIN SOLUTION
def normalise_em_cjk(text):
    return ec.normalise_em(text).rstrip("。！？ ")

fixed_cases = []
for c, p, r in POLICY_CASES:
    before, after = ec.exact_match(p, r), ec.exact_match(p, r, normalise=normalise_em_cjk)
    if after > before:
        fixed_cases.append(c)
        print(f"{c:<22} {before:.0f} -> {after:.0f}   {p!r} against {r!r}")
### END SOLUTION
for s, want in [("東京。", "東京"), ("Paris！ ", "paris"), ("本当？！", "本当"), ("Paris.", "paris"), ("東京。大阪", "東京。大阪")]:
    assert normalise_em_cjk(s) == want, f"expected normalise_em plus trailing 。！？ dropped, for {s!r}; got {normalise_em_cjk(s)!r}"
for c, p, r in POLICY_CASES:
    fixed = ec.exact_match(p, r, normalise=normalise_em_cjk) > ec.exact_match(p, r)
    assert (c in fixed_cases) == fixed, f"expected fixed_cases to hold exactly the labels your normaliser turns from a miss into a match; look again at {c!r}"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# Two cases are fixed, `"CJK full stop U+3002"` and `"full-width ! U+FF01"`. The full-width letters
# still fail: dropping punctuation does nothing for `"Ｐａｒｉｓ"`; only a fold such as NFKC does.
