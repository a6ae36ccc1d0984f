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
# # 15 · Has the model seen the test? Contamination from the data side and the model side
#
# A benchmark score means little if the model trained on the benchmark. That is **contamination**:
# test items, or their answers, in the training data. Every serious evaluation report now says how
# it checked. There are two sides to the check:
#
# - **The data side.** When the training corpus is known, look in it: count the test's word n-grams
#   (runs of n consecutive words) that occur there. The GPT-3 paper chose n per benchmark, from 8 to
#   13 words for its non-synthetic benchmarks; PaLM used 8-grams.
# - **The model side.** When it is not, ask the model: a text it trained on tends to be less
#   surprising to it. **Membership inference** turns that into a score per text: was this text in
#   the training data?
#
# This course holds a case that papers on the subject rarely have: TinyGPT's complete training text,
# so we know exactly which texts it saw. We check both sides there first, then take the model-side
# scores to a real model, SmolLM2-135M-Instruct, whose training corpus we cannot search.
#
# **What you will learn**
# - how n-gram overlap is computed (normalised words, hashed n-grams), what the GPT-3 and PaLM rules
#   count as contaminated, and why 13-grams cannot check a short question;
# - that TinyGPT's fixtures share almost no 8-gram with its training text, yet every exact-match
#   answer is in it, and what that means for every TinyGPT number earlier in the course;
# - three membership scores (mean token loss, the zlib ratio, Min-K% Prob), and how to measure their
#   separation: AUC with an interval over the right unit, DeLong's interval for small groups, the
#   true-positive rate at no false positive, and what chance gives;
# - what these scores show on SmolLM2 for famous texts, close paraphrases and fresh texts, and what
#   they cannot;
# - what a practitioner reports next to a score.
#
# **Time needed:** about 90 minutes. **Going further:** about 5 minutes more.
#
# **Builds on:** lesson 01 (token losses), lesson 05 (intervals on every number), lesson 06 (a
# frozen protocol with reserved cases), lesson 11 (a Hugging Face model behind evalcore's interface)
# and lesson 13 (SmolLM2). Nothing is trained here.

# %%
# NBVAL_CHECK_OUTPUT
from collections import Counter
import itertools
import json

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
pd.set_option("display.width", 120)
pd.set_option("display.max_colwidth", 60)

tok = ec.InstructionTokenizer()
model = ec.load_pretrained()
fx = ec.load_fixtures()
training_texts = ec.tinygpt_training_texts(tok)
print(len(training_texts), "distinct texts TinyGPT trained on, for example:")
for t in training_texts[:2] + training_texts[-2:]:
    print("  ", repr(t))

# %% [markdown]
# `ec.tinygpt_training_texts` rebuilds them from the very sequences `ec.train_tinygpt` trains on
# (`ec.training_sequences`). Each sequence is cut at its special tokens (`INST`, `RESP`: lesson 07).
# So a statement, a question in one of its framings (the words around it, lesson 08) and an answer
# are each one text: the last two lines are two framings of one question. This is the whole corpus,
# exactly.
#
# ## 1. The data side: n-gram overlap
#
# By the verbatim test, TinyGPT's fixtures are all but clean (one judge question shares an 8-gram),
# yet every exact-match answer is in its training text.
#
# **The recipe**, as lm-evaluation-harness implements the GPT-3 paper's decontamination: lowercase
# the ASCII letters, delete ASCII punctuation, split on whitespace, and take every run of n
# consecutive words. A test text counts as contaminated if **any** of its n-grams occurs anywhere in
# the training corpus. (`ec.ngram_overlap` compares n-grams as 64-bit hashes, numbers computed from
# their words, for quick lookups.)
#
# **Which n?** The GPT-3 paper used n-grams twice:
#
# - to filter benchmark text out of its own training data, with 13-grams;
# - to measure each benchmark's overlap, with n chosen per benchmark. That n is the 5th percentile
#   of the examples' lengths in words, so about 95% of them are long enough to have an n-gram. It
#   is kept within 8 to 13 on the non-synthetic benchmarks (its word-scrambling tasks went down to
#   2). WebQs, PIQA and OpenBookQA have short examples, so they were checked at n = 8.
#
# The harness's `Janitor`, its decontamination code, defaults to 13, GPT-3's cap. `ec.gpt3_ngram_n`
# computes GPT-3's per-benchmark n for a list of texts.
#
# **PaLM's rule** used 8-grams and a softer test: an example is contaminated when **at least 70%**
# of its 8-grams occur. `ec.ngram_overlap` returns, per test text, the share of its n-grams found,
# and the verdict under the rule you pass (`min_share=None` for "any", `0.7` for PaLM).
#
# First, an example small enough to check by eye.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# N-gram overlap of two test sentences against a two-text corpus, n = 3; defines: demo
demo = ec.ngram_overlap(
    ["The cat sat on the mat.", "A dog slept."],
    ["Yesterday a cat sat on the mat, purring.", "Dogs sleep a lot."],
    n=3,
)
for r in demo:
    print(f"{r['text']!r}: {r['n_found']} of {r['n_ngrams']} 3-grams found, share {r['share']}, "
          f"contaminated {r['contaminated']}, found {r['found']}")

# %% [markdown]
# Three of the first sentence's four 3-grams are in the corpus: share 0.75. "The cat sat" is not ("a
# cat sat" is). "A dog slept." has only three words, so it has a single 3-gram, which is not found.
# A text shorter than n words has no n-gram at all. `ec.ngram_overlap` reports its share and verdict
# as `None`, *not checkable*, instead of calling it clean.

# %%
assert [r["share"] for r in demo] == [0.75, 0.0], [r["share"] for r in demo]
assert demo[0]["found"] == ["cat sat on", "sat on the", "on the mat"], demo[0]["found"]
assert ec.ngram_overlap(["too short"], ["too short"], n=3)[0]["contaminated"] is None

# %% [markdown]
# ### A deliberately buggy variant: no normalisation
#
# Below, **a buggy overlap written for this lesson** splits the raw text on whitespace, so "Paris."
# and "paris" are different words. A test set stored in lowercase without punctuation then looks
# clean against a corpus that holds it word for word. The correct call is beside it.

# %%
def overlap_without_normalising(test_text, corpus_texts, n):
    """BUGGY ON PURPOSE: words compared as they are written, case and punctuation included."""
    corpus = {tuple(w[i:i + n]) for t in corpus_texts for w in [t.split()] for i in range(len(w) - n + 1)}
    words = test_text.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return sum(g in corpus for g in grams) / len(grams)


leaked = "the capital city of italy is rome"  # a training statement, lowercased, full stop dropped
print("training text:", repr(next(t for t in training_texts if t.startswith("The capital city of Italy"))))
print("buggy share  :", overlap_without_normalising(leaked, training_texts, n=5))
print("evalcore     :", ec.ngram_overlap([leaked], training_texts, n=5)[0]["share"])

# %%
assert overlap_without_normalising(leaked, training_texts, n=5) < 1.0
assert ec.ngram_overlap([leaked], training_texts, n=5)[0]["share"] == 1.0

# %% [markdown]
# ### TinyGPT's fixtures against its own training text
#
# Now the real question: were the held-out fixtures of lessons 01 to 04 in TinyGPT's training text?
# We check the perplexity texts (`lm`) and the questions of the exact-match, F1 and judge fixtures,
# at four n-gram lengths.

# %%
# NBVAL_CHECK_OUTPUT
fixture_texts = {"lm": fx["lm"]} | {name: [q for q, _ in fx[name]] for name in ("em", "f1", "judge")}
gpt3_n = {name: ec.gpt3_ngram_n(texts) for name, texts in fixture_texts.items()}
print("GPT-3's n per fixture (5th percentile of length in words, within 8 to 13):", gpt3_n)
rows = []
for n in (13, 8, 5, 3):
    for name, texts in fixture_texts.items():
        recs = ec.ngram_overlap(texts, training_texts, n=n)
        checkable = [r for r in recs if r["contaminated"] is not None]
        rows.append({"n": n, "fixture": name, "texts": len(recs), "checkable": len(checkable),
                     "any n-gram found": sum(r["contaminated"] for r in checkable),
                     "PaLM rule (>= 70%)": sum(r["share"] >= 0.7 for r in checkable),
                     "mean share": np.mean([r["share"] for r in checkable]) if checkable else np.nan})
overlap_table = pd.DataFrame(rows)
print(overlap_table.round(4).to_string(index=False))

# %%
assert gpt3_n == dict.fromkeys(fixture_texts, 8), gpt3_n  # short texts: GPT-3 checks them at its floor
by_n = overlap_table.groupby("n")[["texts", "checkable", "any n-gram found"]].sum()
assert by_n.loc[13, "checkable"] == 7, f"expected 7 texts long enough for 13-grams, got {by_n.loc[13, 'checkable']}"
assert by_n.loc[13, "any n-gram found"] == 0 and by_n.loc[8, "any n-gram found"] <= 1, by_n.to_dict()
questions_at_8 = overlap_table.query("n == 8 and fixture != 'lm'")["checkable"].sum()
assert questions_at_8 == 15, f"expected 15 of the 60 questions checkable at 8-grams, got {questions_at_8}"
assert by_n.loc[3, "any n-gram found"] > by_n.loc[5, "any n-gram found"] > by_n.loc[8, "any n-gram found"]

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), sharex=True)
for name, part in overlap_table.groupby("fixture", sort=False):
    axes[0].plot(part["n"], part["checkable"] / part["texts"], marker="o", label=name)
    axes[1].plot(part["n"], part["any n-gram found"] / part["texts"], marker="o", label=name)
axes[0].set(xlabel="n (words per n-gram)", ylabel="share of the fixture's texts",
            title="Long enough to have an n-gram at all")
axes[1].set(xlabel="n (words per n-gram)", ylabel="share of the fixture's texts",
            title="At least one n-gram in TinyGPT's training text")
axes[0].set_xticks([3, 5, 8, 13])
axes[1].legend(title="fixture")
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the left panel first:
#
# - **At 13-grams**, lm-evaluation-harness's default and GPT-3's cap, none of the 60 questions can
#   be checked at all, and only 7 of the 20 perplexity texts. A question is rarely 13 words long.
# - **GPT-3's own rule would not use 13 here.** Every fixture's 5th-percentile length is under 8
#   words, so its benchmark rule would check these questions at its floor, n = 8.
# - **At 8 words** most perplexity texts (18 of 20) and a few questions (15 of 60) can be checked.
#   PaLM's 70% rule flags none of them. Just one judge question shares an 8-gram with the training
#   text. "Tell me which planet is known as the red planet." is the training question "Which planet
#   is known as the red planet?" with "Tell me" in front.
# - **Only at 5 and 3 words** do many texts "overlap", through question stems such as "what is the
#   capital of" and "at what celsius temperature does water". The fixtures reword the training
#   questions, but not every word of them.
#
# But the fixtures were written to restate the training facts in other words: `ec.load_fixtures`
# says the training text "states the same facts in other words".
# The check that matters for a question is whether its **answer** is in the training text. We ask
# `ec.ngram_overlap` with n equal to the answer's length in words: the answer then has exactly one
# n-gram, found or not.

# %%
# NBVAL_CHECK_OUTPUT
def answer_in_training(reference):
    """Whether any acceptable answer occurs, as a whole run of words, in TinyGPT's training text."""
    refs = [reference] if isinstance(reference, str) else reference
    return any(ec.ngram_overlap([r], training_texts, n=len(ec.normalise_ngram(r).split()))[0]["contaminated"]
               for r in refs)


answers_seen = {name: sum(answer_in_training(ref) for _, ref in fx[name]) for name in ("em", "f1", "judge")}
print({name: f"{k} of {len(fx[name])}" for name, k in answers_seen.items()})

# %%
assert answers_seen["em"] == 20, f"expected every exact-match answer in the training text, got {answers_seen['em']}"
assert answers_seen["f1"] < answers_seen["judge"] < 20

# %% [markdown]
# All 20 exact-match answers occur in the training text, and 17 of 20 judge answers. The F1
# references are longer, full-sentence answers (9 of 20 occur whole). The facts were all seen: the
# fixtures restate training facts by design.
#
# **What this means for the course's TinyGPT numbers.** The fixtures are held out in *wording*, not
# in *content*:
# - Lesson 01's perplexity of 7.134 is the loss on new sentences about facts TinyGPT trained on.
# - The exact match of 0.30 in lessons 02 and 05 measures whether it recalls a trained fact when
#   asked in new words. It says nothing about questions on facts it never saw (it would fail them).
# - Lesson 07's multiple-choice items are the exact-match questions, so their calibration is
#   calibration on trained facts. Lesson 08 perturbs the same questions.
#
# That was the design: the lessons needed a model that gets some answers right. But it is the reason
# none of these numbers estimates how TinyGPT does on new knowledge. A verbatim contamination check
# would have flagged almost none of them: one judge question at 8-grams, nothing at 13.
#
# *Sources:* `EleutherAI/lm-evaluation-harness`, `lm_eval/decontamination/janitor.py` and
# `decontaminate.py`; Brown et al. 2020 (GPT-3), Appendix C, Table C.1.
#
# ## 2. The model side on TinyGPT, where membership is known
#
# Two of the three scores separate trained from held-out texts far better than chance. Here both
# groups state the same facts, so what they separate is the trained *wording*.
#
# When the corpus cannot be searched, the model itself is the evidence. Three scores per text, from
# the text's next-token losses $\ell_1, \dots, \ell_T$ (nats; lesson 01):
#
# - **mean token loss** $\bar\ell = \frac1T\sum_t \ell_t$, the log-perplexity: lower for text the
#   model trained on (Carlini et al. 2021, "Extracting Training Data from Large Language Models").
# - **the zlib ratio** $\bar\ell \,/\, z$, with $z$ the length in bytes of the text's UTF-8
#   compressed by zlib. Text that compresses well (repetitive, predictable) is easy for any model,
#   so its loss is weighed against that. Lower: more likely seen.
# - **Min-K% Prob** (Shi et al., "Detecting Pretraining Data from Large Language Models", ICLR
#   2024): the mean log-probability of the k% least likely tokens, $\lfloor kT/100 \rfloor$ of them.
#   An unseen text tends to hold a few very surprising tokens; a seen one fewer. Higher: more likely
#   seen. We use k = 20.
#
# `ec.membership_scores` computes all three for each text.
#
# The members: TinyGPT's 60 training statements, word for word (scored alone here; in training each
# followed the others of its topic). The non-members: the 20 perplexity texts, held out and written
# the same way, about the same facts.

# %% tags=["live"]
# Membership scores for the 60 training statements and the 20 held-out texts; defines: statements, member_scores, heldout_scores
statements = json.loads(ec.FIXTURES_PATH.read_text(encoding="utf-8"))["train"]["statements"]
member_scores = ec.membership_scores(model, tok, statements, k=20)
heldout_scores = ec.membership_scores(model, tok, fx["lm"], k=20)
pd.DataFrame(member_scores[:3] + heldout_scores[:3])[["text", "n_tokens", "mean_loss", "zlib_ratio", "min_k_prob"]].round(4)

# %% [markdown]
# Each score is a short function of the token losses, so check one by hand: Min-20% Prob of the
# first statement is minus the mean of its largest fifth of token losses.

# %%
first = member_scores[0]
losses = sorted(first["token_nll"], reverse=True)
by_hand = -np.mean(losses[: len(losses) * 20 // 100])
print(f"{first['text']!r}: {first['n_tokens']} tokens, Min-20% Prob by hand {by_hand:.4f}, evalcore {first['min_k_prob']:.4f}")
assert abs(by_hand - first["min_k_prob"]) < 1e-12, (by_hand, first["min_k_prob"])

# %% [markdown]
# How well does each score separate the two groups? `ec.membership_auc` answers with the AUC (lesson
# 09): the chance that a random member scores as "more seen" than a random non-member (ties count
# half; the same number as scikit-learn's `roc_auc_score`), with a percentile bootstrap interval
# (lesson 01).
#
# **Resample what, though?** The texts were not drawn one by one. The 60 statements state 24 facts,
# 2 or 3 each. The 20 held-out texts restate 19 of those facts, one each, plus one text that states
# them all. Texts about one fact go together: an easy fact is easy in every wording. So the bootstrap
# draws whole groups, a cluster bootstrap (lesson 06). Each of the 24 facts comes with its
# statements and, for 19 of them, its held-out text. The text on all the facts is a 25th group of
# its own.
# (`ec.tinygpt_statement_facts` and `fx["facts"]["lm"]` give each text's fact.)
#
# The membership literature also reports the **true-positive rate at a low false-positive rate**. A
# threshold on the score flags texts: the true-positive rate (TPR) is the share of members it flags,
# the false-positive rate (FPR) the share of non-members. With 20 non-members, an FPR under 5% means
# flagging none of them. The figure is then the count of members more member-like than the most
# member-like held-out text. One text sets it, so we print it as a count, with no interval.
#
# Last, a **permutation test**: shuffle the member/non-member labels 2,000 times, computing the AUC
# each time. These AUCs are the **null distribution**, what chance gives at these group sizes. The
# p-value (lesson 05) is the share of shuffles whose AUC reaches the real one, counting the real
# labelling as one of them (so 1/2001 is the smallest it can be). It is one-sided: it asks only
# whether members look *more* seen. The figure after the
# table plots each score's **ROC curve**, TPR against FPR as the threshold moves; the AUC is the
# area under it.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# AUC per score, facts resampled: ec.membership_auc(members, non-members, higher_is_member, groups_members=..., groups_nonmembers=...); defines: auc_table, fmt, tiny_auc
def auc_table(members, nonmembers, interval="ci95", **groups):
    """Per score: the AUC, its 95% CI (`interval`: the groups' bootstrap "ci95", or DeLong's,
    clustered by the groups if given), DeLong's and the percentile bootstrap with single texts,
    the members flagged at no false positive, and chance (single texts relabelled)."""
    rows = {}
    for score, higher in ec.MEMBERSHIP_SCORES.items():
        m, n = [x[score] for x in members], [x[score] for x in nonmembers]
        r = ec.membership_auc(m, n, higher_is_member=higher, **groups)
        by_text = ec.membership_auc(m, n, higher_is_member=higher)
        floor = 1 / 2001  # the smallest p 2,000 permutations can give
        rows[score] = {"AUC": r["auc"], "95% CI": r[interval], "DeLong, texts": by_text["ci95_delong"],
                       "texts resampled": by_text["ci95"], "resampled": r["resampled"],
                       "flagged, no false positive": f"{r['n_flagged']} of {r['n_members']}",
                       "p (permutation)": "< 0.001" if r["p_value"] <= floor else r["p_value"],
                       "chance, middle 95%": r["null95"]}
    return pd.DataFrame(rows).T


def fmt(x):
    return f"[{x[0]:.3g}, {x[1]:.3g}]" if isinstance(x, list) else x if isinstance(x, str) else f"{x:.4g}"


statement_fact = ec.tinygpt_statement_facts()
tiny_auc = auc_table(member_scores, heldout_scores, groups_members=[statement_fact[s] for s in statements],
                     groups_nonmembers=fx["facts"]["lm"])
print(tiny_auc.drop(columns="DeLong, texts").map(fmt).to_string())

# %%
assert set(tiny_auc["resampled"]) == {"25 groups"}, set(tiny_auc["resampled"])  # 24 facts + the text on all
assert all(tiny_auc.loc[s, "95% CI"][0] > tiny_auc.loc[s, "chance, middle 95%"][1] for s in ["mean_loss", "min_k_prob"])
assert tiny_auc.loc["min_k_prob", "AUC"] > tiny_auc.loc["zlib_ratio", "AUC"]
assert tiny_auc.loc["mean_loss", "flagged, no false positive"] == "26 of 60", tiny_auc.loc["mean_loss"].to_dict()

# %%
# NBVAL_CHECK_OUTPUT
for name, group in (("trained", member_scores), ("held out", heldout_scores)):
    print(f"{name:>8}: {np.mean([len(s['text'].encode()) for s in group]):.0f} bytes, "
          f"{np.mean([s['n_tokens'] for s in group]):.0f} tokens scored on average")
assert np.mean([len(s["text"]) for s in heldout_scores]) > 1.5 * np.mean([len(s["text"]) for s in member_scores])

# %%
def roc_points(members, nonmembers, higher_is_member):
    """(FPR, TPR) at every threshold, flagging a text when its score is at least the threshold."""
    sign = 1 if higher_is_member else -1
    m, n = sign * np.asarray(members), sign * np.asarray(nonmembers)
    thresholds = np.r_[np.inf, np.unique(np.r_[m, n])[::-1]]
    return [(n >= t).mean() for t in thresholds], [(m >= t).mean() for t in thresholds]


fig, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].hist([m["mean_loss"] for m in member_scores], bins=16, range=(0, 4), alpha=0.6, label="trained on (60)")
axes[0].hist([x["mean_loss"] for x in heldout_scores], bins=16, range=(0, 4), alpha=0.6, label="held out (20)")
axes[0].set(xlabel="mean token loss (nats)", ylabel="texts", title="TinyGPT: mean loss per text")
axes[0].legend()
for score, higher in ec.MEMBERSHIP_SCORES.items():
    fpr, tpr = roc_points([m[score] for m in member_scores], [x[score] for x in heldout_scores], higher)
    axes[1].step(fpr, tpr, where="post", label=f"{score} (AUC {tiny_auc.loc[score, 'AUC']:.3f})")
axes[1].plot([0, 1], [0, 1], color="grey", ls="--", lw=0.8)
axes[1].set(xlabel="false-positive rate (held-out texts flagged)", ylabel="true-positive rate (members flagged)",
            title="ROC curves, known membership")
axes[1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# With the truth known, the model side works, and not perfectly:
#
# - Mean loss separates trained from held-out texts with AUC 0.825 [0.748, 0.902], and Min-20% Prob
#   with 0.8975 [0.824, 0.964], facts resampled. Both are far above what random labels give (their
#   middle 95% lies between about 0.36 and 0.64; "< 0.001" is that floor, 1/2001).
# - Yet a threshold that flags none of the 20 held-out texts finds only 26 of the 60 trained texts
#   by mean loss, a count set by the single easiest held-out text.
# - The zlib ratio does worst (0.6733 [0.563, 0.777]), for a reason that is not about membership.
#   The held-out texts are longer on average (90 bytes against the members' 45, printed above). A
#   longer text has a longer compressed form, and that alone lowers its ratio, making it look
#   "seen".
#
# Resampling single texts instead gives [0.724, 0.908] and [0.806, 0.968]: the wrong unit, and here
# a little wider, not narrower. Two effects pull against each other:
#
# - A fact's 2-3 statements are near repeats. Treating them as independent makes an interval too
#   narrow.
# - A fact is drawn with its own held-out text, and an easy fact is easy on both sides. So a draw of
#   easy facts moves both groups, and the AUC barely moves, as in a paired test. Resampling the two
#   groups apart loses that, which makes the interval too wide.
#
# Here the second wins. The unit is set by how the texts came about, not by which interval comes
# out narrower.
#
# **How sure are we?**
# - The permutations relabel single texts, ignoring the facts. As with the bootstrap above, that can
#   make chance's range too narrow or too wide; the AUCs here lie far outside it either way.
# - The intervals are percentile bootstraps over 25 groups, which at AUCs near 0.9 may cover a
#   little under 95% (coverage: lesson 05). The simulation in section 3 measures 87-89% at 12 texts
#   a group; 25 groups were not simulated.
#
# A held-out text says "France is a country in Europe, and its capital city is Paris"; TinyGPT
# trained on "The capital of France is Paris." So here the scores separate the **wording** it
# trained on from new wording about the same facts: verbatim membership, what they are built to
# detect, not "has this knowledge been seen".
#
# *Sources:* the zlib ratio is exactly `np.log(p1)/zlib_entropy` in `swj0419/detect-pretrain-code`,
# `src/run.py`, and Carlini et al.'s `ftramer/LM_Memorization`, `extraction.py`, ranks by its
# inverse. Min-K%'s count is `int(len(all_prob)*ratio)` in `src/run.py`, which reports its negative.
#
# ## 3. A real model: SmolLM2-135M-Instruct
#
# On SmolLM2, famous texts score as more seen than fresh ones. Paraphrases it never saw word for
# word may too, but only suggestively. With 12 texts a group, every interval is wide. Paired with its
# own paraphrase, a famous text costs less.
#
# SmolLM2-135M was trained on 2 trillion tokens (its model card lists FineWeb-Edu, DCLM, The Stack
# and new datasets Hugging Face filtered), then tuned to follow instructions: supervised
# fine-tuning, then DPO (preference tuning) on UltraFeedback. We score the instruct model on plain
# text: what it shows of its pretraining text is what survived that tuning. None of the corpus can
# be searched here, so we turn to the model side, with `data/contamination.json`: 36 texts in three
# groups of 12.
#
# - **famous**: 12 public-domain or permissively licensed texts, each with its source and licence,
#   copied all over the web (the Gettysburg Address, the preamble of the US Constitution, the Zen of
#   Python, the MIT License, openings of novels, a nursery rhyme). SmolLM2 very likely saw each of
#   them, many times. *Very likely* is an assumption: we cannot check it.
# - **paraphrase**: a close paraphrase of each, written for this course (same content, other words).
# - **fresh**: a text written for this course in the same genre and of about the same length as each
#   famous text, with invented content (a speech opening, a club's preamble, a list of aphorisms, a
#   licence for recipes). Written after SmolLM2's release, none of it can be in its training data.

# %%
# NBVAL_CHECK_OUTPUT
items = ec.load_contamination()
print(Counter(t["group"] for t in items))
print(pd.DataFrame([t for t in items if t["group"] == "famous"])[["id", "licence"]].to_string(index=False))

# %% [markdown]
# The model loads through `ec.load_smollm2` (lesson 13): the Q4_1 GGUF file installed by
# `make setup`, dequantized once to float32 and cached, then wrapped as every evalcore model is. No
# BOS token (lesson 01) is added, so each text's first token is context and is not scored, the same
# for all three groups.

# %% tags=["live"]
# Load SmolLM2 and score all 36 texts in one pass: ec.membership_scores(smol, smol_tok, texts); defines: smol, smol_tok, smol_scores, group_of
smol, smol_tok = ec.load_smollm2()
smol_scores = ec.membership_scores(smol, smol_tok, [t["text"] for t in items], k=20)
group_of = {g: [s for s, t in zip(smol_scores, items) if t["group"] == g] for g in ec.CONTAMINATION_GROUPS}
print(smol.config.name, "|", sum(s["n_tokens"] for s in smol_scores), "scored tokens")

# %% [markdown]
# First, one triplet token by token: the Gettysburg Address, its paraphrase and its fresh
# counterpart.

# %%
triplet = {t["group"]: s for s, t in zip(smol_scores, items) if t["of"] == "gettysburg"}
fig, ax = plt.subplots(figsize=(11, 3.8))
for group, colour in zip(ec.CONTAMINATION_GROUPS, ["tab:red", "tab:blue", "tab:green"]):
    nll = np.array(triplet[group]["token_nll"])
    smooth = np.convolve(nll, np.ones(5) / 5, mode="valid")
    ax.plot(nll, color=colour, alpha=0.25, lw=0.8)
    ax.plot(np.arange(2, 2 + len(smooth)), smooth, color=colour, label=f"{group}: mean {nll.mean():.3g} nats")
ax.set(xlabel="token position", ylabel="token loss (nats)", ylim=(0, 14),
       title="SmolLM2 on the Gettysburg Address, its paraphrase and a fresh speech (faint: per token; bold: mean of 5)")
ax.legend()
plt.show()

# %%
# NBVAL_CHECK_OUTPUT
famous_tokens = [smol_tok.decode([i]) for i in smol_tok.encode(items[0]["text"])[1:]]
print("first 25 scored tokens of the famous text, with their loss:")
print(" ".join(f"{w.strip()}:{x:.2g}" for w, x in zip(famous_tokens[:25], triplet["famous"]["token_nll"][:25])))

# %% [markdown]
# A partial memory, not a recitation:
#
# - The opening words cost as much as anywhere ("score" 14 nats after "Four" alone, "seven" 6.9,
#   "fathers" 8.5): no recitation from the first words.
# - From about the fifteenth token, "a new nation, conceived in Liberty, and dedicated to the
#   proposition that all men are created equal", the famous text drops to losses near zero for
#   stretches.
# - Its mean (2.56 nats) ends a nat below the paraphrase's.
#
# Now all 36 texts: the mean loss per text by group, and each famous text joined to its paraphrase
# and its fresh counterpart.

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for i, group in enumerate(ec.CONTAMINATION_GROUPS):
    ys = [s["mean_loss"] for s in group_of[group]]
    axes[0].scatter(np.full(len(ys), i) + np.linspace(-0.12, 0.12, len(ys)), ys, alpha=0.8)
axes[0].set_xticks(range(3), ec.CONTAMINATION_GROUPS)
axes[0].set(ylabel="mean token loss (nats)", title="SmolLM2: mean loss per text, by group")
famous_ids = [t["id"] for t in items if t["group"] == "famous"]
by_pair = {(t["of"], t["group"]): s["mean_loss"] for s, t in zip(smol_scores, items)}
for fid in famous_ids:
    axes[1].plot(range(3), [by_pair[fid, g] for g in ec.CONTAMINATION_GROUPS], marker="o", alpha=0.6)
    axes[1].annotate(fid, (0, by_pair[fid, "famous"]), xytext=(-4, 0), textcoords="offset points",
                     ha="right", va="center", fontsize=7)
axes[1].set_xticks(range(3), ec.CONTAMINATION_GROUPS)
axes[1].set_xlim(-0.9, 2.2)
axes[1].set(title="each famous text with its paraphrase and fresh text")
plt.tight_layout()
plt.show()

# %% [markdown]
# The famous texts spread widely. A few are close to recited (the Declaration at 1.03 nats a token,
# the MIT License, the preamble), while Moby-Dick's opening and The Raven cost as much as fresh
# text. A model of 135 million parameters recites only some of what it very likely saw.
#
# Now the separation. The table gives each AUC three intervals: DeLong's with the triplets as
# clusters (the one we read), DeLong's with the texts independent, and the percentile bootstrap over
# single texts. At 12 texts a group, a percentile bootstrap of the AUC is the wrong tool: an AUC
# near 1 leaves it little room above, and its interval comes out too narrow. (In section 2, at 25
# groups, it may cover only a little under 95%.)
#
# **DeLong's interval** (`ec.delong_auc_interval`) does better. It starts from each text's share of
# won pairs: for a famous text, the share of fresh texts it beats; for a fresh text, the share of
# famous texts that beat it. How much those shares vary gives the AUC's variance. The interval is
# built on the logit scale, log(AUC / (1 - AUC)), so it stays inside 0 to 1.
#
# But DeLong's takes the texts as independent, and these are not. They come in 12 **matched
# triplets**: a famous text, its paraphrase and a fresh text of the same genre and length, so a
# triplet's three texts share a genre, a length and a difficulty. Each comparison uses two of a
# triplet's three texts, one on each side. The clustered version adds how much those two move
# together: their **covariance**, positive when one tends to be high where the other is. The 95% CI
# below is that clustered DeLong, each triplet a cluster. The permutation p still relabels single
# texts, ignoring the triplets, so it can be off either way ("Going further" keeps them).

# %%
# NBVAL_CHECK_OUTPUT
comparisons = {"famous vs fresh": ("famous", "fresh"), "famous vs paraphrase": ("famous", "paraphrase"),
               "paraphrase vs fresh": ("paraphrase", "fresh")}
triplet_of = {g: [t["of"] for t in items if t["group"] == g] for g in ec.CONTAMINATION_GROUPS}
smol_auc = pd.concat({name: auc_table(group_of[a], group_of[b], interval="ci95_delong",
                                      groups_members=triplet_of[a], groups_nonmembers=triplet_of[b])
                      for name, (a, b) in comparisons.items()})
columns = ["AUC", "95% CI", "DeLong, texts", "texts resampled", "flagged, no false positive", "p (permutation)"]
print(smol_auc[columns].rename(columns={"95% CI": "95% CI (triplets)"}).map(fmt).to_string())

# %%
loss_ff = smol_auc.loc[("famous vs fresh", "mean_loss")]
assert loss_ff["95% CI"][0] > 0.5, loss_ff["95% CI"]  # famous texts are easier than fresh ones
assert loss_ff["texts resampled"][1] == 1.0 > loss_ff["95% CI"][1], loss_ff.to_dict()  # the bootstrap runs into 1
widths = [ci[1] - ci[0] for ci in smol_auc["95% CI"]]
assert 0.3 < min(widths) and max(widths) < 0.45, widths  # 12 texts per group: every interval is wide
assert smol_auc.loc[("paraphrase vs fresh", "mean_loss"), "95% CI"][0] > 0.5  # paraphrases look "seen" too
para_fresh = smol_auc.loc["paraphrase vs fresh"]
assert para_fresh.loc["min_k_prob", "95% CI"][0] < 0.5 < para_fresh.loc["min_k_prob", "DeLong, texts"][0]  # only unclustered
assert all(para_fresh.loc[s, "95% CI"][0] < para_fresh.loc[s, "DeLong, texts"][0] for s in ["mean_loss", "min_k_prob"])
assert loss_ff["flagged, no false positive"] == "10 of 12", loss_ff["flagged, no false positive"]

# %% [markdown]
# Famous texts score as more seen than fresh ones: mean loss puts a famous text below a fresh one
# 89% of the time (AUC 0.8889 [0.592, 0.978], triplets as clusters; [0.609, 0.976] with the texts
# independent).
#
# - The point estimates order the scores: mean loss, then Min-20% Prob (0.8403 [0.541, 0.959]), then
#   the zlib ratio. One might conclude that the intervals, overlapping almost entirely, cannot rank
#   them. But overlap is not the test: two AUCs on the same 24 texts are compared by their
#   difference, with the triplets resampled. Mean loss's lead over Min-20% Prob has an interval
#   reaching 0 ("Going further"), so these texts cannot rank the scores.
# - The percentile bootstrap would have said [0.708, 1] and [0.632, 1]: it runs into 1, and at this
#   size it is too narrow.
# - At no false positive, 10 of the 12 famous texts lie below the easiest fresh text, a count that
#   one fresh text sets (exercise 4 walks up the other false-positive rates).
# - Famous against paraphrase, mean loss gives 0.7778 [0.523, 0.918] ([0.502, 0.924] with the texts
#   independent: here the pairing narrows the interval; as in section 2, it can go either way).
#   Those two groups are pairs with the same content, and the paired view below is the better test.
# - The **paraphrases**, which SmolLM2 never saw word for word, also score as "more seen" than the
#   fresh texts (mean loss AUC 0.8125 [0.506, 0.948]), but only just, and this is one of the table's
#   nine AUCs. With the texts taken as independent, DeLong's interval would have said [0.571, 0.934].
#   For Min-20% Prob the triplets' interval [0.475, 0.915] includes 0.5, an AUC of chance.
#
# **How sure are we?**
#
# - In a simulation in `tests/test_15_contamination.py` (12 independent texts against 12, a true AUC
#   of 0.9), the percentile bootstrap covers the true AUC in 87 to 89% of samples, DeLong's interval
#   on the logit scale in 95 to 96%. The triplets' version, the one we read, was not simulated: with
#   only 12 clusters to estimate the covariance from, it may cover a little less.
# - The table holds nine AUCs, three scores on three comparisons, and we read several of them: a
#   **family** (lesson 08). Read as one, famous against fresh by mean loss still holds under a
#   permutation that keeps the triplets; paraphrase against fresh is only suggestive. "Going
#   further" shows both.
#
# Two things are mixed in every one of these numbers:
#
# - **familiar content**: a paraphrase of the Gettysburg Address is about a civil war, a nation, a
#   battlefield, in an order the model knows; the model predicts it better even in new words;
# - **text difficulty**: the fresh texts are hard, full of invented names (Orla, Skerry Point, the
#   Riverside Allotment Society), and a name the model has never seen is expensive whatever the
#   membership.
#
# A paired view of each famous text against its own paraphrase (same content, same length, no
# invented names) holds the first fixed and removes most of the second. What is left is the
# wording, plus whatever makes a paraphrase harder text in itself. Below, the difference in mean
# loss per pair, with a percentile bootstrap
# interval over the 12 pairs and, since a percentile bootstrap runs narrow at 12, the t interval
# beside it. (The **t interval** is the mean plus or minus a Student's t quantile times the standard
# error, lesson 07.)

# %%
# NBVAL_CHECK_OUTPUT
paired = {}
for other in ("paraphrase", "fresh"):
    diffs = [by_pair[fid, "famous"] - by_pair[fid, other] for fid in famous_ids]
    t_half = stats.t.ppf(0.975, len(diffs) - 1) * np.std(diffs, ddof=1) / np.sqrt(len(diffs))
    paired[other] = {"mean difference (nats)": np.mean(diffs), "95% CI": list(ec.bootstrap_ci(diffs)),
                     "t interval": [np.mean(diffs) - t_half, np.mean(diffs) + t_half],
                     "pairs with famous lower": f"{sum(d < 0 for d in diffs)} of {len(diffs)}"}
    print(f"famous minus {other:10}: {np.mean(diffs):.3g} nats, bootstrap {fmt(paired[other]['95% CI'])}, "
          f"t {fmt(paired[other]['t interval'])}, famous lower in {paired[other]['pairs with famous lower']}")

# %%
assert paired["paraphrase"]["95% CI"][1] < 0 and paired["fresh"]["95% CI"][1] < 0
assert paired["paraphrase"]["t interval"][1] < 0 and paired["fresh"]["t interval"][1] < 0  # the wider one too
assert paired["fresh"]["mean difference (nats)"] < paired["paraphrase"]["mean difference (nats)"]

# %% [markdown]
# Paired, a famous text costs less:
#
# - than its own paraphrase, 0.893 nats a token on average (bootstrap [-1.58, -0.284], t [-1.64,
#   -0.145]), in 9 of 12 pairs;
# - than its fresh counterpart, 1.36 nats (bootstrap [-1.97, -0.743], t [-2.09, -0.635]), in 11 of
#   12.
#
# Both intervals leave out 0 either way; the t interval is the wider, and the more trustworthy at 12
# pairs. The paraphrase carries the same content, so the first gap holds no content effect: the
# exact wording's part is at most that gap (why "at most": below). What share of the measured gap to
# fresh text is that? A ratio of two means over the same 12 pairs, so its interval resamples the
# pairs, both differences of a pair together.

# %%
# NBVAL_CHECK_OUTPUT
pair_diffs = [[by_pair[fid, "famous"] - by_pair[fid, "paraphrase"], by_pair[fid, "famous"] - by_pair[fid, "fresh"]]
              for fid in famous_ids]


def share_of_gap(values, weights):
    """Mean paraphrase gap over mean fresh gap, per resample: values (12, 2), weights (R, 12) -> (R,)."""
    return (weights @ values[:, 0]) / (weights @ values[:, 1])


gap_share = np.mean([d[0] for d in pair_diffs]) / np.mean([d[1] for d in pair_diffs])
gap_share_ci = ec.bootstrap_ci(pair_diffs, statistic=share_of_gap)
print(f"famous-minus-paraphrase gap as a share of the measured famous-minus-fresh gap: {gap_share:.3g} "
      f"[{gap_share_ci[0]:.2g}, {gap_share_ci[1]:.2g}] (percentile bootstrap, 12 pairs: approximate)")

# %%
assert gap_share_ci[0] < 0.5 < gap_share_ci[1], gap_share_ci  # a half fits the data as well as two thirds

# %% [markdown]
# About two thirds, 0.656, but anywhere from a third to nine tenths [0.34, 0.92]: 12 pairs pin it
# down no better than that.
#
# **How sure are we?**
# - The interval is approximate: a percentile bootstrap of a ratio at 12 pairs, the small-sample
#   setting this lesson distrusts.
# - It is a share of the **measured** gap to fresh text, which is itself inflated by the fresh
#   texts' invented names.
# - Against that measured gap it is an **upper bound** on the wording's share, not a measure of it.
#   A paraphrase can cost more because it is harder text in itself (ours sometimes choose rarer
#   words, "forefathers", "Eighty-seven years back"), which has nothing to do with membership and is
#   counted in the same gap.
# - As a share of the gap that membership alone causes, it is bounded in neither direction: a
#   harder paraphrase pushes the ratio up, and the invented names inflate its denominator, which
#   pushes it down.
#
# ### The data side on the same texts
#
# Would a verbatim check catch paraphrased contamination? Take the famous texts as the "test set"
# and the paraphrases as the "corpus".

# %%
# NBVAL_CHECK_OUTPUT
famous_texts = [t["text"] for t in items if t["group"] == "famous"]
para_texts = [t["text"] for t in items if t["group"] == "paraphrase"]
for n, min_share in [(13, None), (8, None), (8, 0.7)]:
    recs = ec.ngram_overlap(famous_texts, para_texts, n=n, min_share=min_share)
    rule = "any n-gram" if min_share is None else f"share >= {min_share}"
    print(f"n = {n:2}, {rule:13}: {sum(bool(r['contaminated']) for r in recs)} of 12 famous texts flagged; "
          f"largest share {max(r['share'] for r in recs):.3g}")

# %%
palm_flags = sum(bool(r["contaminated"]) for r in ec.ngram_overlap(famous_texts, para_texts, n=8, min_share=0.7))
assert palm_flags == 0, f"expected PaLM's rule to flag no famous text against the paraphrases, got {palm_flags}"

# %% [markdown]
# No: one famous text in 12 is flagged by the "any 8-gram" rule, through a name the paraphrase keeps
# ("this Constitution for the United States of America"). No 13-gram is shared, and PaLM's 70% rule
# flags none. The model side could not tell verbatim from paraphrased contamination either: a model
# trained on the paraphrases would score the originals as easier, exactly as SmolLM2 scores the
# paraphrases of texts it did see.
#
# ### What this can and cannot show
#
# - **A low loss is evidence, not proof.** Text can be easy because it is predictable, common in
#   style, short on names, or because the model knows its content. Only the paired comparison (same
#   content, other words) isolates the wording, and even that assumes the paraphrase is not harder
#   in itself (ours sometimes choose rarer words, above).
# - **A high loss is not proof of absence either.** Moby-Dick's opening is almost certainly in
#   SmolLM2's training data, and costs as much as a fresh text: a small model forgets what it saw a
#   few times.
# - **Paraphrased contamination evades verbatim tests**, by construction, on the data side (the
#   n-gram rules above) and on the model side (a paraphrase scores between famous and fresh).
# - **With a few dozen texts the intervals are wide** (0.32 to 0.44 here). With 12 non-members the
#   lowest false-positive rate we can resolve is 1/12, so "TPR at FPR < 5%" means "at no false
#   positive at all", a count that one text sets. Carlini et al. ("Membership
#   Inference Attacks From First Principles", 2022) argue for TPR at 0.1% FPR or lower, which takes
#   thousands of non-members.
# - **The groups differ in more than membership.** Studies that drew members and non-members from
#   the same distribution (Duan et al., "Do Membership Inference Attacks Work on Large Language
#   Models?", 2024; Maini et al., "LLM Dataset Inference", 2024) report that these scores then do
#   little better than chance. They add that high AUCs on benchmarks built from older against newer
#   text come partly from that shift. Our fresh texts are newer and full of invented names: the same
#   caveat applies to the AUCs above.
#
# *Sources:* the model card, `HuggingFaceTB/SmolLM2-135M-Instruct` on the Hugging Face hub. The
# clustered variance: Obuchowski, Biometrics 1997 (`groups_members`, `groups_nonmembers`).
#
# ## 4. What a practitioner does
#
# - **When the training corpus is known, check overlap**, at an n that can check your texts
#   (13-grams cannot check a short question; GPT-3 went down to 8 for short examples), and check the
#   answers, not only the questions.
# - **When it is not, use the model side**, paired where you can (the test item against a paraphrase
#   of itself), and read it as evidence, with its interval.
# - **Report the check next to the score**: the method, the n, the rule, how many items it could
#   check and how many it flagged. A score with "no contamination found" means little unless the
#   check could have found it.
# - **Keep a private, fresh test set.** Lesson 06's reserved cases are exactly that: written for the
#   course, frozen before the model was scored, never published with answers. Against TinyGPT's
#   training text they share nothing:

# %%
# NBVAL_CHECK_OUTPUT
task06 = ec.load_notices()
reserved_06 = [c["question"] for c in task06["cases"] if c["split"] == "reserved"]
notice_check = ec.ngram_overlap(list(task06["notices"].values()) + reserved_06, training_texts, n=5)
em_result = ec.with_interval(ec.exact_match_eval(model, tok, fx["em"]))
report_entry = {
    "eval": "exact_match", "value": em_result.value, "ci95": [round(x, 3) for x in em_result.extras["ci95"]],
    "contamination_check": {
        "method": "word 8-grams, lm-evaluation-harness normalisation, against the full training text",
        "checkable": int(overlap_table.query("n == 8 and fixture == 'em'")["checkable"].iloc[0]),
        "flagged": int(overlap_table.query("n == 8 and fixture == 'em'")["any n-gram found"].iloc[0]),
        "answers_in_training": f"{answers_seen['em']} of {len(fx['em'])}",
    },
}
print(report_entry)
print(f"lesson 06's notices and reserved questions sharing a 5-gram with TinyGPT's training text: "
      f"{sum(bool(r['contaminated']) for r in notice_check)} of {len(notice_check)}")

# %%
assert not any(r["contaminated"] for r in notice_check)

# %% [markdown]
# The report entry says what the headline 0.30 is: 2 of 20 questions could be checked at 8 words,
# none was flagged, and all 20 answers are in the training text. A reader now knows that this number
# measures recall of trained facts, which is all the fixture can measure.
#
# ## Summary
#
# **What this lesson established**
# - TinyGPT's training text is known exactly (`ec.tinygpt_training_texts`: 732 distinct texts). At
#   13-grams none of its 60 fixture questions can even be checked, and none of the 7 checkable
#   perplexity texts is flagged.
# - GPT-3's own rule would check these fixtures at n = 8: 15 of the 60 questions are long enough,
#   and one judge question is flagged.
# - Yet all 20 exact-match answers and 17 of 20 judge answers occur in the training text. The
#   fixtures are held out in wording, not in content, so every TinyGPT score in the course measures
#   recall of trained facts under new wording.
# - Where membership is known (60 trained statements, 20 held-out texts; 24 facts resampled whole,
#   with the text that states them all as a 25th group), mean token loss separates them with AUC
#   0.825 [0.748, 0.902] and Min-20% Prob with 0.8975 [0.824, 0.964]. Chance gives 0.36 to 0.64.
#   The zlib ratio does worse, hurt by a length difference between the groups.
# - On SmolLM2, famous texts score as more seen than fresh ones: mean loss AUC 0.8889 [0.592,
#   0.978], Min-20% Prob 0.8403 [0.541, 0.959] (DeLong's, the 12 matched triplets as clusters). Ten
#   of the 12 famous texts lie below the easiest fresh text.
# - Paraphrases, which SmolLM2 never saw word for word, may score as more seen too, but only
#   suggestively. Mean loss's 0.8125 [0.506, 0.948] only just clears a half, and not once the
#   table's nine AUCs are counted as a family; Min-20% Prob's interval includes a half.
# - Paired against its own paraphrase, a famous text costs 0.893 nats a token less (t interval
#   [-1.64, -0.145]; 9 of 12 pairs). That is 0.656 [0.34, 0.92] (approximate) of the measured gap to
#   fresh text (1.36 nats): an upper bound on the wording's share of that measured gap, since a
#   paraphrase can also be harder text. The measured gap itself is inflated by the fresh texts'
#   invented names.
# - Verbatim n-gram rules miss paraphrases: PaLM's rule flags none of the 12 famous texts against
#   their paraphrases, and "any 8-gram" flags one, through a proper name.
#
# **What it did not**
# - Whether SmolLM2 trained on any particular text: we assumed the famous texts were in its data and
#   cannot check it.
# - How these scores do on a real benchmark with members and non-members from one distribution: 12
#   texts per group show mechanisms and give intervals 0.32 to 0.44 wide.
# - The triplets are matched by hand (genre, length), so the clustered intervals assume the matching
#   is what ties a triplet's texts together; the table's permutation p-values ignore it.
# - Whether contamination *raised a score*: that needs the same model scored on clean and
#   contaminated items of equal difficulty, which neither model here allows.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer.

# %% [markdown]
# ### Exercise 1: A question's 5-gram share, by hand
#
# PaLM's rule compares this share with 70%, at 8-grams; most of our questions are too short for
# 8-grams, so use 5. Write `share_by_hand(question)`: the share of the question's word 5-grams that
# occur in any of TinyGPT's `training_texts`. Normalise with `ec.normalise_ngram`, split on
# whitespace, build the set of every training 5-gram (never across two texts), and count the
# question's 5-grams found there. The check runs it on the four questions in `exercise_questions`
# (their shares all differ, none is 0). It also runs it on a text spanning the end of one training
# text and the start of the next, where a corpus joined into one text goes wrong.
#
# *Hint:* `tuple(words[i:i + 5]) for i in range(len(words) - 4)` lists a text's 5-grams.

# %%
exercise_questions = [fx["judge"][8][0], fx["judge"][1][0], fx["em"][18][0], fx["judge"][15][0]]
# Exercise 1: write `share_by_hand(question)`, the share of the question's word 5-grams found in
#   TinyGPT's training text.
### BEGIN SOLUTION
def five_grams(text):
    words = ec.normalise_ngram(text).split()
    return [tuple(words[i:i + 5]) for i in range(len(words) - 4)]


corpus_grams = {g for t in training_texts for g in five_grams(t)}


def share_by_hand(question):
    grams = five_grams(question)
    return sum(g in corpus_grams for g in grams) / len(grams)


for q in exercise_questions:
    print(f"{share_by_hand(q):.3g}  {q}")
### END SOLUTION
mistake = ec.ngram_share_mistake(share_by_hand, exercise_questions, training_texts, n=5)
assert mistake is None, mistake
print("Exercise 1: check passed.")

# %% [markdown]
# ### Exercise 2: Min-K% Prob at another k
#
# The token losses of every SmolLM2 text are in `smol_scores` (key `"token_nll"`), so another k
# needs no new forward pass. Compute Min-40% Prob for each text, then the AUC of famous against
# fresh texts with `ec.membership_auc`. Store the AUC in `auc_k40`. Is k = 40 better or worse than k
# = 20 here, and is the difference bigger than the intervals?

# %%
# Exercise 2: store the AUC of Min-40% Prob, famous texts against fresh ones, in `auc_k40`.
### BEGIN SOLUTION
min40 = {g: [ec.min_k_prob(s["token_nll"], k=40) for s in group_of[g]] for g in ("famous", "fresh")}
result_k40 = ec.membership_auc(min40["famous"], min40["fresh"], higher_is_member=True)
auc_k40 = result_k40["auc"]
print(f"Min-40% Prob AUC {auc_k40:.4g} {fmt(result_k40['ci95_delong'])}; "
      f"Min-20%: {fmt(smol_auc.loc[('famous vs fresh', 'min_k_prob'), 'AUC'])} "
      f"{fmt(smol_auc.loc[('famous vs fresh', 'min_k_prob'), '95% CI'])}")
### END SOLUTION
mistake = ec.min_k_auc_mistake(auc_k40, [s["token_nll"] for s in group_of["famous"]],
                               [s["token_nll"] for s in group_of["fresh"]], k=40)
assert mistake is None, mistake
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# Min-40% Prob averages more tokens, so it moves toward the plain mean loss. Here its AUC lies
# between Min-20% Prob's and mean loss's. The differences between k values are a few hundredths, and
# DeLong's intervals are about 0.4 wide. With 12 texts per group, nothing here can choose k. Shi et
# al. report results for several k on WikiMIA, a benchmark of hundreds of texts.

# %% [markdown]
# ### Exercise 3: Are the training questions members too?
#
# TinyGPT also trained on questions, every training question in each of its framings. Score the
# question framings in `training_texts` that end in "?" (members) and the 60 fixture questions of
# the exact-match, F1 and judge fixtures (non-members) with `ec.membership_scores`. Compute the AUC
# of mean token loss with `ec.membership_auc`, resampling whole facts on both sides as section 2
# did: the fixture questions ask about the same facts as the trained ones.
# `ec.tinygpt_question_facts()` gives each training question's fact, `ec.question_framings(q)` its
# framings, and `fx["facts"]` the fact of each fixture question. Store the whole result dict in
# `question_auc`. Compare it with the statements' AUC: which is easier to detect, and why might that
# be?

# %%
# Exercise 3: store ec.membership_auc's result for mean token loss, trained question framings
#   against the fixture questions, whole facts resampled on both sides, in `question_auc`.
### BEGIN SOLUTION
trained_questions = [t for t in training_texts if t.endswith("?")]
fixture_questions = [q for name in ("em", "f1", "judge") for q, _ in fx[name]]
fact_of = {f: fact for q, fact in ec.tinygpt_question_facts().items() for f in ec.question_framings(q)}
member_losses = [s["mean_loss"] for s in ec.membership_scores(model, tok, trained_questions)]
nonmember_losses = [s["mean_loss"] for s in ec.membership_scores(model, tok, fixture_questions)]
question_auc = ec.membership_auc(member_losses, nonmember_losses, higher_is_member=False,
                                 groups_members=[fact_of[t] for t in trained_questions],
                                 groups_nonmembers=[f for name in ("em", "f1", "judge") for f in fx["facts"][name]])
by_text = ec.membership_auc(member_losses, nonmember_losses, higher_is_member=False)
print(f"{len(trained_questions)} trained framings of {len(set(fact_of.values()))} facts' questions, "
      f"{len(fixture_questions)} held out: AUC {question_auc['auc']:.4g}, {question_auc['resampled']} resampled "
      f"{fmt(question_auc['ci95'])}, single texts {fmt(by_text['ci95'])}")
### END SOLUTION
mistake = ec.question_auc_mistake(question_auc, model, tok, training_texts, fx)
assert mistake is None, mistake
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# The 338 trained question framings separate from the 60 fixture questions about as well as the
# statements did: AUC 0.811 [0.748, 0.881] against 0.825 [0.748, 0.902], no difference these
# intervals can show. The unit is the fact on both sides, for the reason section 2 gave. Each
# training question appears in up to six framings ("Question: ...", lowercased, without its question
# mark), near-copies of each other. Five questions ask about each of the 22 facts the training
# questions cover. And the fixture questions ask about the same facts in other words (an easy fact
# is easy on both sides). Drawing whole facts gives [0.748, 0.881]. That is 24 groups: the 22, each
# with its framings and its fixture questions, and 2 facts that only fixture questions ask about.
# Single texts give [0.748, 0.872], a little narrower. Here the difference is small, and only
# resampling the right unit could tell.

# %% [markdown]
# ### Exercise 4: Every false-positive rate 12 texts can show
#
# With 12 fresh texts as non-members, a threshold flags 0, 1, 2, ... of them: false-positive rates
# of 0, 1/12, 2/12, ... The table's "flagged, no false positive" is the first step. Take every step
# for SmolLM2's mean loss, famous against fresh. Store in `flagged_counts` a list whose entry j is
# the number of famous texts a threshold flags while it flags exactly the j easiest fresh texts, for
# j = 0, 1, ..., 12. (A famous text is flagged when its mean loss is below the (j+1)-th lowest fresh
# loss; at j = 12 every famous text is.) How far up does the count move in the first steps, and what
# does the first one rest on?

# %%
# Exercise 4: store the number of famous texts flagged at each number of fresh texts flagged, 0 to 12,
#   in `flagged_counts`.
### BEGIN SOLUTION
famous_losses = [s["mean_loss"] for s in group_of["famous"]]
bars = sorted(s["mean_loss"] for s in group_of["fresh"]) + [np.inf]
flagged_counts = [sum(x < bar for x in famous_losses) for bar in bars]
print(flagged_counts)
easiest = sorted((s["mean_loss"], t["of"]) for s, t in zip(smol_scores, items) if t["group"] == "fresh")[:2]
print("the two easiest fresh texts (the famous text each is matched with):", [(of, f"{x:.4g}") for x, of in easiest])
### END SOLUTION
mistake = ec.flagged_counts_mistake(flagged_counts, [s["mean_loss"] for s in group_of["famous"]],
                                    [s["mean_loss"] for s in group_of["fresh"]])
assert mistake is None, mistake
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# The count is 10 of 12 at no false positive, and stays at 10 while up to four fresh texts are
# flagged. It reaches 11 at five (FPR 5/12), and 12 only at 11 of 12. The stragglers: The Raven
# costs more than 5 of the 12 fresh texts, Moby-Dick's opening more than 11.
#
# The first step rests on the easiest fresh text, in effect on two. Moby-Dick's fresh counterpart
# and the MIT licence's cost the same to four digits (3.659 nats a token), and the count of 10 is
# the same whichever is first. Write those texts a little more plainly and "TPR at FPR < 5%" would
# change. So it is reported as a count, read as a description of these 24 texts, not as a rate with
# an interval.

# %% [markdown]
# ## Going further: nine AUCs as a family
#
# Section 3's table holds nine AUCs, and we read several of them. Two checks it cannot make itself:
#
# - **Bonferroni's correction** (lesson 08) for nine comparisons. Each interval is widened to
#   1 - 0.05/9, about 99.4%, so that the chance any of the nine misses its truth is at most 5%.
#   Each p is compared with 0.05/9.
# - **A permutation within triplets**: swap the two labels only inside a triplet, in all 2^12 = 4,096
#   ways. Unlike the table's p, it keeps the matching. The real labelling is one of the 4,096.
#
# The cell also computes one difference of two AUCs on the same texts, mean loss's minus Min-20%
# Prob's, famous against fresh. `ec.auc_difference_with_interval` (lesson 09) resamples whole
# triplets and takes both AUCs on each resample. Last, it counts the famous-fresh pairs the two
# scores call differently.

# %%
def within_triplet_p(a, b, score):
    """One-sided exact permutation p of group a's AUC against group b's, the two labels swapped only
    within a triplet, all 2**12 ways: chance that keeps the matching."""
    value = {(t["of"], t["group"]): s[score] for s, t in zip(smol_scores, items)}
    sign = 1 if ec.MEMBERSHIP_SCORES[score] else -1  # higher: more seen
    x = sign * np.array([[value[f, a], value[f, b]] for f in famous_ids])  # (12, 2)
    swaps = np.array(list(itertools.product((False, True), repeat=len(x))))  # (4096, 12); row 0 as labelled
    m, n = np.where(swaps, x[:, 1], x[:, 0]), np.where(swaps, x[:, 0], x[:, 1])
    diff = m[:, :, None] - n[:, None, :]
    aucs = ((diff > 0) + 0.5 * (diff == 0)).mean((1, 2))  # (4096,)
    return float(np.mean(aucs >= aucs[0] - 1e-12))


family = pd.DataFrame({(name, score): {
    "AUC": smol_auc.loc[(name, score), "AUC"],
    "99.4% CI (triplets)": ec.delong_auc_interval(
        [x[score] for x in group_of[a]], [x[score] for x in group_of[b]], ec.MEMBERSHIP_SCORES[score],
        confidence=1 - 0.05 / 9, groups_members=triplet_of[a], groups_nonmembers=triplet_of[b]),
    "p (within triplets)": within_triplet_p(a, b, score)}
    for name, (a, b) in comparisons.items() for score in ec.MEMBERSHIP_SCORES}).T
print(family.map(fmt).to_string())
pooled = group_of["famous"] + group_of["fresh"]
more_seen = {s: [x[s] if ec.MEMBERSHIP_SCORES[s] else -x[s] for x in pooled] for s in ec.MEMBERSHIP_SCORES}
lead = ec.auc_difference_with_interval(more_seen["mean_loss"], more_seen["min_k_prob"], [1] * 12 + [0] * 12,
                                       triplet_of["famous"] + triplet_of["fresh"])
print(f"famous vs fresh, AUC of mean loss minus AUC of Min-20% Prob: {lead['diff']:+.3f} "
      f"{fmt(list(lead['ci95']))} (triplets resampled)")
# each famous-fresh pair, (12 famous, 12 fresh): +1 the famous text scores as more seen, 0 a tie, -1 less
won = {s: np.sign(np.subtract.outer(more_seen[s][:12], more_seen[s][12:])) for s in ("mean_loss", "min_k_prob")}
only_loss, only_min_k = won["mean_loss"] > won["min_k_prob"], won["min_k_prob"] > won["mean_loss"]
print(f"of the {only_loss.size} famous-fresh pairs, the famous text wins by mean loss alone in "
      f"{only_loss.sum()}, by Min-20% Prob alone in {only_min_k.sum()}; those {only_loss.sum()} come from "
      f"{sorted({triplet_of['famous'][i] for i in np.nonzero(only_loss)[0]})}")
assert within_triplet_p("famous", "fresh", "mean_loss") < 0.05 / 9 < within_triplet_p("paraphrase", "fresh", "mean_loss")
assert all(ci[0] < 0.5 for ci in family["99.4% CI (triplets)"]), family
assert lead["ci95"][0] <= 1e-9 < lead["diff"], lead
survivors = set(family.index[family["p (within triplets)"] < 0.05 / 9])
assert survivors == {("famous vs fresh", "mean_loss"), ("famous vs fresh", "min_k_prob")}, survivors
assert not only_min_k.any() and only_loss.sum() == round(lead["diff"] * only_loss.size), lead

# %% [markdown]
# Counted as a family, every triplet interval includes a half. That holds even for famous against
# fresh by mean loss, [0.417, 0.989]: twelve triplets cannot pin down how large an AUC is. Whether
# there is any separation at all is the permutation's question, and that test is exact, with no
# approximation to stretch to 99.4%. It puts famous against fresh at p = 0.0024 by mean loss and
# 0.0044 by Min-20% Prob, both below 0.05/9 (0.0056). Paraphrase against fresh by mean loss is at
# p = 0.0166, above it. So famous texts scoring as more seen than fresh ones is a finding, and
# paraphrases doing so is suggestive.
#
# Mean loss's lead over Min-20% Prob is +0.049, with the interval [0, 0.104]. Its lower end is a
# floor, not an estimate: Min-20% Prob wins no famous-fresh pair that mean loss loses, so no
# resample puts it ahead. But the lead is 7 of the 144 pairs, from three famous texts (the Zen of
# Python, Moby-Dick, The Raven), and a resample that draws none of those three triplets shows no
# lead at all. A percentile bootstrap at 12 triplets runs narrow besides. So these texts cannot rank
# the two scores.
