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
# # 03 · Token F1, and why three frameworks report three numbers
#
# Exact match (lesson 02) gives an answer all the credit or none. Token F1 gives partial credit: it
# counts the words that the prediction and the reference have in common. That sounds simple, yet two
# reasonable choices inside it change the score: what to do with punctuation, and whether a repeated
# word counts more than once. The well-known frameworks agree on neither, so the same answers can get
# a different F1 from each. The frameworks compared here are open-source eval code bases:
# - **HELM**, Stanford's benchmark suite (Holistic Evaluation of Language Models);
# - **lighteval**, Hugging Face's eval library;
# - **OpenAI evals**, OpenAI's eval framework;
# - **Inspect**, the UK AI Security Institute's eval framework (the Python package `inspect-ai`).
#
# **What you will learn**
# - how bag-of-tokens F1 is built, one step at a time: normalise, split on whitespace, intersect two
#   `Counter`s, then precision, recall, the harmonic mean, and the two empty cases;
# - how to read a precision/recall scatter of a model's answers, with iso-F1 curves;
# - where F1 forgives a paraphrase that exact match refuses, and where word overlap rewards a wrong answer;
# - two policy choices that move the score: keeping or stripping punctuation, and counting tokens as a
#   bag or as a set;
# - which frameworks count a bag (SQuAD, OpenAI evals, evalcore) and which a set (HELM, lighteval),
#   and how inspect-ai moved from a set (0.3.260) to a bag (0.3.285);
# - how far each choice moves the shipped model's mean F1 on the fixture.
#
# **Time needed:** about 80 minutes.
#
# **Builds on:** lesson 2 (exact match, normalisation and the SQuAD normaliser) and lesson 1 (the
# percentile bootstrap and the paired difference). Uses `evalcore`'s `normalise_f1`, `f1_counts`,
# `token_f1`, `token_f1_eval`, `normalise_squad` and `exact_match`. It also uses the shipped TinyGPT
# checkpoint (no training here).

# %%
# NBVAL_CHECK_OUTPUT
from collections import Counter
import string

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section

pd.set_option("display.max_colwidth", 60)
model = ec.load_pretrained()  # the shipped TinyGPT (ec.CHECKPOINT_STEPS = 600 training steps)
tok = ec.InstructionTokenizer()
fx = ec.load_fixtures()
print(len(fx["f1"]), "F1 pairs; the first:", fx["f1"][0])

# %% [markdown]
# ## 1. Token F1 by hand
#
# We first compute token F1 by hand on one small example, then check that evalcore gets the same number.
#
# F1 ignores word order. It treats each side as a **bag** of tokens, also called a *multiset*: the order
# is forgotten, but the counts are kept. (A *set* would keep each distinct token only once; section 5
# compares the two.) In evalcore a token is a whitespace-separated word after `ec.normalise_f1`. So an
# F1 token is a word, not the one-byte model token of lesson 01. That normaliser lowercases, strips and
# collapses whitespace, but it **keeps punctuation**: `"flowers."` and `"flowers"` are different tokens.
# Our example prediction is partly right, and it says "honey" twice.

# %%
# NBVAL_CHECK_OUTPUT
prediction = "Bees make honey and honey is sweet"
reference = "Bees make honey from the nectar of flowers."
pred_tokens = ec.normalise_f1(prediction).split()
ref_tokens = ec.normalise_f1(reference).split()
print(len(pred_tokens), pred_tokens)
print(len(ref_tokens), ref_tokens)

# %% [markdown]
# The overlap is the intersection of the two bags. `Counter & Counter` keeps each token with the
# *smaller* of its two counts, so a word the model repeats earns credit only as many times as the
# reference contains it. The word "honey" appears twice in the prediction but once in the reference, so it
# counts once.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Overlap: intersect the two Counters with &, then sum the counts; defines: overlap
common = Counter(pred_tokens) & Counter(ref_tokens)
overlap = sum(common.values())
print(dict(common), "-> overlap =", overlap)

# %% [markdown]
# **Precision** is the share of the prediction's tokens that appear in the reference: how much of what
# the model said was right. **Recall** is the share of the reference's tokens that the prediction
# covers: how much of the answer the model gave. F1 is their **harmonic mean**, $2PR/(P+R)$ for
# precision $P$ and recall $R$. It stays low unless *both* are high.
#
# Write $o$ for the overlap, $n_p$ for the prediction's length and $n_r$ for the reference's. Then
# $P = o/n_p$ and $R = o/n_r$, and the harmonic mean simplifies:
# $\frac{2 \cdot \frac{o}{n_p} \cdot \frac{o}{n_r}}{\frac{o}{n_p} + \frac{o}{n_r}} = \frac{2o}{n_p + n_r}$.
# `ec.token_f1` uses the right-hand form. It needs no special case when the overlap is 0, where the
# left-hand form would divide 0 by 0.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Precision, recall, their harmonic mean, and the same F1 as 2 * overlap / (len(pred) + len(ref)); defines: f1_evalcore_form, f1_harmonic
precision = overlap / len(pred_tokens)  # 3/7 of what the model said is in the reference
recall = overlap / len(ref_tokens)  # 3/8 of the reference was said
f1_harmonic = 2 * precision * recall / (precision + recall)
f1_evalcore_form = 2 * overlap / (len(pred_tokens) + len(ref_tokens))
print(f"precision {precision:.4g}, recall {recall:.4g}")
print(f"harmonic mean {f1_harmonic:.4g}, 2*overlap/(len(pred)+len(ref)) {f1_evalcore_form:.4g}")

# %% [markdown]
# Now the check that matters: our hand computation must agree with evalcore. `ec.f1_counts` returns the
# three counts (overlap, prediction length, reference length), and `ec.token_f1` returns the score.

# %%
assert ec.f1_counts(prediction, reference) == (overlap, len(pred_tokens), len(ref_tokens)) == (3, 7, 8), \
    f"expected (overlap, len(pred), len(ref)) = (3, 7, 8), got {ec.f1_counts(prediction, reference)}"
assert abs(ec.token_f1(prediction, reference) - f1_harmonic) < 1e-12
assert ec.token_f1(prediction, reference) == f1_evalcore_form == 0.4, \
    f"expected F1 0.4, got {ec.token_f1(prediction, reference)} (by hand {f1_evalcore_form})"
print("hand computation == ec.token_f1:", ec.token_f1(prediction, reference))

# %% [markdown]
# ### The empty cases
#
# In evalcore, two empty sides score 1.0 and one empty side scores 0.0. This is a convention, not a
# theorem, and other scripts choose differently.
#
# A side is empty when it has no tokens after normalisation: an empty answer, or only spaces. Then
# precision or recall would be 0/0, so a rule has to decide. evalcore follows the SQuAD v2.0 script
# (`compute_f1`):
# - **both empty scores 1.0**: nothing was expected and nothing was said, a vacuous match;
# - **one empty scores 0.0**: nothing is shared.
#
# The older SQuAD v1.1 script and HELM both score two empty sides 0.0, where evalcore gives 1.0:
# - SQuAD v1.1 scores 0 whenever no token is shared, and two empty sides share none;
# - HELM scores any empty side 0.0, even when both are empty.

# %%
# NBVAL_CHECK_OUTPUT
cases = [("", ""), ("   ", ""), ("", "Paris"), ("Paris", "")]
empty = pd.DataFrame([{"prediction": repr(p), "reference": repr(r), "f1_counts": ec.f1_counts(p, r),
                       "token_f1": ec.token_f1(p, r)} for p, r in cases])
empty

# %%
assert ec.token_f1("", "") == 1.0 and ec.token_f1("   ", "") == 1.0  # both empty: vacuous match
assert ec.token_f1("", "Paris") == 0.0 and ec.token_f1("Paris", "") == 0.0  # one empty: nothing shared

# %% [markdown]
# *Sources:* the SQuAD scripts are in Hugging Face `evaluate` as `metrics/squad_v2/compute_score.py`
# and `metrics/squad/compute_score.py` (v1.1's `f1_score` returns 0 when no token is shared). HELM's
# is `src/helm/benchmark/metrics/evaluate_reference_metrics.py`: its `f1_score` turns the `None` that
# nltk (the Natural Language Toolkit) returns for an empty side into 0.0.

# %% [markdown]
# ## 2. The shipped model's answers
#
# The shipped model's mean token F1 on the 20 questions of the F1 fixture is 0.2979. With so few
# questions it is a rough number: its 95% interval runs from 0.1749 to 0.4247.
#
# `ec.token_f1_eval` generates an answer for each of the 20 instructions and scores it. Each
# per-example record keeps the precision and the recall as well as the score, so we can see *how* an
# answer earned its F1.

# %%
# NBVAL_CHECK_OUTPUT
result = ec.token_f1_eval(model, tok, fx["f1"])
records = result.per_example
lo, hi = result.extras["ci95"]  # percentile bootstrap over the 20 answers
print(f"mean token F1 of the shipped model: {result.value:.4g}, 95% interval [{lo:.4g}, {hi:.4g}]")
print(sorted(records[0]))

# %%
for rec in records:  # every score is the harmonic mean of that record's precision and recall
    p, r = rec["precision"], rec["recall"]
    assert abs(rec["score"] - (2 * p * r / (p + r) if p + r else 0.0)) < 1e-12
assert abs(result.value - np.mean([rec["score"] for rec in records])) < 1e-12
assert lo < result.value < hi and result.extras["ci_method"].startswith("percentile bootstrap")
assert abs((lo, hi) - np.array(ec.bootstrap_ci([rec["score"] for rec in records]))).max() < 1e-12  # the same recipe
print("every record: score == 2PR/(P+R); value == mean of the scores")

# %% [markdown]
# The interval in `result.extras["ci95"]` is a percentile bootstrap (lesson 01). Lesson 02 used the
# Wilson interval, which is made for a proportion of 0/1 scores. F1 scores are not just 0 or 1, so evalcore
# uses the bootstrap here, the same as `ec.bootstrap_ci` on the 20 scores. It resamples the 20 answers
# with replacement 2000 times, takes each resample's mean, and keeps the middle 95%.
#
# The table lists every answer with its precision, recall and token F1. Its last column is exact match
# (lesson 02) on the same answer.

# %%
per_example = pd.DataFrame({
    "prediction": [r["prediction"] for r in records],
    "reference": [r["reference"] for r in records],
    "precision": [r["precision"] for r in records],
    "recall": [r["recall"] for r in records],
    "token_f1": [r["score"] for r in records],
    "exact_match": [ec.exact_match(r["prediction"], r["reference"]) for r in records],
}).round(4)
per_example

# %% [markdown]
# A scatter of precision against recall shows the two ways to lose F1. An answer can say things the
# reference does not (low precision), or leave out what the reference says (low recall). The dashed
# grey lines are **iso-F1 curves**: every (precision, recall) point on one of them has the same F1. (We
# draw them by solving $F = 2PR/(P+R)$ for $R = FP/(2P - F)$.) Marker area grows with the number of
# answers at a point.

# %%
terse = [r for r in records if r["precision"] == 1.0 and r["recall"] < 0.5]  # all of it right, under half said
best = max(records, key=lambda r: r["score"])
fig, ax = plt.subplots(figsize=(8, 4.5))
for f in (0.2, 0.4, 0.6, 0.8):  # iso-F1 curves
    p = np.linspace(f / (2 - f), 1, 200)
    ax.plot(p, f * p / (2 * p - f), ls="--", lw=0.8, color="grey")
    ax.annotate(f"F1 = {f}", (1.01, f / (2 - f)), fontsize=8, color="grey", va="center")
spots = Counter((round(r["precision"], 4), round(r["recall"], 4)) for r in records)
ax.scatter([p for p, _ in spots], [r for _, r in spots], s=[60 * n for n in spots.values()], alpha=0.7)
ax.annotate(f"{spots[(0.0, 0.0)]} answers share nothing", (0.03, 0.03))
ax.annotate("near-copies with a garbled word", (best["precision"], best["recall"]), xytext=(0.3, 0.97),
            arrowprops={"arrowstyle": "->"})
ax.annotate(f'"{terse[0]["prediction"]}": precise, half the answer', (1.0, terse[0]["recall"]),
            xytext=(0.1, 0.6), arrowprops={"arrowstyle": "->"})
ax.set(xlabel="precision: share of the answer found in the reference", xlim=(-0.04, 1.12), ylim=(-0.04, 1.06),
       ylabel="recall: share of the reference covered", title="Shipped TinyGPT on the F1 fixture")
plt.show()

# %% [markdown]
# Reading the plot:
# - **Bottom left: answers that share nothing.** The cluster at the origin holds the answers that share
#   no token at all with the reference (F1 = 0).
# - **Top right: near-copies.** No answer equals its reference, but three come close (F1 0.75 to 0.84).
#   Each copies its reference with a slip: `"Bes produce honey from the nectar of f flowers."`,
#   `"Pacific ic is the is the largest ocean on Earth."`, `"Tokyo is the cityo is the capital of Japan."`.
#   A misspelt word shares nothing with the right one, and a stutter adds extra copies of words the
#   reference has only once.
# - **Bottom right: short answers.** Asked why a spider is not an insect, the model says
#   `"A spider has eight legs."`. Every word it said is in the reference, so precision is 1. But it
#   covers only 5 of the reference's 11 tokens, so F1 is 0.625.

# %%
print([(r["prediction"], round(r["score"], 4)) for r in terse])
top = sorted(round(r["score"], 4) for r in records)[-3:]
print("the three best scores:", top)
assert [(r["prediction"], round(r["score"], 4)) for r in terse] == [("A spider has eight legs.", 0.625)], terse
assert terse[0]["recall"] == 5 / 11, f"expected recall 5/11, got {terse[0]['recall']}"  # perfect precision, yet F1 capped by recall
assert top == [0.75, 0.8235, 0.8421] and not any(ec.exact_match(r["prediction"], r["reference"]) for r in records), top
assert spots[(0.0, 0.0)] == 6, f"expected 6 answers sharing no token, got {spots[(0.0, 0.0)]}"  # 6 of 20 answers share no token with the reference

# %% [markdown]
# **How sure are we?**
# - The interval for the mean F1 runs from 0.1749 to 0.4247, about ±0.12 around 0.2979. With 20
#   questions, that is as precisely as this fixture pins the model's F1 down.
# - The spider's lower score is fair: the answer gives the spider's half of the explanation and says
#   nothing about insects. But F1 would punish a terse answer that *was* complete just as hard. It
#   charges for everything an answer leaves out, whether or not a human would.

# %% [markdown]
# ## 3. Where F1 forgives, and where it is fooled
#
# F1 gives partial credit to a correct paraphrase, but it cannot tell which word carries the meaning. In
# the six pairs below, every wrong answer outscores every correct paraphrase. And some of the model's
# own answers earn credit from words like "the" alone.
#
# F1 was designed for answers that are *nearly* right. It counts shared words, and it has no idea which
# words matter. The six pairs are hand-written: three correct
# paraphrases, and three wrong answers that reuse the reference's wording.

# %%
# NBVAL_CHECK_OUTPUT
pairs = [  # (prediction, reference, is the prediction right?)
    ("Japan's capital city is Tokyo.", "Tokyo is the capital city of Japan.", True),
    ("Penguins are unable to fly.", "Penguins cannot fly.", True),
    ("Honey is made by bees from flower nectar.", "Bees make honey from the nectar of flowers.", True),
    ("The capital of France is Berlin", "The capital of France is Paris", False),
    ("Water boils at 50 degrees Celsius at sea level.", "Water boils at 100 degrees Celsius at sea level.", False),
    ("Penguins can fly.", "Penguins cannot fly.", False),
]
lexical = pd.DataFrame([{"prediction": p, "reference": r, "right": ok, "exact_match": ec.exact_match(p, r),
                         "token_f1": round(ec.token_f1(p, r), 4)} for p, r, ok in pairs])
lexical

# %%
right, wrong = lexical[lexical["right"]], lexical[~lexical["right"]]
assert (lexical["exact_match"] == 0).all(), f"expected EM 0 for all six, got {lexical['exact_match'].tolist()}"  # EM gives all six nothing
assert (right["token_f1"] > 0).all()  # F1 forgives the paraphrases partly...
assert wrong["token_f1"].min() > right["token_f1"].max()  # ...but every wrong answer outscores every right one
print(f"best right answer {right['token_f1'].max():.4g} < worst wrong answer {wrong['token_f1'].min():.4g}")

# %% [markdown]
# "The capital of France is Berlin" shares five of its six tokens with the reference and scores 0.8333.
# "Penguins can fly." flips the meaning, yet it still beats the correct "Penguins are unable to fly."
# (0.6667 against 0.5).
# The one word that decides whether the answer is right weighs no more than "the".
#
# The model's own answers show the weakness too. A wrong answer can score above 0
# through **function words** alone. These are words such as "the", "is" and "a", which hold a sentence
# together but carry no content of their own. Below, for every answer with F1 > 0, are the tokens it
# shares with its reference.

# %%
FUNCTION_WORDS = {"a", "an", "the", "is", "are", "of", "in", "on", "at", "to", "and"}
rows = []
for rec in records:
    shared = Counter(rec["prediction_normalised"].split()) & Counter(rec["reference_normalised"].split())
    if rec["score"] > 0:
        rows.append({"prediction": rec["prediction"], "shared tokens": " ".join(sorted(shared.elements())),
                     "token_f1": round(rec["score"], 4), "only function words": set(shared) <= FUNCTION_WORDS})
shared_df = pd.DataFrame(rows)
shared_df

# %%
# NBVAL_CHECK_OUTPUT
free = shared_df[shared_df["only function words"]]
print(f"{len(free)} of {len(shared_df)} non-zero scores come from function words alone,"
      f" worth {free['token_f1'].sum() / len(records):.4g} of the mean F1 {result.value:.4g}")
assert len(free) == 4 and len(shared_df) == 14, f"expected 4 of 14 from function words alone, got {len(free)} of {len(shared_df)}"
assert free.set_index("prediction")["shared tokens"].to_dict() == {
    "Pease answer this. What does the Sun?": "the", "Pacific Ocean is the largest ocean on Earth.": "is",
    "Gint fes beeeat feeezes at a a a a atel .": "a a", "The Sun is the clof the Earth.": "the the"}
assert free["token_f1"].max() > 0.2, free["token_f1"].max()

# %% [markdown]
# Four of the 14 non-zero scores come from function words alone. Together they add 0.03229 to the mean
# F1 of 0.2979, about 11% of it. Two of those four answers, with the questions they were given:

# %%
# NBVAL_CHECK_OUTPUT
for rec in records:  # two answers that score on function words alone, with their questions
    if rec["prediction"] in ("Pacific Ocean is the largest ocean on Earth.", "The Sun is the clof the Earth."):
        print(f"question:  {rec['instruction']}\nanswer:    {rec['prediction']}\nreference: {rec['reference']}\n")

# %% [markdown]
# `"Pacific Ocean is the largest ocean on Earth."` is a fluent, true sentence, and it is the model's
# answer to *why a whale is not a fish*. It shares only `"is"` with the reference, and it scores 0.11. The heart
# answer, `"The Sun is the clof the Earth."`, is about something else entirely. It still scores 0.24,
# because it says `"the"` three times and its reference says it twice, so two `"the"`s are shared.
#
# **How sure are we?**
# - The six pairs were written by hand. "Every wrong answer outscores every right one" is asserted for
#   these six pairs only: three paraphrases and three wrong answers.

# %% [markdown]
# ## 4. Punctuation kept or stripped
#
# Stripping punctuation raises the shipped model's mean F1 from 0.2979 to 0.3258. The SQuAD normaliser,
# which also drops articles, *lowers* it to 0.2843.
#
# `ec.normalise_f1` keeps punctuation, so `"Paris."` and `"Paris"` share nothing. The official SQuAD
# script's normaliser (`ec.normalise_squad`) strips ASCII punctuation, and it also drops the articles
# *a*, *an* and *the*. ASCII punctuation means the 32 symbols of Python's `string.punctuation`, such as
# `.`, `,`, `!` and `?`.

# %%
# NBVAL_CHECK_OUTPUT
for text in ["Paris.", "The U.S.A. is big!", "Tokyo is the capital city of Japan."]:
    print(f"{text!r:38} f1: {ec.normalise_f1(text)!r:38} squad: {ec.normalise_squad(text)!r}")
assert ec.token_f1("Paris.", "Paris") == 0.0
assert ec.token_f1("Paris.", "Paris", normalise=ec.normalise_squad) == 1.0

# %% [markdown]
# Since `normalise_squad` changes two things at once, we also write a third policy that strips
# punctuation but keeps the articles, so that we can tell the two effects apart. It is not in evalcore,
# just one more reasonable choice. We then re-score the model's *same* answers under each normaliser
# (no new generation).

# %%
STRIP_PUNCT = str.maketrans("", "", string.punctuation)

def normalise_no_punct(text):  # a third policy, not in evalcore: strip ASCII punctuation, keep articles
    return ec.normalise_f1(text.translate(STRIP_PUNCT))

def fixture_mean(score_fn, recs=records):
    return float(np.mean([score_fn(r["prediction"], r["reference"]) for r in recs]))


# %%
# NBVAL_CHECK_OUTPUT
bag_kept = fixture_mean(ec.token_f1)
bag_no_punct = fixture_mean(lambda p, r: ec.token_f1(p, r, normalise=normalise_no_punct))
bag_squad = fixture_mean(lambda p, r: ec.token_f1(p, r, normalise=ec.normalise_squad))
print(f"punctuation kept (evalcore)     {bag_kept:.4g}")
print(f"punctuation stripped            {bag_no_punct:.4g}  ({bag_no_punct - bag_kept:+.4g})")
print(f"SQuAD: punctuation and articles {bag_squad:.4g}  ({bag_squad - bag_kept:+.4g})")

# %%
assert abs(bag_kept - result.value) < 1e-12  # re-scoring reproduces the eval
assert bag_no_punct > bag_kept > bag_squad  # stripping punctuation helps; dropping articles too takes back more
assert round(bag_no_punct - bag_kept, 4) == 0.0278, bag_no_punct - bag_kept

# %% [markdown]
# Which answers moved, and why? The table keeps only the rows where some policy disagrees with evalcore's.

# %%
punct_df = pd.DataFrame([{"prediction": r["prediction"], "reference": r["reference"],
                          "kept": r["score"],
                          "no punct": ec.token_f1(r["prediction"], r["reference"], normalise=normalise_no_punct),
                          "squad": ec.token_f1(r["prediction"], r["reference"], normalise=ec.normalise_squad)}
                         for r in records]).round(4)
moved = punct_df[(punct_df["no punct"] != punct_df["kept"]) | (punct_df["squad"] != punct_df["kept"])]
moved

# %%
assert (punct_df["no punct"] >= punct_df["kept"]).all()  # on this fixture stripping punctuation never hurts
assert (punct_df["squad"] < punct_df["kept"]).any()  # but dropping articles does: "the" no longer counts
by_pred = punct_df.set_index("prediction")
assert by_pred.loc["Jupiter is the largest planet.", ["kept", "no punct"]].tolist() == [0.5714, 0.7143]
assert by_pred.loc["The Sun is the clof the Earth.", ["kept", "squad"]].tolist() == [0.2353, 0.0]
assert len(moved) == 14, f"expected 14 answers to move, got {len(moved)}"
print(f"{len(moved)} of {len(punct_df)} answers change score")


# %% [markdown]
# Two rows show the two effects:
# - **Punctuation.** `"Jupiter is the largest planet."` against `"Jupiter is the largest planet in our
#   solar system."` goes from 0.5714 to 0.7143 once punctuation is stripped. Its full stop had hidden
#   `"planet"`.
# - **Articles.** The off-topic heart answer, `"The Sun is the clof the Earth."`, falls from 0.2353 to 0
#   under SQuAD's rules, because its free `"the"`s are gone.
#
# On this model the two effects pull in opposite directions, and the articles win. SQuAD's normaliser,
# which does both, gives a *lower* mean than evalcore's, while stripping punctuation alone gives a
# higher one.
#
# **How sure are we?**
# - Which effect wins is a fact about this model's answers, not about the normalisers. On this fixture,
#   stripping punctuation never lowered an answer's score.
# - Neither policy is wrong. But a score reported without its normaliser cannot be compared with another.

# %% [markdown]
# ## 5. Bag or set
#
# A bag counts every copy of a token. A **set** counts each distinct token once, however often it
# appears. The frameworks are split between the two. The choice moves the shipped model's mean F1 by
# about 3%. It moves the mean F1 of the under-trained checkpoint (100 steps, lesson 01's exercise 1),
# which babbles, by about 40%.
#
# Who counts what:
# - **a bag** (`Counter`): the SQuAD scripts, evalcore, and OpenAI evals (`f1_score`);
# - **a set**: HELM and lighteval. Both build Python `set`s of normalised tokens, although lighteval's
#   docstring says "bag of words".
#
# Inspect changed sides, so a token F1 needs its version beside it. inspect-ai 0.3.260 counted a set,
# and 0.3.285 counts a bag. Take the prediction "Paris Paris" against the reference "Paris". Version
# 0.3.260 gave it 1.0, and 0.3.285 gives it 0.67. (Inspect rounds F1 to 2 decimals.)
#
# We write the set variant here, labelled as the alternative definition it is, and use evalcore's bag
# F1 beside it.

# %% tags=["live"]
# Set F1: the bag formula on set()s of normalised tokens, with evalcore's empty rule; defines: set_f1
# ALTERNATIVE ON PURPOSE (not evalcore's definition): set-based F1, as HELM and lighteval compute it
# (and inspect-ai 0.3.260 did). Each distinct token counts once. evalcore's bag F1 is ec.token_f1.
def set_f1(prediction, reference, normalise=ec.normalise_f1):
    pred, ref = set(normalise(prediction).split()), set(normalise(reference).split())
    if not pred or not ref:
        return float(pred == ref)  # evalcore's empty rule, so only bag -> set changes (HELM: 0.0 here)
    return 2 * len(pred & ref) / (len(pred) + len(ref))


# %%
# NBVAL_CHECK_OUTPUT
degenerate = [("Paris Paris Paris Paris", "Paris"), ("New York", "New York New York"),
              ("Tokyo Tokyo is is the the capital capital", "Tokyo is the capital"),
              ("the the the", "the cat sat on the mat")]
deg_df = pd.DataFrame([{"prediction": p, "reference": r, "bag F1 (ec.token_f1)": round(ec.token_f1(p, r), 4),
                        "set F1": round(set_f1(p, r), 4)} for p, r in degenerate])
deg_df

# %%
assert ec.token_f1("Paris Paris Paris Paris", "Paris") == 0.4 and set_f1("Paris Paris Paris Paris", "Paris") == 1.0
assert set_f1("Tokyo Tokyo is is the the capital capital", "Tokyo is the capital") == 1.0  # stuttering is free
assert set_f1("the the the", "the cat sat on the mat") < ec.token_f1("the the the", "the cat sat on the mat")
# Inspect's two versions: a bag rounded to 2 decimals (0.3.285) against a set (0.3.260)
assert round(ec.token_f1("Paris Paris", "Paris"), 2) == 0.67 and set_f1("Paris Paris", "Paris") == 1.0

# %% [markdown]
# A set forgives repetition completely. Saying "Paris" four times, or stuttering every word, scores a
# perfect 1.0. The bag charges for each extra copy. Two rows of the table show other cases:
# - **"New York"** against "New York New York" is the reverse case. The reference repeats a word, and the
#   set stops counting it. So the set scores it 1.0, where the bag gives 0.6667.
# - **"the the the"** scores *lower* as a set. The reference contains "the" twice, and the bag credits
#   "the the the" for both.
#
# How fast does the bag's penalty grow? For "Paris" said $k$ times against "Paris", bag F1 is $2/(k+1)$.

# %%
ks = np.arange(1, 11)
bag_curve = [ec.token_f1(" ".join(["Paris"] * k), "Paris") for k in ks]
set_curve = [set_f1(" ".join(["Paris"] * k), "Paris") for k in ks]
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(ks, bag_curve, "o-", label="bag F1 (ec.token_f1) = 2 / (k + 1)")
ax.plot(ks, set_curve, "s--", label="set F1 (HELM / lighteval style)")
ax.set(xlabel='k: times the prediction repeats "Paris"', ylabel='F1 against the reference "Paris"',
       title="Repetition: the bag charges for every extra copy, the set never does", ylim=(0, 1.08))
ax.legend()
plt.show()

# %%
assert all(abs(b - 2 / (k + 1)) < 1e-12 for k, b in zip(ks, bag_curve))
assert set_curve == [1.0] * len(ks)


# %% [markdown]
# Does this matter for real outputs? The shipped model repeats itself often. Here are its answers that
# contain a repeated token, under both definitions.

# %%
def repeats(text):  # how many tokens are copies of an earlier one
    tokens = ec.normalise_f1(text).split()
    return len(tokens) - len(set(tokens))

rep_df = pd.DataFrame([{"prediction": r["prediction"], "reference": r["reference"],
                        "repeats": repeats(r["prediction"]),
                        "bag F1": r["score"], "set F1": set_f1(r["prediction"], r["reference"])}
                       for r in records if repeats(r["prediction"])]).round(4)
assert len(rep_df) == 9, f"expected 9 answers with a repeated token, got {len(rep_df)}"  # 9 of the 20 answers repeat a token
moved = np.sign(rep_df["set F1"] - rep_df["bag F1"])
assert (moved > 0).sum() == 3 and (moved < 0).sum() == 2, moved.tolist()  # three up, two down
rep_df

# %% [markdown]
# Nine of the twenty answers repeat a token, but the differences are small and go both ways:
# - **The set raises three.** Two are the stuttering Tokyo and Pacific answers. The third is the whale
#   answer ("Pacific Ocean is the largest ocean ..."), which shares only "is". As a bag, its 8 tokens
#   against the reference's 10 give 2·1/(8+10) = 0.1111. As a set, its second "ocean" and the
#   reference's second "a" drop out of the lengths: 2·1/(7+9) = 0.125.
# - **It lowers two**: the answers to the frog and heart questions. Each repeats a word that its
#   reference also repeats. The frog answer (`"Gint fes ... a a a a atel ."`) repeats `"a"`, and so
#   does its reference, "A frog starts life as a tadpole ...". The heart answer (`"The Sun is the clof
#   the Earth."`) repeats `"the"`, and so does its reference, "The heart pumps blood to every part of
#   the body". So the set keeps one match where the bag kept two.
#
# The under-trained checkpoint (100 steps) is a better test. It babbles `"Pun the the the ..."`. Such
# stuck, repetitive text is called *degenerate* output, and it is what a set forgives.

# %%
early = ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH)  # under-trained: ec.EARLY_CHECKPOINT_STEPS = 100 steps
early_result = ec.token_f1_eval(early, tok, fx["f1"])
early_records = early_result.per_example
print(early_records[1]["prediction"], "| repeats:", repeats(early_records[1]["prediction"]))

# %%
# NBVAL_CHECK_OUTPUT
change = {}
for name, recs in [("shipped", records), ("early", early_records)]:
    bag, st = fixture_mean(ec.token_f1, recs), fixture_mean(set_f1, recs)
    change[name] = st / bag - 1
    print(f"{name:8} bag F1 {bag:.4g}   set F1 {st:.4g}   change {100 * change[name]:+.3g}%")

# %%
assert 0 < change["shipped"] < 0.05  # the shipped model: a few per cent
assert change["early"] > 0.3  # the babbling model: its score rises by more than 30%

# %% [markdown]
# The set barely moves the shipped model's mean F1 (+2.96%). It lifts the babbling early checkpoint's
# by 40.5%, from 0.06032 to 0.08476.
#
# **How sure are we?**
# - Both changes re-score the same answers, so on these answers they come from the definition alone,
#   not from sampling. As sizes for other questions they are rough. The early checkpoint's 40.5% is a
#   rise of 0.024 on a mean of only 0.06.
# - The shipped model's small change is the net of changes that go both ways. Over all 20 answers the
#   set raises seven and lowers two. Besides the three raised answers in the table, four rise because
#   their reference repeats a word (such as "the" or "at") that the set counts only once.
#
# *Sources:* OpenAI evals, `evals/elsuite/utils.py` (`f1_score`). HELM,
# `src/helm/benchmark/metrics/evaluate_reference_metrics.py` (`f1_score` calls nltk's `f_measure` on
# `set`s). lighteval, `src/lighteval/metrics/metrics_sample.py` (`F1_score.compute_one_item`). Inspect,
# `src/inspect_ai/scorer/_classification.py` (`_to_words` returned a `set` in 0.3.260, and
# `_to_word_counts` returns a `Counter` in 0.3.285).

# %% [markdown]
# ## 6. One set of answers, five numbers
#
# When you report token F1, say which normaliser you used and whether you counted a bag or a set. The
# definition alone moves the shipped model's score from 0.2843 to 0.3258.
#
# Here we put it together: the same answers, scored under five F1 definitions. Each combines a
# normaliser of section 4 (punctuation kept, punctuation stripped, or SQuAD's) with a way of counting of
# section 5 (a bag or a set). Five of the six combinations are shown: a set with punctuation stripped is left out. The
# last variant (a set of SQuAD-normalised tokens) is the closest of these to HELM's F1. It is not
# HELM's exactly: for one, HELM scores an empty side 0.0 (Exercise 4).

# %%
# NBVAL_CHECK_OUTPUT
VARIANTS = {
    "bag, punct kept (evalcore)": ec.token_f1,
    "bag, punct stripped": lambda p, r: ec.token_f1(p, r, normalise=normalise_no_punct),
    "bag, SQuAD norm. (SQuAD script)": lambda p, r: ec.token_f1(p, r, normalise=ec.normalise_squad),
    "set, punct kept": set_f1,
    "set, SQuAD norm. (HELM-like)": lambda p, r: set_f1(p, r, normalise=ec.normalise_squad),
}
SHIPPED, EARLY = f"shipped ({ec.CHECKPOINT_STEPS} steps)", f"early ({ec.EARLY_CHECKPOINT_STEPS} steps)"
models = {SHIPPED: records, EARLY: early_records}
variant_scores = pd.DataFrame({m: {v: fixture_mean(fn, recs) for v, fn in VARIANTS.items()}
                               for m, recs in models.items()}).round(4)
variant_scores

# %%
fig, ax = plt.subplots(figsize=(9, 4.5))
x = np.arange(len(variant_scores))
for i, m in enumerate(variant_scores.columns):
    bars = ax.bar(x + (i - 0.5) * 0.38, variant_scores[m], width=0.38, label=m)
    ax.bar_label(bars, fmt="%.3f", fontsize=8)
ax.set_xticks(x, [v.replace(", ", ",\n").replace(" (", "\n(") for v in variant_scores.index], fontsize=9)
ax.set(xlabel="F1 definition: counting, normaliser", ylabel="mean token F1 on the fixture",
       title="The same answers under five F1 definitions")
ax.legend()
plt.show()

# %%
shipped, early_scores = variant_scores[SHIPPED], variant_scores[EARLY]
assert shipped.idxmin() == "bag, SQuAD norm. (SQuAD script)"  # here the SQuAD script is the strictest
assert shipped.idxmax() == "bag, punct stripped"
assert shipped.rank()["bag, punct kept (evalcore)"] == 2, \
    f"expected evalcore's F1 to rank 2nd lowest, got rank {shipped.rank()['bag, punct kept (evalcore)']}"  # the second strictest
assert shipped.max() - shipped.min() > 0.04, shipped.max() - shipped.min()  # the definition alone moves it by > 0.04
assert (variant_scores[SHIPPED] > variant_scores[EARLY]).all()  # the ranking holds under all five
assert early_scores["bag, SQuAD norm. (SQuAD script)"] == 0.0, early_scores.to_dict()  # every shared token of the early model was "the"
print(f"shipped model: {shipped.min():.4g} to {shipped.max():.4g} depending on the definition")

# %%
# NBVAL_CHECK_OUTPUT
paired = ec.paired_difference(early_result, result)  # shipped - early, question by question
print(f"evalcore's F1, shipped - early: {paired['diff']:.4g}, "
      f"95% CI [{paired['ci95'][0]:.4g}, {paired['ci95'][1]:.4g}] over {paired['n']} paired questions")

# %%
assert paired["ci95"][0] > 0 and paired["n"] == len(fx["f1"]), f"expected a CI above 0 over {len(fx['f1'])} questions, got {paired}"  # the interval excludes 0

# %% [markdown]
# The shipped model's score ranges from 0.2843 to 0.3258 from policy alone. That is a spread of 0.04,
# about a seventh of its value. Of the five, evalcore's own choice gives the second lowest score. The
# spread is **systematic**: the same answers, scored differently, so it comes from the definition, not
# from chance.
#
# The babbling early checkpoint swings far more. "Set, punct kept" gives it 0.0848. Both SQuAD-normalised
# definitions leave it exactly 0, because every token it shared with a reference was `"the"`.
#
# The gap between the two checkpoints is of another size. Paired on the same 20 questions (the paired
# difference of lesson 01), the shipped model's F1 (evalcore's definition) is 0.2376 higher. Its 95%
# interval runs from 0.1319 to 0.3486, well clear of 0. So the ranking is unlikely to come from which
# questions were drawn. Decoding is greedy: the model always takes its single most likely next token,
# so nothing is sampled (lesson 04 comes back to this). The answers therefore add no sampling noise of
# their own. All five
# definitions put the two checkpoints in the same order.
#
# **How sure are we?**
# - That is one 95% interval over 20 questions, for one definition of F1. At n = 20 a percentile
#   interval tends to run a little narrow. The other four definitions give the same order of scores,
#   but none was given an interval.
# - Each checkpoint is one training run. The interval says nothing about how much another training seed
#   would move either score. So the result is about these two checkpoints, not about 600 against 100
#   training steps in general.
# - A difference of 0.04 between two papers could come entirely from their F1 code. If both papers
#   score the same answers, the gap is all code. If they compare two models, it could also come from
#   sampling, depending on the questions. On *different* sets of 20 questions it easily could: each
#   score alone is known only to about ±0.12, and a difference of two independent scores more loosely
#   still. On the *same* questions only the part of the draw that the two scores share cancels, and
#   that can be little: the paired interval above still runs about ±0.11. Only the interval of the
#   paired difference says whether 0.04 is more than sampling.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
# - Token F1 = $2 \cdot \text{overlap} / (\text{len(pred)} + \text{len(ref)})$. It is the harmonic mean
#   of precision (overlap / len(pred)) and recall (overlap / len(ref)). The overlap is a `Counter`
#   intersection, so a repeated word counts at most as often as the reference has it.
# - The empty cases are conventions. In evalcore (and SQuAD v2.0), both empty gives 1.0 and one empty
#   gives 0.0.
# - The shipped model scores 0.2979, with a 95% bootstrap interval over its 20 answers of 0.1749 to
#   0.4247 (`result.extras["ci95"]`). It beats the early checkpoint by 0.2376 (paired 95% interval
#   0.1319 to 0.3486).
# - Six of its 20 answers share nothing with the reference, and none matches it exactly. A terse answer
#   ("A spider has eight legs.", asked why a spider is not an insect) gets precision 1 but F1 0.625.
# - F1 gives partial credit to paraphrases that EM scores 0, but it cannot tell which word carries the
#   meaning. "The capital of France is Berlin" scores 0.8333, more than any correct paraphrase we tried.
#   Four of the model's non-zero scores come from "the", "is" and "a" alone.
# - Stripping punctuation raises the model's mean F1 from 0.2979 to 0.3258. The SQuAD normaliser, which
#   also drops articles, *lowers* it to 0.2843, because this model earns more from articles than it
#   loses to punctuation.
# - Set-based F1 (HELM, lighteval, and inspect-ai before it switched to a bag) forgives repetition.
#   "Paris" said four times scores 1.0 instead of 0.4. The set barely moves the shipped model (+3%), but
#   it lifts the babbling early checkpoint by about 40%.
#
# **What it did not**
# - It did not pin down the model's F1 on questions beyond these 20 to better than about ±0.12.
# - It did not show whether the 0.04 spread between F1 definitions matters when two models are compared
#   (say, by two papers with different F1 code). The spread is systematic (the same answers, scored
#   differently). It is smaller than the 95% interval of one 20-question score. But the yardstick for
#   comparing two models is the interval of their *difference*, and that depends on whether the two
#   scores share their questions.
# - It did not say which definition is right. The lesson shows what each counts, not which to choose.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell. Its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: Several references
#
# `ec.token_f1` also takes a list of references, as exact match did in lesson 02. Before running
# anything, predict `ec.token_f1("Tokyo", ["Tokyo", "Tokyo is the capital city of Japan."])`. Then
# store that score in `best_f1`. Store the F1 of `"Tokyo"` against each of the two references on its own in
# `per_reference`, a list of two floats in the same order.
#
# *Hint:* write your prediction down before you run anything. Then compare it with the two scores on
# their own.

# %%
# Exercise 1: store the F1 of "Tokyo" against the two references in `best_f1`, and its F1 against
#   each one alone in `per_reference`.
### BEGIN SOLUTION
references = ["Tokyo", "Tokyo is the capital city of Japan."]
best_f1 = ec.token_f1("Tokyo", references)
per_reference = [ec.token_f1("Tokyo", r) for r in references]
print("best over the list:", best_f1, "| each alone:", [round(f, 4) for f in per_reference])
### END SOLUTION
sentence_counts = ec.f1_counts("Tokyo", "Tokyo is the capital city of Japan.")  # (overlap, len pred, len ref)
assert len(per_reference) == 2 and abs(per_reference[0] - ec.token_f1("Tokyo", "tokyo")) < 1e-12, \
    f"expected two scores, the first against the reference 'Tokyo' alone; got {per_reference!r}"
assert abs(per_reference[1] - 2 * sentence_counts[0] / (sentence_counts[1] + sentence_counts[2])) < 1e-12, \
    f"expected the F1 of 'Tokyo' against the sentence alone as the second score; got {per_reference[1]!r}"
assert best_f1 == ec.token_f1("tokyo", ["TOKYO is the capital city of Japan.", "tokyo"]), \
    f"expected the score of 'Tokyo' against the list of both references; got {best_f1!r}"
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: Word order
#
# Reverse the order of the words of `"Bees produce honey from the nectar of flowers."`. Split on
# whitespace and keep each word as it is. Store the result, joined with single spaces, in
# `reversed_sentence`, and its token F1 against the original in `reversed_f1`. What does this say about
# F1 as a measure of fluency?
#
# *Hint:* a `Counter` stores counts, not positions.

# %%
# Exercise 2: store the sentence with its words reversed in `reversed_sentence`, and its F1 against
#   the original in `reversed_f1`.
### BEGIN SOLUTION
sentence = "Bees produce honey from the nectar of flowers."
reversed_sentence = " ".join(reversed(sentence.split()))
reversed_f1 = ec.token_f1(reversed_sentence, sentence)
print(reversed_sentence, "->", reversed_f1)
### END SOLUTION
words = "Bees produce honey from the nectar of flowers.".split()  # eight distinct words
follows = {(a, b) for a, b in zip(words, words[1:])}  # each word and the word after it
yours = reversed_sentence.split()
assert sorted(yours) == sorted(words) and all((b, a) in follows for a, b in zip(yours, yours[1:])), \
    f"expected the eight words of the sentence, each followed by the word that came before it; got {reversed_sentence!r}"
assert abs(reversed_f1 - ec.token_f1(reversed_sentence, "Bees produce honey from the nectar of flowers.")) < 1e-12, \
    f"expected the token F1 of the reversed sentence against the original; got {reversed_f1!r}"
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# The reversed sentence has exactly the same bag of tokens as the original, so it scores a perfect 1.0
# although it is not English. F1 says nothing about word order, and so nothing about fluency or
# grammar: a shuffled copy of the reference is indistinguishable from the reference.

# %% [markdown]
# ### Exercise 3: Free credit
#
# Write a normaliser `no_function_words(text)` that applies `ec.normalise_f1` and then drops every token
# in `FUNCTION_WORDS`. Pass it to `ec.token_f1` (its `normalise=` argument) to re-score the shipped
# model's 20 answers, and store the mean in `content_f1`. How much lower is it than the mean F1 of
# section 2 (`result.value`)? Store that difference in `free_credit`.
#
# It is a net change, not the function words' share. Dropping them also shortens both sides, which can
# raise an answer's F1. So it differs from section 3's 0.03229, which counts only the answers whose
# shared tokens are all function words.
#
# *Hint:* `fixture_mean(lambda p, r: ec.token_f1(p, r, normalise=no_function_words))`.

# %%
# Exercise 3: define `no_function_words(text)`, store the mean F1 without function words in
#   `content_f1`, and `result.value` minus it in `free_credit`.
### BEGIN SOLUTION
def no_function_words(text):
    return " ".join(w for w in ec.normalise_f1(text).split() if w not in FUNCTION_WORDS)

content_f1 = fixture_mean(lambda p, r: ec.token_f1(p, r, normalise=no_function_words))
free_credit = result.value - content_f1
print(f"content-word F1 {content_f1:.4g} vs {result.value:.4g}: {free_credit:.4g} lower without function words (net)")
### END SOLUTION
assert no_function_words("The Sun is a STAR.") == "sun star.", \
    f"expected normalise_f1's tokens without the function words; got {no_function_words('The Sun is a STAR.')!r}"
assert abs(content_f1 - fixture_mean(lambda p, r: ec.token_f1(p, r, normalise=no_function_words))) < 1e-12, \
    f"expected the mean over the 20 answers of F1 under no_function_words; got {content_f1!r}"
assert 0 < content_f1 < result.value, f"expected a mean between 0 and the lesson's {result.value:.4g}; got {content_f1!r}"
assert abs(free_credit - (result.value - content_f1)) < 1e-12, f"expected result.value - content_f1; got {free_credit!r}"
print("Exercise 3: check passed.")

# %% [markdown]
# ### Exercise 4: A vacuous match
#
# Under `ec.normalise_squad`, what does the prediction `"The"` score against the reference `"A"`? Store
# evalcore's answer in `squad_f1`. Would HELM agree? Write `helm_f1(prediction, reference)`: set-based
# F1 on `ec.normalise_squad` tokens, with HELM's rule that a side with no tokens scores 0.0.
#
# *Hint:* normalise both first. Then look at the empty-case rule, and at the comment in `set_f1`.

# %%
# Exercise 4: store evalcore's score of "The" against "A" under ec.normalise_squad in `squad_f1`,
#   and define `helm_f1(prediction, reference)`.
### BEGIN SOLUTION
print(repr(ec.normalise_squad("The")), repr(ec.normalise_squad("A")))  # articles dropped: both empty
squad_f1 = ec.token_f1("The", "A", normalise=ec.normalise_squad)

def helm_f1(prediction, reference):
    pred, ref = set(ec.normalise_squad(prediction).split()), set(ec.normalise_squad(reference).split())
    if not pred or not ref:
        return 0.0  # HELM: an empty side scores 0, even when both are empty
    return 2 * len(pred & ref) / (len(pred) + len(ref))

print(f"evalcore {squad_f1}, HELM {helm_f1('The', 'A')}")
### END SOLUTION
assert squad_f1 == ec.token_f1("The", "A", normalise=ec.normalise_squad), \
    f"expected evalcore's token F1 of 'The' against 'A' under normalise_squad; got {squad_f1!r}"
assert all(abs(helm_f1(p, r) - set_f1(p, r, normalise=ec.normalise_squad)) < 1e-12
           for p, r in degenerate + [(rec["prediction"], rec["reference"]) for rec in records]
           if ec.normalise_squad(p) and ec.normalise_squad(r)), \
    "expected helm_f1 to equal set F1 on SQuAD-normalised tokens whenever neither side is empty"
assert helm_f1("The", "A") != squad_f1 and helm_f1("", "Paris") == helm_f1("", "") == helm_f1("the", "a"), \
    f"expected HELM's empty rule, which disagrees with evalcore here; got helm_f1('The', 'A') = {helm_f1('The', 'A')!r}"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# `ec.normalise_squad` drops the articles, so both sides are empty. evalcore, like the SQuAD v2.0 script,
# calls that a vacuous match and gives 1.0. HELM gives 0.0, because its `f1_score` turns an empty side
# into 0. Two answers that are both only an article are a rare case. But it is one more place where two
# frameworks report different numbers for the same answers.
