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
# # 08 · Robustness: how much does the score drop when the question is perturbed?
#
# A user who types "waht is the capital of france" still deserves "Paris". The evals so far ask each
# question exactly one way. So they cannot tell a model that knows a fact from one that only
# recognises a particular string of bytes. A **perturbation** is a change to the input that should
# not change the right answer. A **robustness eval** asks the same questions again, each perturbed,
# and reports how far the metric falls.
#
# **What you will learn**
#
# - perturbations as small **pure functions**: typos, case changes, extra whitespace, contractions
#   and expansions, a paraphrased instruction, and an irrelevant distractor sentence. Each is
#   deterministic given a seed and the text, and none ever touches the reference;
# - `ec.robustness_eval`: the metric clean and under each perturbation, the drop, and the
#   **worst case**;
# - counting the answers that break and those that are rescued, with McNemar's exact test on those
#   counts (lesson 05, `ec.paired_difference`);
# - why eight perturbations tested at once need a correction: Bonferroni's, Holm's, and Tarone's,
#   which counts only the tests that could reach significance at all;
# - a per-example grid that shows *which* inputs break;
# - how robustness interacts with normalisation: a case change EM forgives, and one it cannot;
# - a typo-rate curve, and why the net score hides answers that break and answers that get fixed.
#
# **Time needed:** about 65 minutes.
#
# **Builds on:** lesson 02 (exact match and its normalisation), lesson 03 (token F1) and lesson 05
# (the aggregate, McNemar's test and Newcombe's interval). Nothing is trained here.
#
# *Sources:* our perturbation set is modelled on that of HELM (Stanford's Holistic Evaluation of
# Language Models; Liang et al. 2022, arXiv 2211.09110).

# %%
import statistics

import matplotlib.pyplot as plt
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
pd.set_option("display.width", 120)
pd.set_option("display.max_colwidth", 80)

# %% [markdown]
# ## 1. Perturbations are small pure functions
#
# A perturbation here is a **pure function**: its output depends only on its arguments, and calling
# it changes nothing else. That makes every perturbed question reproducible. Every perturbation has
# the signature `perturb(text, seed=0) -> text`. Its random draws come from a generator seeded by the
# seed *and the text*. So the same question with the same seed always gives the same output, and two
# questions get independent typos. `ec.PERTURBATIONS` holds the default set. Here is one question
# under each:

# %%
# NBVAL_CHECK_OUTPUT
tok = ec.InstructionTokenizer()
model = ec.load_pretrained()
pairs = ec.load_fixtures()["em"]
question = pairs[0][0]
pd.DataFrame({"perturbed instruction": {name: fn(question, seed=0)
                                        for name, fn in ec.PERTURBATIONS.items()}})

# %% [markdown]
# A few things to notice:
#
# - **typos** swaps a letter with its neighbour, drops it or doubles it, each letter with probability
#   `rate` (0.1 by default);
# - **contraction** turns "What is" into "What's", while **expansion** turns contractions back and
#   has nothing to do here;
# - **paraphrase** wraps the question in one of `ec.PARAPHRASE_TEMPLATES`, with words before or after
#   it. A **framing** is a template that wrapped the questions in training, such as "Question: {q}"
#   (`ec.QUESTION_FRAMINGS`, printed in section 5). We chose the paraphrases to differ from every
#   framing. A paraphrase the model has seen measures memory, not robustness;
# - **distractor** puts an irrelevant sentence first.
#
# The contract each function must keep, checked:

# %%
for name, fn in ec.PERTURBATIONS.items():
    assert fn(question, seed=7) == fn(question, seed=7), name  # same seed, same output
assert ec.typos(question, seed=1) != ec.typos(question, seed=2)  # another seed, other typos
assert ec.typos(question, seed=1, rate=0.0) == question  # rate 0 changes nothing
assert ec.extra_whitespace(question, seed=1, max_extra=0) == question
assert not set(ec.PARAPHRASE_TEMPLATES) & set(ec.QUESTION_FRAMINGS)

# %% [markdown]
# ## 2. The robustness eval
#
# One perturbation, upper case, wipes out the score, and five of the eight leave it exactly where it
# was. Holm's correction for eight tests leaves no drop standing, but a sharper one, Tarone's, keeps
# upper case. This section builds that result step by step. Sections 2 to 5 all use seed 0.
#
# `ec.robustness_eval(model, tok, pairs, perturbations=None, metric=None, seed=0)` generates an
# answer for every example clean and under every perturbation, in one batch. It scores each answer
# with `metric` (exact match by default) against the **unperturbed** reference. Each record is tagged
# with its perturbation.

# %% tags=["live"]
# The robustness eval: ec.robustness_eval(model, tok, pairs), then its per_example rows as a DataFrame; defines: rob, frame
rob = ec.robustness_eval(model, tok, pairs)  # 20 questions x (clean + 8 perturbations)
frame = pd.DataFrame(rob.per_example)
n_rows = len(pairs) * (1 + len(ec.PERTURBATIONS))  # one row per question and condition
assert len(frame) == n_rows, f"expected {n_rows} rows (every question clean and perturbed), got {len(frame)}"
assert all(r["reference"] == pairs[r["index"]][1] for r in rob.per_example)  # never perturbed
assert (frame.loc[frame.perturbation == "clean", "instruction"] == [q for q, _ in pairs]).all()

# %%
# NBVAL_CHECK_OUTPUT
x = rob.extras
table = pd.DataFrame({"EM": x["per_perturbation"], "drop from clean": x["drop"],
                      "inputs changed": x["changed"]}).round(4)
print(f"clean EM {x['clean']:.4g}")
table


# %% [markdown]
# The clean EM is 0.30 (6 of 20). Upper case takes it to 0: every right answer breaks. The
# paraphrase costs 0.15 net, and the distractor sentence *adds* 0.05. With seed 0, typos at rate 0.1,
# lower case and extra spaces change every input and leave the score exactly where it was. (Section 6
# reruns the typos with five seeds: at rate 0.1 they break 2 of 30 right answers, 6 questions × 5
# seeds.)
#
# Contraction changes only 4 of the 20 questions and expansion none, so their zero drop says almost
# nothing. That is why the table reports the share of inputs a perturbation actually changed.

# %% [markdown]
# **Broke and rescued.** A net change can hide two flows: right answers that **break** and wrong
# answers that are **rescued**. Count both. McNemar's exact test (lesson 05) asks whether a split
# such as "4 broke, 1 rescued" is more than noise. If the perturbation made no difference, each
# changed answer would be as likely to go one way as the other, like a fair coin. The p-value
# (lesson 05) is how often a coin splits that many changes at least this unevenly. Answers that did
# not change carry no evidence either way.
#
# `ec.paired_difference(a, b)` does all of this for two results on the same examples. It returns:
#
# - the change `b - a`, with a paired 95% interval (for 0/1 scores, Newcombe's paired score
#   interval, lesson 05);
# - the broke and rescued counts;
# - the exact McNemar p (`ec.mcnemar_exact(broke, rescued)` computes it on its own).
#
# The clean and perturbed runs have different instructions by design. `paired_difference` matches
# examples by their instruction when they have one, so we pair them on the question's index instead.

# %% [markdown]
# **Eight tests at once.** A **family** of comparisons is a set of tests read together, so their
# errors must be counted together. Ours has **eight** tests, one per perturbation, any of which we
# might report as "this perturbation changes the score". This is the problem of **multiple
# comparisons**: the more tests we run, the likelier it is that at least one of them looks
# significant (p below 0.05) by luck. Each test alone still keeps its 5%. If each of eight
# independent tests could reach any p-value, the chance that at least one falls below 0.05 by luck
# alone would be 1 - 0.95^8 ≈ 34%, not one in 20.
#
# **Holm's correction** controls that. It keeps the chance of even one false finding in the family
# at or below 0.05. It adjusts the p-values in three steps:
#
# 1. sort them, smallest first;
# 2. multiply the smallest by 8, the next by 7, and so on down to 1;
# 3. never let an adjusted p fall below the one before it, and cap each at 1.
#
# Multiplying the smallest p by 8 is the same as comparing it with 0.05 / 8: the 5% is shared among
# the eight tests. **Bonferroni's correction**, Holm's simpler and stricter cousin, compares *every*
# p with 0.05 / 8 (lesson 11 uses it). Holm relaxes the bar step by step: 0.05 / 7 for the next p,
# and so on, stopping at the first p that fails.
#
# A drop counts as a finding only if it survives the correction at 0.05.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Broke/rescued per perturbation: ec.paired_difference on question-indexed EM, then Holm's step-down; defines: em_result, holm, clean_em, paired, churn, survivors
def em_result(name):
    # one condition's EM scores as an EvalResult, keyed by question index so that the clean and
    # perturbed runs pair up question by question (their instructions differ on purpose)
    rows = frame[frame.perturbation == name].sort_values("index")
    return ec.EvalResult("exact_match", float(rows["score"].mean()),
                         [{"index": int(i), "score": s} for i, s in zip(rows["index"], rows["score"])])


def holm(p):
    # Holm's step-down adjustment: the k-th smallest of m p-values times (m - k + 1), kept
    # non-decreasing in that order and capped at 1
    ranked = p.sort_values(kind="stable")
    return (ranked * list(range(len(ranked), 0, -1))).cummax().clip(upper=1.0).reindex(p.index)


clean_em = em_result("clean")
paired = {name: ec.paired_difference(clean_em, em_result(name)) for name in x["per_perturbation"]}
churn = pd.DataFrame({name: {"broke": d["broke"], "rescued": d["rescued"], "EM change": d["diff"],
                             "95% CI": f"[{d['ci95'][0]:.4g}, {d['ci95'][1]:.4g}]",
                             "p (McNemar)": d["p_mcnemar"]} for name, d in paired.items()}).T
churn["p (Holm, 8 tests)"] = holm(churn["p (McNemar)"].astype(float))
survivors = churn.index[churn["p (Holm, 8 tests)"] < 0.05].tolist()
print(churn.to_string(float_format=lambda v: f"{v:.4g}"))
print("drops that survive Holm's correction at 0.05:", survivors or "none")

# %% [markdown]
# By Holm, no drop survives, not even upper case. Upper case is the strongest result the data can
# give: all six right answers break and none is rescued. A coin splits six changes 6-0 (either way)
# with probability 2/64. So its McNemar p is 0.03125, the smallest p that six changed answers can
# produce. But it is one of eight tests, and Holm multiplies the smallest p by 8: 0.25.

# %% [markdown]
# **Holm is too strict here**, and we can say exactly why. It charges each of the eight tests as if it
# could produce any p-value. An exact test on a handful of changed answers cannot. Given n changed
# answers, McNemar's smallest possible p is 2/2^n. (The test looks only at how the n changes split,
# so n is taken as given.) Here:
#
# - five perturbations changed no answer at all, so their p is 1 whatever happens;
# - the distractor changed one (smallest possible p 1);
# - the paraphrase changed five (smallest possible p 0.0625, already above 0.05);
# - only upper case, with six, could reach 0.05 at all.
#
# **Tarone's correction** counts only such tests. It takes the smallest K for which at most K tests
# have a smallest possible p at or below 0.05 / K. It then compares the p-values of those tests with
# 0.05 / K. Try K = 1: only upper case has a smallest possible p (0.031) at or below 0.05 / 1. That is
# one test, no more than K, so K = 1, and upper case's p is compared with 0.05 itself, not 0.05 / 8.
#
# `ec.tarone_holm` applies this step by step, like Holm: after a test survives, K is recomputed over
# the tests left. The table calls it "Tarone-Holm":

# %%
# NBVAL_CHECK_OUTPUT
churn["changed"] = (churn["broke"] + churn["rescued"]).astype(int)
churn["smallest p"] = [ec.mcnemar_exact(n, 0) for n in churn["changed"]]  # 2 / 2**n, or 1 at n = 0
p_values, floors = churn["p (McNemar)"].astype(float).tolist(), churn["smallest p"].tolist()
churn["survives Tarone-Holm"] = ec.tarone_holm(p_values, floors, alpha=0.05)
print(churn[["changed", "smallest p", "p (McNemar)", "p (Holm, 8 tests)", "survives Tarone-Holm"]]
      .to_string(float_format=lambda v: f"{v:.4g}"))
print("tests Tarone counts at the 5% level:", ec.tarone_count(floors, 0.05))
tarone_survivors = churn.index[churn["survives Tarone-Holm"]].tolist()
assert tarone_survivors == ["uppercase"], tarone_survivors
assert ec.tarone_count(floors, 0.05) == 1, f"expected Tarone to count 1 test, got {ec.tarone_count(floors, 0.05)}"

# %% [markdown]
# **Upper case survives**, at p = 0.031 against 0.05. Of the eight tests only one could ever give a
# finding, so there is nothing to share the 5% among. This is not a loophole:
#
# - which tests count depends only on how many answers each perturbation changed, not on which way
#   they changed. With no real effect, how many answers change says nothing about which way they go,
#   so choosing tests by it cannot favour small p-values;
# - a test that cannot reach 0.05 cannot produce a false finding, however many of them there are.
#
# Holm, blind to that, threw away the only result the fixture could give.
#
# **How sure are we?**
#
# - The survivor is one perturbation on one 20-question fixture.
# - Its size is still rough. The change is -0.30, and Newcombe's paired interval runs from -0.52 to
#   -0.08. That interval is per comparison, not corrected for eight looks.
# - The paraphrase breaks four and rescues one (p = 0.375 before any correction). It leans the same
#   way but is not a finding.
# - The distractor's gain is a single rescued answer, too few to tell from noise (its smallest
#   possible p is 1).
# - Typos, lower case and extra spaces broke nothing and rescued nothing, so their tests had nothing
#   to test. Their intervals, -0.11 to +0.11 (as for contraction and expansion), say what that is
#   worth. Nothing changed on these 20 questions, but 20 pairs cannot rule out a change of about two
#   answers either way.
# - With 20 examples one answer is 0.05 of EM.

# %%
assert x["clean"] == 0.3, f"expected clean EM 0.3 (6 of 20), got {x['clean']}"
assert x["per_perturbation"]["uppercase"] == 0.0 and x["worst_perturbation"] == "uppercase"
assert x["changed"]["expansion"] == 0.0 and x["changed"]["contraction"] == 0.2, x["changed"]
assert all(abs(paired[n]["diff"] + x["drop"][n]) < 1e-12 for n in paired)  # change = -drop
pair_sizes = {n: (paired[n]["n"], paired[n]["dropped"]) for n in paired}
assert all(v == (len(pairs), 0) for v in pair_sizes.values()), f"expected every question paired, got {pair_sizes}"
flows = {n: churn.loc[n, ["broke", "rescued"]].tolist() for n in ["uppercase", "paraphrase", "distractor"]}
assert flows["uppercase"] == [6, 0], f"expected 6 broke and 0 rescued under upper case, got {flows['uppercase']}"
assert flows["paraphrase"] == [4, 1], f"expected 4 broke and 1 rescued under the paraphrase, got {flows['paraphrase']}"
assert flows["distractor"] == [0, 1], f"expected 0 broke and 1 rescued under the distractor, got {flows['distractor']}"
assert (churn.loc[["typos", "lowercase", "whitespace", "contraction", "expansion"],
                  ["broke", "rescued"]] == 0).all().all()
assert churn.loc["uppercase", "p (McNemar)"] == ec.mcnemar_exact(6, 0) == 2 / 2**6
assert churn.loc["uppercase", "p (Holm, 8 tests)"] == 8 * 2 / 2**6 == 0.25
assert survivors == [], survivors  # nothing survives Holm's correction
assert paired["uppercase"]["ci95"][1] < 0  # its per-comparison interval excludes 0
assert paired["uppercase"]["ci_method"].startswith("Newcombe")

# %%
names = list(x["per_perturbation"])
fig, ax = plt.subplots(figsize=(9, 4))
bars = ax.bar(names, [x["per_perturbation"][n] for n in names], color="tab:blue")
ax.axhline(x["clean"], color="tab:red", linestyle="--", label=f"clean EM {x['clean']:.2f}")
for bar, n in zip(bars, names):
    ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height() + 0.01,
            f"{x['per_perturbation'][n] - x['clean']:+.2f}\n{x['changed'][n]:.0%} chg",
            ha="center", fontsize=8)
ax.set(ylim=(0, 0.5), ylabel="exact match", title="EM under each perturbation (label: change "
       "from clean, share of inputs changed)")
ax.tick_params(axis="x", labelrotation=30)
ax.legend(loc="upper right")
plt.show()

# %% [markdown]
# ## 3. Which inputs break?
#
# The answers that move are few, and both the breaks and the rescues say the same thing: the answer
# can hinge on the form of the question. Upper case, the paraphrase and the distractor flip some
# answers. Typos, lower case and extra spaces change every input and flip none. An average over 20
# questions hides which ones move. The grid below has one row per question and one column per
# condition. The colour is the token F1 of the answer (lesson 03), and a ✓ marks an exact match.

# %%
frame["f1"] = [ec.token_f1(p, r) for p, r in zip(frame.prediction, frame.reference)]
cols = ["clean"] + names
f1_grid = frame.pivot(index="index", columns="perturbation", values="f1")[cols]
em_grid = frame.pivot(index="index", columns="perturbation", values="score")[cols]
labels = [q if len(q) < 38 else q[:35] + "..." for q, _ in pairs]
right = em_grid.index[em_grid["clean"] == 1].tolist()
rescues = [(i, c) for c in names for i in em_grid.index
           if em_grid.loc[i, "clean"] == 0 and em_grid.loc[i, c] == 1]
assert [pairs[i][1] for i in right] == ["Paris", "Tokyo", "Pacific Ocean", "Mars", "Jupiter",
                                        ["7", "seven"]]
assert em_grid.loc[right, "uppercase"].eq(0).all()
kept_by_paraphrase = int(em_grid.loc[right, "paraphrase"].sum())
assert kept_by_paraphrase == 2, f"expected 2 right answers to survive the paraphrase, got {kept_by_paraphrase}"
assert rescues == [(6, "paraphrase"), (5, "distractor")], rescues

# %%
fig, ax = plt.subplots(figsize=(9, 7))
im = ax.imshow(f1_grid.to_numpy(), cmap="viridis", vmin=0, vmax=1, aspect="auto")
for i, j in zip(*em_grid.to_numpy().nonzero()):
    ax.text(j, i, "✓", ha="center", va="center", color="black", fontsize=11)
ax.set_xticks(range(len(cols)), cols, rotation=45, ha="right")
ax.set_yticks(range(len(labels)), labels, fontsize=8)
ax.set(xlabel="condition", ylabel="question", title="Token F1 per question and perturbation (✓ = EM)")
fig.colorbar(im, ax=ax, label="token F1")
fig.tight_layout()
plt.show()

# %% [markdown]
# The six questions answered right when clean are all short, familiar facts (Paris, Tokyo, the
# Pacific, Mars, Jupiter, 7). All six break under upper case, and four of them under the paraphrase.
# Two of the other 14 are *rescued*:
#
# - the boiling point (the upper of the two "At what Celsius temperature..." rows), under a
#   paraphrase ("Could you help me with this? ..."). The clean answer was a near miss ("10 degres
#   Celsius");
# - the spider's legs, under the distractor sentence ("Eight").
#
# **How sure are we?** One rescue is not evidence that the model knows more.
#
# Here is one question across the conditions. Its answer, "Mars", survives all but two of them: upper
# case, and a paraphrase that ends the question with "Reply in a few words".

# %%
# NBVAL_CHECK_OUTPUT
one = frame[frame["index"] == 9][["perturbation", "instruction", "prediction", "score"]]
one.reset_index(drop=True)

# %% [markdown]
# ## 4. The worst case
#
# HELM summarises robustness as a **worst case**: for each example, take the lowest score over the
# clean input and every perturbation, then average over the examples. That is `rob.value`. It never
# exceeds the clean score, and it asks "would this answer survive *every* perturbation?"
#
# It can be lower than the score under every single perturbation. If question A breaks only under
# typos and B only under upper case, each perturbation loses one answer, but the worst case loses
# both. (Here upper case alone already scores 0, so the two agree.) A worst case is only defined
# relative to its set of perturbations, so report the set along with the number.

# %%
# NBVAL_CHECK_OUTPUT
mild = ec.robustness_eval(model, tok, pairs, ["typos", "lowercase", "whitespace", "contraction"])
print(f"worst case, all 8 perturbations: {rob.value:.4g}")
print(f"worst case, 4 mild ones: {mild.value:.4g} (clean {mild.extras['clean']:.4g})")
assert rob.value == 0.0 < mild.value == mild.extras["clean"] == 0.3


# %% [markdown]
# With all eight perturbations the worst case is 0: every right answer fails under something. With
# four mild perturbations (similar to HELM's "invariance" set, perturbations that should leave the
# right answer unchanged) it is 0.30, the clean score itself: all six right answers survive all
# four.

# %% [markdown]
# ## 5. Robustness meets normalisation
#
# Output normalisation forgives a case change in the answer, never one in the question. Lesson 02's
# `normalise_em` lowercases, strips, collapses whitespace and drops trailing `.`, `!` and `?`. It
# acts on the **answer**. A perturbation acts on the **question**. A case change shows the
# difference. We compare EM with a strict match whose normaliser only strips. It is still
# `ec.exact_match`, with a different `normalise`.

# %% tags=["live"]
# A strict match: ec.exact_match with normalise=str.strip, under lower and upper case; defines: strict_match, strict, clean_preds, refs
def strict_match(prediction, reference):
    # exact_match without lower-casing: only surrounding whitespace is forgiven
    return ec.exact_match(prediction, reference, normalise=str.strip)


strict = ec.robustness_eval(model, tok, pairs, ["lowercase", "uppercase"], metric=strict_match)
clean_preds = frame.loc[frame.perturbation == "clean", "prediction"].tolist()
refs = [r for _, r in pairs]

# %%
# NBVAL_CHECK_OUTPUT
s, lowered = strict.extras, [p.lower() for p in clean_preds]  # answers lower-cased after the fact
interaction = pd.DataFrame({
    "EM (normalised)": [x["clean"], statistics.mean(map(ec.exact_match, lowered, refs)),
                        x["per_perturbation"]["lowercase"], x["per_perturbation"]["uppercase"]],
    "strict match": [s["clean"], statistics.mean(map(strict_match, lowered, refs)),
                     s["per_perturbation"]["lowercase"], s["per_perturbation"]["uppercase"]]},
    index=["clean", "answer lower-cased", "question lower-cased", "question upper-cased"])
interaction.round(4)

# %%
assert interaction.loc["answer lower-cased", "EM (normalised)"] == x["clean"]  # forgiven
assert interaction.loc["answer lower-cased", "strict match"] < s["clean"]  # not forgiven
assert interaction.loc["answer lower-cased", "strict match"] == 0.05  # only "7" survives
assert interaction.loc["question lower-cased", "EM (normalised)"] == x["clean"]
assert (interaction.loc["question upper-cased"] == 0).all()  # nothing on the output side helps
print(ec.QUESTION_FRAMINGS)

# %% [markdown]
# - **A case change in the answer** ("paris" for "Paris") costs nothing under EM, because its
#   normalisation forgives it. Under the strict match, 5 of the 6 right answers are lost (only "7"
#   has no case). That is why lesson 02 normalises.
# - **A case change in the question** is a different input, and no output normalisation can help.
#   Lower case costs nothing (no answer breaks, none is rescued), and the model was *trained* on
#   lowercased questions (the `{lower}` framing printed above; `{bare}` is the question without its
#   final punctuation). Upper case was never in training. It breaks every right answer: the model
#   answers in babble, which no metric would forgive.
#
# **How sure are we?**
#
# - That pattern fits the common view that robustness to a perturbation comes from training data
#   that covered it. It does not prove it here. Typos and extra spaces are not among the training
#   framings, yet with this seed they broke nothing either.
# - Testing the cause would take a second model trained without the lowercase framing.

# %% [markdown]
# ## 6. Typo rate against score
#
# Heavier typos break some answers that light ones leave alone, and a few lucky rescues hide part of
# that in the net score. We show it with a **dose-response curve**: the effect measured at a growing
# dose, here the typo rate. We sweep the rate from 0 to 0.5 and repeat each rate with 5 seeds. A
# perturbation can be any function `(text, seed) -> text`, so a rate is passed with a small lambda.
# Besides EM we track two parts of it:
#
# - **kept** is the share of the clean-correct answers that stay correct;
# - **gained** is the share of the clean-wrong answers that become correct.

# %%
rates = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5]
sweep = {f"rate {r:g}": (lambda text, seed, r=r: ec.typos(text, seed, rate=r)) for r in rates}
runs = pd.concat([pd.DataFrame(ec.robustness_eval(model, tok, pairs, sweep, seed=s).per_example)
                  for s in range(5)])
clean_ok = {r["index"]: r["score"] for r in rob.per_example if r["perturbation"] == "clean"}
runs["clean_ok"] = runs["index"].map(clean_ok)

# %%
# NBVAL_CHECK_OUTPUT
rows = runs[runs.perturbation != "clean"]
by_right = rows[rows.clean_ok == 1].groupby("perturbation")["score"]
by_wrong = rows[rows.clean_ok == 0].groupby("perturbation")["score"]
curve = pd.DataFrame({
    "EM": rows.groupby("perturbation")["score"].mean(), "kept": by_right.mean(),
    "gained": by_wrong.mean(), "broke": by_right.apply(lambda s: int((s == 0).sum())),
    "of right": by_right.size(), "rescued": by_wrong.apply(lambda s: int((s == 1).sum())),
    "of wrong": by_wrong.size()}).loc[list(sweep)]
curve.round(4)

# %%
assert curve.loc["rate 0", "kept"] == 1.0 and curve.loc["rate 0", "gained"] == 0.0
# 6 right and 14 wrong questions, 5 seeds each
n_seeds, n_right = 5, len(right)
assert (curve["of right"] == n_seeds * n_right).all(), f"expected {n_seeds * n_right} right pairs per rate, got {curve['of right'].tolist()}"
assert (curve["of wrong"] == n_seeds * (len(pairs) - n_right)).all(), f"got {curve['of wrong'].tolist()}"
light = curve.loc["rate 0.05", ["broke", "rescued"]].tolist()
assert light == [0, 0], f"expected light typos to change nothing, got broke/rescued {light}"
assert (curve["broke"].iloc[2:] > 0).all(), curve["broke"].tolist()  # from rate 0.1, some break
assert curve["broke"].max() == 7, f"expected 7 broken pairs at the worst rate, got {curve['broke'].max()}"
assert curve["rescued"].max() == 3, f"expected 3 rescued pairs at the luckiest rate, got {curve['rescued'].max()}"  # lucky ones

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for col, style in [("EM", "o-"), ("kept", "s--"), ("gained", "^:")]:
    ax.plot(rates, curve[col], style, label=col)
ax.set(xlabel="typo rate (probability per letter)", ylabel="share of answers",
       title="Typos: right answers break while a few wrong ones get lucky (5 seeds)", ylim=(0, 1.05))
ax.legend()
plt.show()

# %% [markdown]
# EM alone looks flat: it drifts from 0.30 to about 0.25. Split into its parts, the picture is
# clearer. The table counts (question, seed) pairs: 6 right questions and 14 wrong ones, each with 5
# seeds. So rate 0.1 here is not section 2's seed-0 run, which broke nothing.
#
# - At rate 0.05 nothing changes.
# - From rate 0.1 on, right answers start to break, 2 to 7 of the 30.
# - Meanwhile at most 3 of the 70 wrong ones become right by chance.
#
# The two effects partly cancel in the net score. On a fixture this small, a flat robustness curve
# can hide **churn**: answers that break while others get rescued. Look at what broke and what was
# rescued, not only the mean.
#
# **How sure are we?**
#
# - Six questions are few, so the exact shape of these curves cannot be told from noise. Kept is
#   higher at rate 0.5 than at 0.3, for instance.
# - What the sweep does show is that heavier typos break some answers that light ones leave alone.

# %% [markdown]
# ## 7. Joining the aggregate
#
# Robustness joins the aggregate as an absolute worst-case score, with a default weight of 0.
# `robustness_eval` returns an `EvalResult` named `"robustness"`. Its value is the worst-case score.
# Its normalisation to [0, 1] is that value as it is, clipped.
#
# Why absolute, and not "worst case divided by clean"? The under-trained checkpoint shows why. It
# never answers right, so a ratio would be 0/0, or worse, a perfect 1 ("nothing to lose"). That would
# put a useless model at the top of the robustness column.

# %%
# NBVAL_CHECK_OUTPUT
early = ec.load_pretrained(ec.EARLY_CHECKPOINT_PATH)
early_rob = ec.robustness_eval(early, tok, pairs, ["lowercase", "distractor"])
print(f"early checkpoint: clean EM {early_rob.extras['clean']:.4g}, worst case {early_rob.value:.4g}")
assert early_rob.extras["clean"] == 0.0 and ec.normalise_metric("robustness", early_rob.value) == 0.0

# %%
four = ec.core_evals(model, tok)  # the four evals of lessons 01-04, as in lesson 05
before, after = ec.aggregate(four), ec.aggregate(four + [mild])
weighted = ec.aggregate(four + [mild], weights={**ec.DEFAULT_WEIGHTS, "robustness": 0.2})

# %%
# NBVAL_CHECK_OUTPUT
print(f"four evals {before.score:.4f} | + robustness (mild set), weight 0: {after.score:.4f} | "
      f"weight 0.2: {weighted.score:.4f}")
assert abs(after.score - before.score) < 1e-12 and abs(before.score - 0.3248) < 1e-4
assert after.normalised()["robustness"] == mild.value

# %% [markdown]
# With weight 0 the four-eval aggregate stays 0.3248. With weight 0.2, the mild set's worst case
# (0.30) moves it to 0.3207. The five weights then sum to 1.2, and `ec.aggregate` renormalises them
# (lesson 05, section 5): (0.3248 + 0.2 × 0.30) / 1.2.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - A perturbation is a small pure function of `(text, seed)`. It is deterministic, the identity at
#   rate 0, and it only ever touches the instruction: references are never perturbed.
# - On the 20 EM questions, the shipped TinyGPT scores 0.30 clean (6 right). Upper case takes it to
#   0.00: all six right answers break and none is rescued. The change is -0.30, with Newcombe's
#   paired 95% interval from -0.52 to -0.08.
# - The paraphrase costs 0.15 net (4 broke, 1 rescued), and the distractor adds 0.05 (one rescue).
#   With seed 0, typos at rate 0.1, lower case and extra spaces break and rescue nothing.
#   Contraction changes only 20 % of the inputs, and expansion none.
# - McNemar's exact test (`ec.paired_difference`, `ec.mcnemar_exact`) on broke/rescued, corrected
#   for eight perturbations:
#   - Holm's correction: upper case p = 0.03125 before, 0.25 after, and nothing survives;
#   - Tarone's (`ec.tarone_holm`) counts only the tests whose changed answers could reach p <= 0.05
#     at all (here one). **Upper case survives**, at p = 0.031. The paraphrase (p = 0.375) does not.
# - The per-example worst case is 0.00 over all eight perturbations and 0.30 (the clean score) over
#   four mild ones. A worst case means nothing without its perturbation set.
# - EM normalisation forgives a lower-cased *answer* (0.30, against 0.05 for a strict match). No
#   output normalisation can forgive an upper-cased *question* (0.00).
# - `"robustness"` joins `ec.aggregate` as the absolute worst-case score (no 0/0 for a model that is
#   never right), with a default weight of 0. The four-eval aggregate stays 0.3248.
#
# **What it did not**
#
# - How much upper case hurts beyond this fixture. It is one 20-question fixture with six right
#   answers to lose, and the size of the drop is known only to within -0.52 to -0.08. The
#   paraphrase's cost and the distractor's gain are within noise.
# - Why lower case is harmless here. Lower case is among the training framings and costs nothing.
#   But so do typos and extra spaces, which are not. The cause would need a second model trained
#   without the lowercase framing.
# - The shape of the typo-rate curve. EM only drifts from 0.30 to about 0.25 between rates 0 and 0.5.
#   From rate 0.1 on, 2 to 7 of 30 right (question, seed) pairs break, while at most 3 of 70 wrong
#   ones get fixed. On six right questions its exact shape cannot be told from noise.
# - Anything beyond one seed: over seeds 0-4 (Exercise 4) the paraphrase scores 0.15 to 0.30 (seed 0
#   is its worst) and the distractor 0.25 to 0.40.

# %% [markdown]
# ## Exercises
#
# Each exercise has a code cell. Write your code where the stub says and run the cell: its last lines
# check your answer.

# %% [markdown]
# ### Exercise 1: Token F1 instead of EM
#
# Rerun section 2 with `metric=ec.token_f1`. Store the F1 drop of each perturbation in `f1_drop`, a
# dict like `x["drop"]`. Store in `gentler` the perturbations whose F1 drop is *smaller* than their
# EM drop, in the order of `x["drop"]`. Does F1's partial credit make it gentler everywhere? Why not?
#
# *Hint:* `extras["drop"]` of the new result. F1 gives partial credit to "Paris is the capital of
# France.", but it also gives partial credit to the *clean* answers that EM calls wrong.

# %%
# Exercise 1: store the token F1 drop per perturbation in `f1_drop` and the perturbations F1 judges
#   more gently than EM in `gentler`.
### BEGIN SOLUTION
rob_f1 = ec.robustness_eval(model, tok, pairs, metric=ec.token_f1)
f1_drop = rob_f1.extras["drop"]
gentler = [n for n in x["drop"] if f1_drop[n] < x["drop"][n] - 1e-9]
print(pd.DataFrame({"EM drop": x["drop"], "F1 drop": f1_drop}).round(4))
print("F1 is gentler on:", gentler)
### END SOLUTION
f1_means = frame.groupby("perturbation")["f1"].mean()  # section 3's token F1 of the same answers
assert set(f1_drop) == set(x["drop"]), f"expected one F1 drop per perturbation, got keys {sorted(f1_drop)}"
assert all(abs(f1_drop[n] - (f1_means["clean"] - f1_means[n])) < 1e-9 for n in f1_drop), (
    f"expected each drop to be clean F1 minus perturbed F1 (as for EM); got {f1_drop}")
expected = [n for n in x["drop"] if f1_drop[n] < x["drop"][n] - 1e-9]
assert list(gentler) == expected, f"expected the perturbations whose F1 drop is below their EM drop; got {gentler}"
print("Exercise 1: check passed.")

# %% [markdown] tags=["solution"]
# F1 is gentler only on extra whitespace and the distractor, where its gain is a little larger than
# EM's. It is *harsher* on the two perturbations that hurt: upper case costs 0.357 of F1 against 0.30
# of EM, and the paraphrase 0.186 against 0.15. Typos and lower case cost a sliver of F1 and no EM.
# The reason is that F1's clean score also holds partial credit for the 14 answers EM calls wrong
# ("10 degres Celsius"). A perturbation that turns answers into babble takes that credit away too.
# Partial credit softens a drop only when the perturbed answer stays partly right.

# %% [markdown]
# ### Exercise 2: Your own perturbation
#
# Write `swap_words(text, seed=0)` that swaps two adjacent words. Choose the position with
# `random.Random` seeded from the seed *and* the text, so that it is deterministic. Leave a text of one
# word as it is. Run it through `robustness_eval` and store the result in `swap_rob`.
#
# *Hint:* `random.Random(f"{seed}:{text}")`, and pass the function in a dict: `{"swap": swap_words}`.

# %%
# Exercise 2: define `swap_words(text, seed=0)` and store its robustness eval in `swap_rob`.
### BEGIN SOLUTION
import random


def swap_words(text, seed=0):
    # swap one pair of neighbouring words, chosen by a generator seeded from the seed and the text
    words = text.split()
    if len(words) < 2:
        return text
    i = random.Random(f"{seed}:{text}").randrange(len(words) - 1)
    words[i], words[i + 1] = words[i + 1], words[i]
    return " ".join(words)


swap_rob = ec.robustness_eval(model, tok, pairs, {"swap": swap_words})
print(swap_words(question), "|", swap_rob.extras["per_perturbation"])
### END SOLUTION
for q, _ in pairs:
    once, again = swap_words(q, seed=3), swap_words(q, seed=3)
    assert once == again, f"expected the same output for the same seed and text; got {once!r} then {again!r}"
    assert sorted(once.split()) == sorted(q.split()), f"expected the same words in another order; got {once!r}"
    moved = [i for i, (a, b) in enumerate(zip(once.split(), q.split())) if a != b]
    assert moved == [] or (len(moved) == 2 and moved[1] == moved[0] + 1), (
        f"expected at most one pair of neighbouring words swapped; {q!r} became {once!r}")
assert any(swap_words(q) != q for q, _ in pairs), "expected swap_words to change some questions; it changed none"
assert "swap" in swap_rob.extras["per_perturbation"], f"expected a 'swap' condition; got {swap_rob.extras['per_perturbation']}"
assert swap_rob.extras["clean"] == x["clean"], f"expected the same questions as section 2; clean EM {swap_rob.extras['clean']}"
print("Exercise 2: check passed.")

# %% [markdown]
# ### Exercise 3: Trained framings are not robustness
#
# `ec.QUESTION_FRAMINGS` lists the framings the model was trained with. Store in `framed` a
# perturbation `(text, seed) -> text` that applies the trained framing `"Question: {q}"`, and in
# `framing_drop` its EM drop. Compare it with the paraphrase's drop, `x["drop"]["paraphrase"]`.
#
# *Hint:* `lambda text, seed=0: "Question: " + text`.

# %%
# Exercise 3: store the "Question: {q}" perturbation in `framed` and its EM drop in `framing_drop`.
### BEGIN SOLUTION
framed = lambda text, seed=0: "Question: {q}".format(q=text)  # noqa: E731 (a perturbation is any function)
framing_drop = ec.robustness_eval(model, tok, pairs, {"framing": framed}).extras["drop"]["framing"]
print(f"drop under a trained framing {framing_drop:+.4g}, under the paraphrase {x['drop']['paraphrase']:+.4g}")
### END SOLUTION
assert framed(question, seed=0) == f"Question: {question}", f"expected the question in the trained framing; got {framed(question, seed=0)!r}"
steps = framing_drop * len(pairs)  # one question is 1/20 of EM
assert abs(steps - round(steps)) < 1e-9, f"expected a whole number of questions' worth of EM; got {framing_drop}"
assert framing_drop <= 0 < x["drop"]["paraphrase"], f"expected the trained framing to cost nothing (drop <= 0); got {framing_drop}"
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# The trained framing costs nothing: EM goes *up* by one question (a drop of -0.05), against the
# paraphrase's cost of 0.15. The model has seen "Question: ..." thousands of times, so this measures
# memory of a format, not robustness to a new one. That is why `ec.PARAPHRASE_TEMPLATES` avoids every
# training framing.

# %% [markdown]
# ### Exercise 4: How noisy is one seed?
#
# Four perturbations ignore the seed (check it), and typos over five seeds are section 6's "rate 0.1".
# Run the two seeded perturbations the lesson discussed, paraphrase and distractor, with seeds 0-4.
# Store their EM in `per_seed`, a DataFrame with one row per seed, in order, and one column per
# perturbation. Plot each as a box against the clean EM. Store in `straddles` the ones whose EM lies
# below clean for some seed and above it for another. Which drops are larger than the seed-to-seed
# spread?
#
# *Hint:* `extras["per_perturbation"]` for each seed, into a DataFrame.

# %%
# Exercise 4: store EM per seed (rows) and perturbation (columns) in `per_seed`, and the
#   perturbations on both sides of clean in `straddles`.
### BEGIN SOLUTION
fixed = ["lowercase", "uppercase", "contraction", "expansion"]
assert all(ec.PERTURBATIONS[n](q, seed=0) == ec.PERTURBATIONS[n](q, seed=1)
           for n in fixed for q, _ in pairs)
seeded = ["paraphrase", "distractor"]
per_seed = pd.DataFrame([ec.robustness_eval(model, tok, pairs, seeded, seed=s)
                         .extras["per_perturbation"] for s in range(5)])
fig, ax = plt.subplots(figsize=(6, 4))
ax.boxplot([per_seed[n] for n in seeded], tick_labels=seeded)
ax.axhline(x["clean"], color="tab:red", linestyle="--", label=f"clean EM {x['clean']:.2f}")
ax.set(ylabel="exact match", title="EM over seeds 0-4")
ax.legend()
plt.show()
spread = pd.DataFrame({"seed 0": per_seed.iloc[0], "min": per_seed.min(), "max": per_seed.max()})
print(spread.to_string())
straddles = [n for n in seeded if per_seed[n].min() < x["clean"] < per_seed[n].max()]
### END SOLUTION
assert len(per_seed) >= 5 and {"paraphrase", "distractor"} <= set(per_seed.columns), (
    f"expected a row per seed 0-4 and columns paraphrase and distractor; got shape {per_seed.shape}")
seed0 = per_seed.iloc[0][["paraphrase", "distractor"]].to_dict()
assert all(abs(seed0[n] - x["per_perturbation"][n]) < 1e-12 for n in seed0), f"expected row 0 to be seed 0, as in section 2; got {seed0}"
assert (per_seed[["paraphrase", "distractor"]] <= 1).all().all(), "expected EM values in [0, 1]"
both_sides = [n for n in ["paraphrase", "distractor"] if per_seed[n].min() < x["clean"] < per_seed[n].max()]
assert sorted(straddles) == both_sides, f"expected the perturbations whose EM falls below clean at one seed and above it at another; got {straddles}"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# Upper case is the only drop larger than the seed-to-seed spread. It ignores the seed and takes EM
# to 0 every time. As section 2 showed, it survives Tarone's correction for eight tests, though not
# Holm's. The paraphrase scores between 0.15 and 0.30 over five seeds, never above clean, which leans
# towards a small real cost. But seed 0, the one the lesson reports, happens to be its worst. The
# distractor sentence lands on both sides of the clean 0.30 depending on the seed, so its gain at
# seed 0 has no direction at all. One seed on 20 questions is one draw: report the spread.
