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
# # 06 · Evaluate with evidence
#
# A school information service answers learners' questions from approved notices. Its job is narrow:
# return **exactly one time** such as `15:30`, or `unknown` when the notice does not settle the
# question. That contract is easy to state and check, so it is a good place to practise the part of
# evaluation that is not a formula. We decide what counts as success *before* looking at the
# answers, keep the evidence that decided it, and report only what it supports.
#
# **What you will learn**
#
# - four measurements (prediction loss, exact task success, source support, human judgement), and
#   what each cannot establish alone;
# - to compute a reference loss in bits, token by token, with its edge cases;
# - what a wrapper can fix and break, and why it never changes the model's loss;
# - rubric weights and mandatory gates, and a fluent wrong answer that passes without them;
# - to read rater disagreement with Cohen's kappa, sharpen a criterion instead of averaging, and
#   avoid the **in-sample trap**;
# - to freeze a protocol, its target included, in an append-only log before the reserved cases are
#   revealed;
# - to report rates as k/n with an interval, ending in an accept / restrict / reject brief;
# - why "every question on a notice right" is a different metric from the per-question rate;
# - to check that every part of a protocol can actually change its decision;
# - in "Going further": a cluster bootstrap over notices, and why a bootstrap interval for kappa on
#   14 items cannot be trusted.
#
# **Time needed:** about 90 minutes. **Going further:** about 30 minutes more.
# **Builds on:** lessons 01 (loss, the bootstrap), 02 (exact match, the Wilson interval), 04
# (judges, rubrics) and 05 (weights are a product decision).

# %%
import json
import re
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import torch
from sklearn.metrics import cohen_kappa_score

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
pd.set_option("display.max_colwidth", 70)

# %% [markdown]
# ## 1. The task, and the evidence we already hold
#
# `data/notices.json` holds eight invented notices (clubs, buses, exams, library hours) and fourteen
# questions on them. Each case has an id, a **source group** (the notice it comes from), the
# question, a reference (`HH:MM` or `unknown`) and a split.
#
# The model's answers come from a **recording**, `data/recording_06.json`. It holds the shipped
# TinyGPT's greedy completions (always the most likely next token, lesson 04) for every case, made
# once by `python evalcore.py record`. `ec.load_recording` refuses a recording whose checkpoint or
# notices file has changed since. So the recorded *answers* cannot drift when torch does.

# %%
task = ec.load_notices()  # raises if a notice's questions sit in both splits
notices = task["notices"]
rec = ec.load_recording()  # checked against the shipped checkpoint and data/notices.json
responses = ec.recorded_responses(rec)  # case id -> what TinyGPT said
raters = ec.load_raters()  # authored clarity ratings, used in sections 4 and 5
print("recorded on", rec["date"], "with", rec["versions"])

# %%
# NBVAL_CHECK_OUTPUT
print("checkpoint sha256:", rec["checkpoint"]["sha256"][:16], "...")
decoding = rec["decoding"]
print("decoding:", decoding["method"], "| max_new_tokens:", decoding["max_new_tokens"])
print("prompt template:", repr(rec["decoding"]["prompt"]))

# %% [markdown]
# ### Fix the success criterion first
#
# Two decisions come before any output is read.
#
# **The contract.** A delivered answer succeeds when, after trimming spaces, it is exactly one
# `HH:MM` time or the word `unknown`, *and* that value equals the reference. A polite sentence with
# the right time still fails: the software reading the answer expects a single value.
#
# **The split.** *Development* cases are open to us: we read them while building and tuning a
# system. *Reserved* cases are locked away before we settle on one, and stay unread until then.
# Questions on one notice share a source, so they are one piece of evidence, not two. The split is
# therefore made by source group, and `ec.check_split` refuses a notice that crosses it. Only the
# development questions are shown now.

# %%
dev = [c for c in task["cases"] if c["split"] == "development"]
reserved = [c for c in task["cases"] if c["split"] == "reserved"]
groups = ec.check_split(task["cases"])
pd.DataFrame(dev)[["id", "source_group", "question", "reference"]]

# %%
# NBVAL_CHECK_OUTPUT
d, r = groups["development"], groups["reserved"]
print(f"development: {len(dev)} cases from {len(d)} notices {d}")
print(f"reserved:    {len(reserved)} cases from {len(r)} notices (questions hidden)")
print("one notice:", notices["chess"])
assert not set(groups["development"]) & set(groups["reserved"])

# %% [markdown]
# `ec.contract_value` is the contract as code: the value an answer delivers, or `None` when the
# answer is not in the agreed shape. `ec.task_success` compares that value with the reference.

# %%
# NBVAL_CHECK_OUTPUT
for answer in ["16:15", " unknown ", "16:15.", "Chess is at 16:15.", "4:15", "16:15 or 15:30"]:
    print(f"{answer!r:<22} -> {ec.contract_value(answer)!r}")
assert ec.task_success(" 16:15 ", "16:15") and not ec.task_success("Chess is at 16:15.", "16:15")

# %% [markdown]
# ### Four measurements, four blind spots
#
# Each measurement answers its own question, and none of them answers the others'.
#
# | measurement | what it checks | its blind spot when used alone |
# | --- | --- | --- |
# | prediction loss | how surprised the model is by the correct answer, token by token | whether the returned text is usable |
# | exact task success | whether the returned value is exactly the reference time or `unknown` | helpfulness beyond this narrow contract, and safety |
# | source support | whether the approved notice backs each claim in the answer | what is missing, the shape, facts the notice does not cover |
# | human judgement | whether a person following a written rubric finds the answer clear and fitting | correctness: raters can agree and still be wrong |

# %% [markdown]
# ## 2. Reference loss, made inspectable
#
# **The loss shows what the model expects, not what the service delivers.** TinyGPT never saw a
# notice or a clock time in training, and its loss on the correct times shows it.
#
# We feed the model the prompt and then the *correct* reference, one token at a time. This is
# **teacher forcing**: the model always sees the true earlier tokens, never its own guesses. A
# correct token given probability $p_i$ costs a surprise of $-\log_2 p_i$ bits. The reference loss
# is the mean over the reference's $N$ tokens:
#
# $$L = \frac{1}{N}\sum_{i=1}^{N} -\log_2 p_i .$$
#
# A token the model was sure of costs nothing. One it ruled out costs infinitely much: evalcore
# keeps that as `inf`, written to JSON as `null` plus a flag.

# %%
# NBVAL_CHECK_OUTPUT
for p in [1, 0.5, 0.25, 0.01, 0]:
    print(f"p = {p:<5} -> {ec.surprise_bits(p):.4g} bits")
half_then_quarter = ec.mean_bits([ec.surprise_bits(0.5), ec.surprise_bits(0.25)])
print("mean of 1/2 then 1/4:", half_then_quarter, "bits per token")
print("mean over an empty reference:", ec.mean_bits([]))
assert half_then_quarter == 1.5 and ec.mean_bits([]) is None  # no tokens: no mean, not 0

# %% [markdown]
# An empty reference gives `None`: there is nothing to average, and 0 would claim a perfect
# prediction.
#
# Now the real model. `ec.reference_loss` runs TinyGPT once over prompt + reference and reads off
# the probability of each reference byte. TinyGPT's tokens are single bytes, so its bits per token
# are also **bits per byte**. The model is deterministic, so the notebook may run it for the loss.
# The *answers* still come from the recording: a tiny numeric change can flip which token is most
# likely, and a greedy answer then differs from there on.

# %% tags=["live"]
# Reference loss by hand: build the prompt, then ec.reference_loss(model, tok, prompt, reference); defines: model, tok, case, prompt, loss
model, tok = ec.load_pretrained(), ec.InstructionTokenizer()
case = dev[0]  # chess-thu: the notice gives Thursday's time, 16:15
prompt = ec.notice_prompt(notices[case["source_group"]], case["question"])
loss = ec.reference_loss(model, tok, prompt, case["reference"])
pd.DataFrame({"token": loss.tokens, "probability": [f"{p:.3g}" for p in loss.probs],
              "bits": [round(b, 3) for b in loss.bits]})

# %% [markdown]
# For contrast, a fact TinyGPT *was* trained on, side by side. Note the logarithmic axis.

# %%
known = ec.reference_loss(model, tok, "What is the capital of France?", "Paris")
fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
for ax, (title, l) in zip(axes, [(f"chess-thu: reference {case['reference']!r}", loss),
                                  ("a trained fact: reference 'Paris'", known)]):
    ax.bar(range(len(l.tokens)), l.probs, color="tab:blue")
    for i, (p, b) in enumerate(zip(l.probs, l.bits)):
        ax.text(i, p * 1.6, f"{b:.2g} bits", ha="center", fontsize=8)
    ax.set_xticks(range(len(l.tokens)), [repr(t) for t in l.tokens])
    ax.set(yscale="log", ylim=(1e-8, 5), xlabel="reference token (one byte)",
           title=f"{title}\nmean {l.mean_bits:.3g} bits per token")
axes[0].set_ylabel("model probability of the correct token")
fig.tight_layout()
plt.show()

# %%
# NBVAL_CHECK_OUTPUT
print(f"chess-thu: {loss.mean_bits:.4g} bits per token; 'Paris': {known.mean_bits:.4g}")
print("bits per byte of 16:15:", [f"{b:.3g}" for b in loss.bits])
dearest = loss.bits.index(max(loss.bits))
print(f"dearest: byte {dearest} ({loss.tokens[dearest]!r}), probability {loss.probs[dearest]:.3g}")
assert loss.mean_bits > 5 > known.mean_bits  # the notices are new to the model
assert dearest == 3 and loss.probs[dearest] < 1 / 5e6, f"expected byte 3 below 1/5e6, got {dearest}, {loss.probs}"  # the second '1'
assert min(loss.bits) > 4 and known.mean_bits < 0.1, (loss.bits, known.mean_bits)


# %% [markdown]
# Every byte of `16:15` costs the model more than four bits, and the second `1` more than twenty (a
# probability below one in five million). The mean is about eleven bits per byte, against a few
# hundredths of a bit for `Paris`. The loss of every development reference, with its length:

# %%
def case_prompt(c):
    return ec.notice_prompt(notices[c["source_group"]], c["question"])


dev_loss = {c["id"]: ec.reference_loss(model, tok, case_prompt(c), c["reference"]) for c in dev}
loss_table = pd.DataFrame([{"id": i, "reference": "".join(l.tokens), "tokens": len(l.tokens),
                            "mean bits": l.mean_bits, "total bits": sum(l.bits)}
                           for i, l in dev_loss.items()]).round(3)
loss_table

# %% [markdown]
# A rule-based system has no probability distribution over tokens at all, so it has no loss. The
# tempting shortcut is to write 0:

# %%
# BUGGY ON PURPOSE: 0 bits claims the rule was sure of every token; it has no distribution at all
buggy_rule_bits = 0.0
rule_loss = ec.reference_loss(None, tok, prompt, case["reference"])  # correct: model None = a rule
print("buggy:", buggy_rule_bits, "| evalcore:", repr(rule_loss.mean_bits))
assert rule_loss.mean_bits == ec.NOT_APPLICABLE and rule_loss.mean_bits != 0

# %% [markdown]
# **How sure are we?**
#
# - These losses are computed live, unlike the recorded answers: a new torch version or machine can
#   move their last digits (the checked prints round them).
# - Two loss figures are comparable only if computed the same way: the same tokenizer, reference
#   strings, tokens counted (here the answer bytes, with no token marking the end) and averaging
#   (Going further A).
# - A "bit" here measures surprise, not the size of a file.

# %% [markdown]
# ## 3. Raw output, a wrapper, and a rule
#
# **TinyGPT succeeds on none of the nine development cases, raw or wrapped. A rule that reads the
# notice succeeds on all nine.** A wrapper can repair an answer's shape, and it can also turn a true
# answer into a wrong one.
#
# A **wrapper** sits between the model and the scorer and post-processes the raw text. evalcore has
# three, each a function `(response, notice, question) -> delivered answer`:
#
# - `ec.wrap_raw` delivers the response as it is.
# - `ec.wrap_first_time` delivers its first time (or `unknown` if it says so).
# - `ec.wrap_source_rule` ignores the model. It takes the time of the first notice clause naming the
#   day asked about (for a closing time, the clause's last time, as in `08:00-18:00`). Easy to read,
#   it is built to do well on the way these notices are written.
#
# Each one on TinyGPT's recorded answers to the development cases (rates with Wilson intervals,
# lesson 02):


# %%
rows = []
for c in dev:
    n, r = notices[c["source_group"]], responses[c["id"]]
    row = {"id": c["id"], "reference": c["reference"], "TinyGPT said": r}
    for w, wrap in ec.WRAPPERS.items():
        row[w] = wrap(r, n, c["question"])
        row[f"{w} ok"] = ec.task_success(row[w], c["reference"])
    rows.append(row)
outcomes = pd.DataFrame(rows)
outcomes.drop(columns="raw")  # the raw delivery is what TinyGPT said

# %%
# NBVAL_CHECK_OUTPUT
for w in ec.WRAPPERS:
    print(f"{w:<12} {ec.success_rate([{'success': s} for s in outcomes[f'{w} ok']])}")
n_tiny_ok = (outcomes["raw ok"].sum(), outcomes["first_time ok"].sum())
assert n_tiny_ok == (0, 0), f"expected no TinyGPT successes raw or wrapped, got {n_tiny_ok}"
assert outcomes["source_rule ok"].all()
assert not any(re.search(r"\d\d:\d\d", r) for r in outcomes["TinyGPT said"])  # no time at all

# %% [markdown]
# TinyGPT's completions are babble. This 0.86M-parameter model was trained on 170 short statements
# and question-answer pairs about capitals, animals and basic science. It knows nothing about
# notices: it repeats one letter, then fragments such as "does". With no time to extract, the
# first-time wrapper cannot help. The rule reads the notice itself and gets all nine.
#
# **The wrapper did not change the model.** The loss depends only on the model and the reference, so
# raw and wrapped have the same loss by construction; the rule has none.

# %%
# NBVAL_CHECK_OUTPUT
mean_dev_bits = sum(l.mean_bits for l in dev_loss.values()) / len(dev_loss)
candidates = pd.DataFrame({
    "model": ["TinyGPT", "TinyGPT", "none"], "wrapper": ["raw", "first_time", "source_rule"],
    "dev successes": [f"{outcomes[f'{w} ok'].sum()}/{len(dev)}" for w in ec.WRAPPERS],
    "mean reference bits": [round(mean_dev_bits, 2), round(mean_dev_bits, 2), rule_loss.mean_bits]})
print(candidates.to_string(index=False))
bits = candidates["mean reference bits"]
assert bits[0] == bits[1] and bits[2] == ec.NOT_APPLICABLE  # same model, same loss; a rule has none

# %% [markdown]
# To see a wrapper fix and break something, we need answers that contain times. So we use fourteen
# **authored** responses: illustrative answers to development cases, written for this lesson (the
# raters read them in section 5).
#
# Each line below also prints **source support**, computed by `ec.source_support`. It is 1 when
# every time the answer names is in the notice and the reference time is among them. For an
# `unknown` reference, the answer must instead say that the time is not available. Two of the
# fourteen:

# %%
examples = {ex["id"]: ex for ex in raters["examples"]}
by_id = {c["id"]: c for c in dev}
authored_cases = [{**by_id[ex["case"]], "id": ex["id"]} for ex in raters["examples"]]
authored = {ex["id"]: ex["response"] for ex in raters["examples"]}
assert authored["x12"] != responses[examples["x12"]["case"]]  # not today's model's answer


def deliver(xid, wrapper):
    c = by_id[examples[xid]["case"]]
    return ec.WRAPPERS[wrapper](authored[xid], notices[c["source_group"]], c["question"]), c


# %%
# NBVAL_CHECK_OUTPUT
for xid in ["x02", "x03"]:
    print(f"{xid} ({examples[xid]['case']}): {authored[xid]!r}")
    for w in ["raw", "first_time"]:
        out, c = deliver(xid, w)
        support = ec.source_support(out, notices[c["source_group"]], c["reference"])
        ok = ec.task_success(out, c["reference"])
        print(f"   {w:<10} delivers {out[:30]!r:<34} success={ok} source_support={support}")

# %%
assert not ec.task_success(deliver("x02", "raw")[0], "16:15")
assert deliver("x02", "first_time")[0] == "16:15"  # fixed
assert deliver("x03", "first_time")[0] == "09:00"  # Monday's maths exam, not Tuesday's science exam
x03_support = ec.source_support(authored["x03"], notices["exams"], "13:30")
assert x03_support == 1, f"expected x03 supported as written, got {x03_support}"  # true as written...
wrapped_support = ec.source_support("09:00", notices["exams"], "13:30")
assert wrapped_support == 0, f"expected 09:00 unsupported, got {wrapped_support}"  # ...false once wrapped

# %% [markdown]
# `x02` has the right time followed by a question: the raw text fails the contract, and the wrapper
# repairs it. `x03` names Monday's maths exam before Tuesday's science exam. Every claim in it is
# true (it merely fails the format), but the wrapper delivers `09:00`, a confident wrong answer. A
# post-processor belongs to the system being evaluated, so it is tested at the task level like any
# other part.
#
# **How sure are we?** The rule's 9/9 is honest, and also a warning. Nine cases from five notices,
# all by one author in a few templates (sentence patterns such as "Tuesday 15:30 in room 12"), are a
# narrow test.
#
# *Sources:* `tests/test_06_evidence.py` tests each wrapper on short strings written into the test.
# Thirteen authored responses come from no model. `x12` is babble copied from an earlier recording,
# made with a since-retrained checkpoint; the shipped model's answer differs (asserted above).

# %% [markdown]
# ## 4. Rubrics, weights and gates
#
# **Weights decide what a rubric rewards: with all the weight on clarity, a fluent wrong answer
# passes. A gate stops it whatever the weights.** A rubric (lesson 04) scores separate criteria.
# Ours has three binary ones: **source support** (section 3), **format** (the contract's shape) and
# **clarity** (section 5 pins it down). The weighted score is $\sum_c w_c s_c / \sum_c w_c$, and
# `passed` says whether it reaches the rubric's pass mark, its `threshold`. Take weights 2, 1, 1 and
# an answer the notice does not back, though its shape and wording are fine. It scores
# $(0\cdot2 + 1\cdot1 + 1\cdot1)/4$:

# %%
# NBVAL_CHECK_OUTPUT
weights = {"source_support": 2, "format": 1, "clarity": 1}
unsupported = {"source_support": 0, "format": 1, "clarity": 1}
print(ec.rubric_score(unsupported, ec.Rubric(weights, threshold=0.5)))
assert ec.rubric_score(unsupported, ec.Rubric(weights))["score"] == 0.5

# %% [markdown]
# Half marks for a wrong answer. Now suppose someone moves all the weight to clarity, because that is
# what users notice. Authored response `x07` answers a question about Saturday, when the library is
# closed, with a fluent sentence about opening at 08:00:

# %%
# NBVAL_CHECK_OUTPUT
fluent_wrong = ec.rubric_labels(authored["x07"], notices["library"], "unknown")
clarity_only = ec.Rubric({"source_support": 0, "format": 0, "clarity": 1})
gated = ec.Rubric({"source_support": 0, "format": 0, "clarity": 1}, gates=("source_support",))
print(repr(authored["x07"]), fluent_wrong)
print("clarity only:         ", ec.rubric_score(fluent_wrong, clarity_only))
print("clarity only + a gate:", ec.rubric_score(fluent_wrong, gated))
assert ec.rubric_score(fluent_wrong, clarity_only)["passed"]
assert not ec.rubric_score(fluent_wrong, gated)["passed"]

# %% [markdown]
# The answer is the same in both lines; only the scoring rule moved. A **gate** is a criterion
# that fails the answer whatever its points: no amount of clarity buys back a wrong library time.
# The rubric we will freeze keeps weights 2, 1, 1 and a pass mark of 0.75, with gates on source
# support and format (the contract is not negotiable). Going further B scores five candidates under
# it.
#
# **How sure are we?** The source-support labels come from the coarse check of section 3. It is not
# a truth detector: it cannot tell which day a correctly copied time was attached to.

# %%
RUBRIC = ec.Rubric(weights, gates=("source_support", "format"), threshold=0.75)  # frozen in section 6

# %% [markdown]
# ## 5. When raters disagree
#
# **With the bare word "clear", two raters barely agreed beyond chance; a sharper written anchor
# brought them close to full agreement.** That agreement is in-sample, so it is no evidence that the
# anchor works on new responses.
#
# `data/raters.json` holds two raters' 0/1 clarity labels for the fourteen authored responses. **The
# raters and their labels are authored and fictional**, invented to show how a vague criterion splits
# two readers; no study produced them. Rater A looks at the opening sentence.
# Rater B asks whether a learner could act on the whole response without asking again. The first
# round used only the word "clear".

# %%
a0, b0 = ec.rater_labels(raters, "before", "A"), ec.rater_labels(raters, "before", "B")
pd.DataFrame({"id": list(examples), "response": list(authored.values()), "A": a0, "B": b0})

# %% [markdown]
# A **confusion table** counts each pair of labels (rows: A's 0 and 1; columns: B's). **Cohen's
# kappa** corrects agreement for chance. If A labels a share $p_A$ of responses 1 and B a share
# $p_B$, raters labelling independently at those rates agree by chance with probability
# $p_e = p_A p_B + (1 - p_A)(1 - p_B)$. Kappa subtracts that from the observed agreement $p_o$ and
# rescales: $\kappa = (p_o - p_e)/(1 - p_e)$. It is 1 for perfect agreement, 0 for chance, and below
# 0 when the raters agree less often than chance would.

# %%
# NBVAL_CHECK_OUTPUT
kappa0 = ec.cohen_kappa(a0, b0)
p_a, p_b = sum(a0) / len(a0), sum(b0) / len(b0)
p_e = p_a * p_b + (1 - p_a) * (1 - p_b)  # chance agreement
print(f"A labels 1 on {sum(a0)} of {len(a0)}, B on {sum(b0)} of {len(b0)}: chance agreement {p_e:.2f}")
print(f"agreement {ec.percent_agreement(a0, b0):.4g}, Cohen's kappa {kappa0:.4g}")
print("confusion (rows A = 0/1, columns B = 0/1):", ec.confusion_table(a0, b0))
assert abs(kappa0 - cohen_kappa_score(a0, b0)) < 1e-12  # evalcore agrees with scikit-learn
assert abs(p_e - 0.44) < 0.005 and abs((0.5 - p_e) / (1 - p_e) - kappa0) < 1e-12

# %% [markdown]
# Half the labels agree. But raters labelling at random at A's and B's rates (13 and 6 of 14 "clear")
# would agree 44% of the time by chance. So 50% is barely above chance, and kappa is about 0.11. The
# tempting fix is to average the two labels:


# %% tags=["live"]
# Average the two raters (the bug), then keep every dispute with ec.rater_disputes instead
# BUGGY ON PURPOSE: the mean hides that the raters disagree on half the examples, and why
averaged = [(a + b) / 2 for a, b in zip(a0, b0)]
print("averaged clarity:", sum(averaged) / len(averaged))
disputes = pd.DataFrame(ec.rater_disputes(raters, "before"))  # correct: keep labels and reasons
disputes[["id", "response", "A_reason", "B_reason"]]

# %% [markdown]
# A mean of 0.68 reads as "mostly clear" and says nothing about the seven 0.5s behind it. The
# disputes explain them: each time, A judged the opening words and B whether the whole reply could be
# acted on. The fix is in the criterion, not the arithmetic. Both raters re-rated against a sharper
# **anchor**, a written definition of the label:

# %%
print(raters["anchors"]["after"])
a1, b1 = ec.rater_labels(raters, "after", "A"), ec.rater_labels(raters, "after", "B")

# %%
# NBVAL_CHECK_OUTPUT
kappa1 = ec.cohen_kappa(a1, b1)
print(f"before: agreement {ec.percent_agreement(a0, b0):.4g}, kappa {kappa0:.4g}")
print(f"after:  agreement {ec.percent_agreement(a1, b1):.4g}, kappa {kappa1:.4g}")
for d in ec.rater_disputes(raters, "after"):
    print(f"still disputed: {d['id']} {d['response']!r}")
    print(f"  A: {d['A_reason']}\n  B: {d['B_reason']}")
assert kappa0 < 0.2 < 0.8 < kappa1 < 1

# %%
fig, axes = plt.subplots(1, 2, figsize=(8, 4))
for ax, (phase, a, b, k) in zip(axes, [("before", a0, b0, kappa0), ("after", a1, b1, kappa1)]):
    table = ec.confusion_table(a, b)
    ax.imshow(table, cmap="Blues", vmin=0, vmax=len(a))
    for i in range(2):
        for j in range(2):
            ax.text(j, i, table[i][j], ha="center", va="center", fontsize=14)
    ax.set_xticks([0, 1], ["B: 0", "B: 1"])
    ax.set_yticks([0, 1], ["A: 0", "A: 1"])
    ax.set(xlabel="rater B's label", ylabel="rater A's label",
           title=f"{phase} the anchor: kappa {k:.2f}")
fig.suptitle("Clarity labels of two (authored) raters on 14 responses")
fig.tight_layout()
plt.show()

# %% [markdown]
# Kappa rose from 0.11 to 0.86. One honest dispute remains (`x08`: is a time labelled as Monday's a
# "second time"?). That is the anchor's next revision, recorded rather than voted away. Agreement is
# not truth: both raters call `x07` clear, and it is wrong. That is why clarity sits beside source
# support and never replaces it.
#
# **The in-sample trap.** The anchor was written *after* reading the disputes on these 14 responses,
# to settle exactly those, and the raters were then checked on the same 14. Success there is close
# to guaranteed, as for a rule tuned on the development cases. So the 0.86 is **not evidence** that
# the anchor makes raters agree on new responses. That needs both raters labelling responses the
# anchor was not written from, under the frozen anchor. We have no such labels, and inventing them
# would prove nothing.
#
# `ec.anchored_clarity` is the anchor's **code reading**: one time, or a plain statement that there
# is none, and no question back. The protocol uses it to label clarity on outputs no rater has seen.
#
# **How sure are we?**
#
# - At n = 14 we report the kappa and the confusion table, and no interval. A bootstrap interval's
#   end would hang on whether one response is drawn: A's one "unclear" before, the `x08` dispute
#   after (Going further C). Even a good interval would describe only resamples of these 14, not new
#   responses.
# - The code reading matches every label the raters agree on, but it was written from the same
#   items. On eight new authored responses it misses two (Going further D).

# %% [markdown]
# ## 6. Freeze, then reveal
#
# **Before any reserved case is read, we freeze a protocol: everything that will decide the verdict,
# written down and fingerprinted.** Then the reserved cases are revealed under it, and logged as
# seen.
#
# On the development cases the source rule is the clear choice. A **protocol freeze** fixes, before
# the reveal:
#
# - the candidate (model + wrapper);
# - the rubric's weights, gates and pass threshold;
# - the clarity reading (the anchor) and the exact case list;
# - the decision's **target** and the **rate** it applies to: 95% exact task success per question.
#
# `ec.freeze_protocol` writes all of that as one line of an **append-only log**, a file that only
# grows, with a SHA-256 over the protocol, its **id**: a fingerprint that changes if any frozen
# field does.
# TinyGPT with the first-time wrapper is frozen too, as a comparison, *before* anything is revealed.
# (The log goes to a temporary folder, not the repository.)

# %% tags=["live"]
# Freeze both protocols, each with its target (95% task success per case), in an append-only log before any reserved case is read: ec.freeze_protocol; defines: log, anchor, reserved_ids, RULE, frozen_rule, frozen_tiny
log = ec.ProtocolLog(Path(tempfile.mkdtemp()) / "protocol_log.jsonl")
anchor = raters["anchors"]["after"]
reserved_ids = [c["id"] for c in reserved]
RULE = {"model": None, "wrapper": "source_rule"}  # no model: the rule reads the notice
TINY = {"model": rec["checkpoint"]["sha256"], "wrapper": "first_time"}
frozen_rule = ec.freeze_protocol(log, RULE, RUBRIC, anchor, reserved_ids,
                                 target=0.95, rate="task_success_per_case")
frozen_tiny = ec.freeze_protocol(log, TINY, RUBRIC, anchor, reserved_ids,
                                 target=0.95, rate="task_success_per_case")

# %%
# NBVAL_CHECK_OUTPUT
for name, f in [("source rule", frozen_rule), ("TinyGPT + first time", frozen_tiny)]:
    print(f"{name:<21} protocol {f['protocol_sha256'][:16]}...  cases {len(f['cases'])}")
print(json.dumps({k: frozen_rule[k] for k in ["candidate", "rubric", "threshold", "target", "rate", "cases"]}))
assert (frozen_rule["target"], frozen_rule["rate"]) == (0.95, "task_success_per_case")

# %% [markdown]
# The record holds two bars. The rubric's `threshold` (0.75, printed inside the rubric and again as
# its own field) is a pass mark for one answer. The `target` (0.95) is for the rate over the cases.
# Section 8 reads the target from this record: `ec.decision_brief` takes no target. So the decision
# cannot be given another one after the reveal without a new freeze, which the brief flags.
#
# The reserved cases cannot be scored any other way: `ec.score_development` refuses them.

# %%
try:
    ec.score_development(reserved, responses, notices, "source_rule", RUBRIC)
    refused = None
except ValueError as err:
    refused = str(err)
print(refused)
assert refused is not None and "reserved" in refused

# %%
rule_res = ec.reveal_reserved(log, frozen_rule["protocol_sha256"], task["cases"], responses,
                              notices)
tiny_res = ec.reveal_reserved(log, frozen_tiny["protocol_sha256"], task["cases"], responses,
                              notices)
questions = {c["id"]: c["question"] for c in reserved}  # seen only now, after the freeze
reserved_df = pd.DataFrame(rule_res)[["id", "reference", "delivered", "success", "gates_failed",
                                      "exposed"]]
reserved_df.insert(1, "question", reserved_df["id"].map(questions))
reserved_df

# %% [markdown]
# Every reserved case is now marked **exposed**. The rule's one miss, `bus-mon`, uses a template the
# development notices did not contain: the bus notice gives 07:50 "on weekdays", and the rule only
# looks for the day's name. Changing the rule in response would mean tuning it on these cases, which
# could then only count as development data.
#
# Suppose we change the protocol anyway, with a lower pass mark. The change is a **new** entry; the
# old line is untouched. The re-scored cases say they were seen before. `ec.frozen_target` lists
# which of the new protocol's cases were revealed before it was frozen. In the log table below, a
# "line hash" is a SHA-256 of the whole line, its "previous entry" (the line hash before it) included:

# %%
log_before = log.path.read_bytes()
relaxed = ec.Rubric(weights, gates=("source_support", "format"), threshold=0.5)
frozen_later = ec.freeze_protocol(log, RULE, relaxed, anchor, reserved_ids,
                                  target=frozen_rule["target"], rate=frozen_rule["rate"])
again = ec.reveal_reserved(log, frozen_later["protocol_sha256"], task["cases"], responses, notices)
assert log.path.read_bytes().startswith(log_before)  # appended, never rewritten
assert all(r["previously_exposed"] for r in again)  # the second look is not fresh evidence
seen_before = ec.frozen_target(log, frozen_later["protocol_sha256"])["exposed_before"]
print("revealed before the later freeze:", seen_before)
assert seen_before == sorted(reserved_ids), seen_before  # frozen after the reveal: flagged
pd.DataFrame([{"#": e["index"], "kind": e["kind"], "protocol": e["protocol_sha256"][:12],
               "cases": len(e["cases"]), "line hash": e["entry_sha256"][:12],
               "previous entry": (e["prev_sha256"] or "-")[:12]}
              for e in log.verify()])

# %% [markdown]
# So editing an earlier line in place breaks the chain, and `log.verify()` raises. A target edited
# with every line hash redone is refused too: the entry no longer hashes to its protocol id, which
# the brief is handed from the freeze. A target set by a new freeze after the reveal is flagged as a
# protocol change, not blocked.
#
# **How sure are we?**
#
# - The log vouches only for what *this* workflow did: the reserved cases were not scored before the
#   freeze.
# - It cannot vouch for the wider world. The cases are published with the course, so anyone,
#   including whoever trains a future model, may have read them. Test material that reached a
#   model's training text is **contamination** (lesson 15). Going further E checks TinyGPT's.
# - The flag sees only protocols frozen after their cases were revealed. Several frozen before, one
#   chosen afterwards with the results in view, are not flagged; only the log shows every freeze.
# - The refusal needs the id from the freeze: a log rewritten under a new id, every hash redone,
#   would pass `verify()` unflagged.
#
# *Sources:* `tests/test_06_evidence.py` edits the log, and freezes a new target after a reveal.

# %% [markdown]
# ## 7. Report what was established
#
# **On the reserved cases the rule answered 4 of 5 questions right, and TinyGPT none.** Five cases
# cannot pin a rate down, so each figure is reported as k/n with its interval.
#
# Every rate comes with a 95% **Wilson score interval** (lesson 02). It behaves sensibly at 0/n and
# n/n, where the textbook $\hat p \pm 1.96\sqrt{\hat p(1-\hat p)/n}$ collapses to a point. Our
# figures, with every case treated as independent:

# %%
# NBVAL_CHECK_OUTPUT
dev_rule = ec.score_development(dev, responses, notices, "source_rule", RUBRIC)
dev_tiny = ec.score_development(dev, responses, notices, "first_time", RUBRIC)
report = ec.rate_table({"source rule, development": dev_rule, "source rule, reserved": rule_res,
                        "TinyGPT + first time, development": dev_tiny,
                        "TinyGPT + first time, reserved": tiny_res})
print(report.to_string(index=False))
k_rule, k_tiny = ec.success_rate(rule_res).k, ec.success_rate(tiny_res).k
assert (k_rule, k_tiny) == (4, 0), f"expected 4 and 0 reserved successes, got {k_rule} and {k_tiny}"

# %%
fig, ax = plt.subplots(figsize=(8, 4))
for i, row in report.iterrows():
    colour = "tab:green" if "rule" in row["group"] else "tab:purple"
    ax.errorbar(i, row["rate"], yerr=[[row["rate"] - row["low"]], [row["high"] - row["rate"]]],
                fmt="o", color=colour, capsize=6, markersize=8)
    ax.annotate(f"{row['successes']}/{row['n']}", (i, row["rate"]), xytext=(10, -4),
                textcoords="offset points")
ax.set_xticks(range(len(report)), [g.replace(", ", "\n") for g in report["group"]], fontsize=8)
ax.axhline(frozen_rule["target"], color="tab:red", linestyle="--",
           label=f"frozen target {frozen_rule['target']:.0%}")
ax.set(xlim=(-0.5, len(report) - 0.3), ylim=(-0.05, 1.05), xlabel="candidate and split",
       ylabel="exact task success (95% Wilson interval)",
       title="Development vs reserved task success")
ax.legend(loc="center right")
plt.show()

# %% [markdown]
# ### A different metric: every question on a notice right
#
# **Counting notices answered in full is a different metric, and it cannot be held to the
# per-question target.** The 5 reserved questions come from only 3 notices (the 9 development ones
# from 5). On this metric a notice succeeds only when every question on it is right: the rule
# answers 2 of 3 reserved notices in full.
#
# A system right on exactly 95% of questions, each independently, gets a notice of two questions
# fully right only 0.95² ≈ 90% of the time, and one of one question 95% of the time. Our reserved
# notices hold one, two and two questions, so the cell prints the mean, (0.95 + 2 × 0.95²)/3 ≈ 0.918:

# %%
# NBVAL_CHECK_OUTPUT
sizes = pd.Series([r["source_group"] for r in rule_res]).value_counts().sort_index()
full_at_95 = float((0.95 ** sizes).mean())  # each question right with probability 0.95, independently
print("reserved questions per notice:", sizes.to_dict())
print(f"notices answered in full: {ec.all_right_rate(rule_res)}")
print(f"a system right on exactly 95% of questions answers in full {full_at_95:.3f} of these notices")
assert abs(full_at_95 - 0.918) < 5e-4 and full_at_95 < 0.95

# %% [markdown]
# So a rule that met the 95% target exactly would fail a 95% target on notices answered in full, by
# construction. A team may want that metric (a learner reads one notice and asks several questions).
# Then it needs its own target, set before the reveal, such as "notices answered in full, at least
# 90%". Our protocol froze none, so we report it as a description and decide nothing on it.
#
# Behind the rates: each failed case, the notices the cases came from, and what was excluded. The
# last line checks for **critical failures**, delivered times the notice does not back:

# %%
# NBVAL_CHECK_OUTPUT
for r in [r for r in rule_res if not r["success"]]:
    print(f"rule failure {r['id']}: delivered {r['delivered']!r}, reference {r['reference']!r}; "
          f"notice: {notices[r['source_group']]!r}")
print("development groups:", groups["development"], "| reserved groups:", groups["reserved"])
print("excluded: none; the 14 authored responses enter no rate (rubric and rater material only)")
print("exposed after the reveal:", log.exposed())
assert ec.critical_failures(rule_res) == []  # the miss was an 'unknown', not a wrong time

# %% [markdown]
# **How sure are we?** Every per-question interval here treats the questions as independent draws,
# and the 2/3 treats the notices as independent. Questions on one notice are not independent: Going
# further F resamples whole notices instead.

# %% [markdown]
# ## 8. The decision brief
#
# **The evidence restricts the rule and rejects TinyGPT.** The rule's interval straddles the frozen
# 95% target, and TinyGPT's tops out far below it.
#
# A **decision brief** states the intended use, the case mix, the evidence and its limits, then
# decides:
#
# - **accept**: the whole interval lies at or above the target;
# - **reject**: even its top falls short, or the system delivered a wrong time (the failure that
#   sends a learner to the wrong place);
# - **restrict**: the evidence neither clears nor rules out the target, so allow only a narrower use.
#
# This brief treats the cases as independent (a Wilson interval).
#
# The second reason sets three figures side by side:
#
# - the rate with cases independent;
# - the rate with whole notices resampled, a **cluster bootstrap** (Wilson over notices where that
#   cannot vary; Going further F);
# - notices answered in full (section 7).


# %%
# NBVAL_CHECK_OUTPUT
use = "answer learners' time questions from approved school notices"
candidates = [("source rule", rule_res, frozen_rule), ("TinyGPT + first time", tiny_res, frozen_tiny)]
briefs = {name: ec.decision_brief(name, use, recs, log, f["protocol_sha256"])  # the frozen target
          for name, recs, f in candidates}
for b in briefs.values():
    print(f"{b['candidate']}, cases independent: {b['decision'].upper()}")
    for line in b["reasons"] + b["would_change"]:
        print("   -", line)
assert briefs["source rule"]["decision"] == "restrict"
assert briefs["TinyGPT + first time"]["decision"] == "reject"
assert all(b["target"] == 0.95 and b["protocol_change"] == [] for b in briefs.values())

# %% [markdown]
# **The rule is restricted.** Its 4/5 has a Wilson interval of 37.6% to 96.4%, which straddles the
# target.
#
# Notices answered in full (2/3, Wilson 20.8% to 93.9%) would read reject, since even the top falls
# short. But that holds a different metric to the per-question target. Section 7 showed that a rule
# meeting that target would fail it by construction.
#
# Five questions on three notices cannot settle a 95% claim either way. Lifting the Wilson lower
# bound to 95% would take 105 further questions answered right, none failing. They should come from
# new notices: questions on a notice already seen add less than independent ones (section 1).
#
# **A protocol gap remains.** The protocol froze the rate and the target, but not how the interval
# treats questions that share a notice. Here the choice does not change the decision (Going further
# F), but choosing it after the reveal is a protocol change made with the results in view. The next
# protocol should freeze it: resample notices, with enough reserved notices for that to mean
# something, or else Wilson over notices. Three notices do not: a resample's rate never falls below
# the worst notice's (Going further F). It should also freeze a target for notices answered in full
# if the team wants that metric, before any fresh reserved notices are revealed. (evalcore freezes
# targets for the per-question rate only, so far.)

# %% [markdown]
# ### Could clarity have changed the decision?
#
# **No. Under the frozen rubric clarity cannot change a verdict, and the brief, deciding on exact
# task success alone, never reads the rubric. So the rater work fed no decision.** The protocol
# froze a clarity anchor, and section 5 spent real effort on it. Check every combination of the
# three labels under the frozen rubric, with clarity 0 and with clarity 1:

# %%
# NBVAL_CHECK_OUTPUT
import itertools

changes = []
for support, fmt in itertools.product([0, 1], repeat=2):
    verdicts = [ec.rubric_score({"source_support": support, "format": fmt, "clarity": c}, RUBRIC)
                for c in (0, 1)]
    print(f"support {support} format {fmt}: clarity 0 -> passed {verdicts[0]['passed']}, "
          f"clarity 1 -> passed {verdicts[1]['passed']}")
    changes += [(support, fmt)] if verdicts[0]["passed"] != verdicts[1]["passed"] else []
in_contract = [ec.anchored_clarity(v) for v in ["16:15", "unknown"]]
print("combinations where clarity changes the verdict:", changes or "none")
print("clarity of any answer that passes the format gate:", in_contract)
assert changes == [] and in_contract == [1, 1], f"expected no changes and [1, 1], got {changes}, {in_contract}"


# %% [markdown]
# Clarity is redundant twice over:
#
# - With both gates passed, the score is at least (2 + 1 + 0)/4 = 0.75, the pass mark. So clarity's
#   weight of 1 can only move a score that has already passed. With a gate failed, nothing passes.
# - Anything that passes the format gate is a bare time or `unknown`, which the anchored reading
#   always calls clear.
#
# That is a design flaw of this protocol as frozen, not a finding about clarity. Making clarity
# matter to a verdict would mean, for example, a gate on it or a pass mark of 1.0, with a use in which
# a delivered answer can be more than a bare value. That needs a new frozen protocol and fresh
# reserved notices: the revealed ones are exposed. Reaching the decision would also need a brief that
# reads the rubric. Going further G writes out the whole brief in words.

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - Define success before looking: a contract (one `HH:MM` or `unknown`), and a split by **source
#   group**.
# - Reference loss is the mean of $-\log_2 p$ over the correct tokens; a rule has none, not 0.
#   TinyGPT spends 10.9 bits per byte on `16:15` and 0.025 on `Paris`.
# - TinyGPT succeeds on 0/9 development cases, raw or wrapped, and the rule on 9/9. A wrapper changes
#   what is delivered, never the loss.
# - Clarity-only weights pass a fluent wrong answer; a gate on source support stops it.
# - A sharper anchor lifted the raters' kappa from 0.11 to 0.86, in-sample.
# - The target was frozen before the reveal, and the brief read it from an append-only log.
# - The rule scored 4/5 reserved questions (Wilson 38% to 96%), and TinyGPT 0/5: restrict the rule,
#   reject TinyGPT, in both readings of the interval (Going further F).
# - "Every question on a notice right" (2/3) is another metric, and needs its own target.
#
# **What it did not establish**
#
# - That the anchor makes raters agree on new responses, or any kappa interval worth trusting at
#   n = 14.
# - Any effect of clarity on the decision: under the frozen rubric it cannot change a verdict, and the
#   brief never reads the rubric.
# - How the rule does on notices in general: 3 reserved notices by one author, in a few templates.
# - How well the cluster bootstrap covers with 3 notices (coverage, lesson 05).

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer and, if it is not right yet, say what they expected.

# %% [markdown]
# ### Exercise 1: Another wrapper
#
# Write `wrap_last_time(response, notice=None, question=None)`: it delivers the *last* time in the
# response, and otherwise behaves like `ec.wrap_first_time`. On the fourteen authored responses,
# list the ids it gets right and the first-time wrapper gets wrong (`fixed`), and the other way
# round (`broken`).
#
# *Hint:* copy the shape of `ec.wrap_first_time`; `re.findall(r"\d\d:\d\d", text)` finds the
# times. `authored`, `examples` and `by_id` (section 3) give each response and its case. Watch `x03`
# and `x10`.

# %%
# Exercise 1: define `wrap_last_time`; store the authored ids it fixes in `fixed`, those it breaks
#   in `broken`.
### BEGIN SOLUTION
def wrap_last_time(response, notice=None, question=None):
    times = re.findall(r"\b\d\d:\d\d\b", response)
    return times[-1] if times else ec.wrap_first_time(response)


def authored_ok(wrapper, xid):
    return ec.task_success(wrapper(authored[xid], None, None), by_id[examples[xid]["case"]]["reference"])


fixed = [x for x in examples if authored_ok(wrap_last_time, x) and not authored_ok(ec.wrap_first_time, x)]
broken = [x for x in examples if authored_ok(ec.wrap_first_time, x) and not authored_ok(wrap_last_time, x)]
for w in (ec.wrap_first_time, wrap_last_time):
    print(f"{w.__name__}: {sum(authored_ok(w, x) for x in examples)} of {len(examples)} right")
print("fixed:", fixed, "| broken:", broken)
### END SOLUTION
assert wrap_last_time("Monday 09:00, Tuesday 13:30.") == "13:30", \
    f"expected the later of two times; got {wrap_last_time('Monday 09:00, Tuesday 13:30.')!r}"
assert wrap_last_time("unknown.") == "unknown" and wrap_last_time("no idea") == "no idea", \
    f"expected 'unknown' and other text without a time to behave as in ec.wrap_first_time; got " \
    f"{wrap_last_time('unknown.')!r} and {wrap_last_time('no idea')!r}"
_ok = {w: {x: ec.task_success(w(authored[x], None, None), by_id[examples[x]["case"]]["reference"])
           for x in examples} for w in (ec.wrap_first_time, wrap_last_time)}
assert sorted(fixed) == sorted(x for x in examples if _ok[wrap_last_time][x] and not _ok[ec.wrap_first_time][x]), \
    f"expected the authored ids the last-time wrapper gets right and the first-time one wrong; got {fixed}"
assert sorted(broken) == sorted(x for x in examples if _ok[ec.wrap_first_time][x] and not _ok[wrap_last_time][x]), \
    f"expected the authored ids the first-time wrapper gets right and the last-time one wrong; got {broken}"
assert fixed and broken, f"expected the last-time wrapper to fix one response and break another; got {fixed}, {broken}"
print("Exercise 1: check passed.")

# %% [markdown] tags=["solution"]
# The two wrappers score the same total, on different cases. Taking the last time repairs `x03` and
# breaks `x10`, where the question's day comes first. A single count hides that trade; the list of
# cases shows it.

# %% [markdown]
# ### Exercise 2: Does the loss prefer the right time?
#
# For each development case with a time reference, compute the reference loss (mean bits per token)
# of *every* time its notice names, the correct one included. Store them in `time_losses`, a dict from case id to
# `{time: mean bits}`. List in `preferred` the case ids whose reference is the cheapest time. Does a
# low loss pick out the right answer?
#
# *Hint:* `ec.reference_loss(model, tok, case_prompt(c), t).mean_bits` for a time `t`;
# `re.findall(r"\d\d:\d\d", notice)` lists a notice's times.

# %%
# Exercise 2: store {case id: {time in its notice: mean bits}} in `time_losses`, the ids where the
#   reference is cheapest in `preferred`.
### BEGIN SOLUTION
time_losses = {}
for c in dev:
    if c["reference"] != ec.UNKNOWN:
        times = sorted(set(re.findall(r"\d\d:\d\d", notices[c["source_group"]])))
        time_losses[c["id"]] = {t: ec.reference_loss(model, tok, case_prompt(c), t).mean_bits for t in times}
preferred = [i for i, d in time_losses.items() if min(d, key=d.get) == by_id[i]["reference"]]
for i, d in time_losses.items():
    print(f"{i:<13} reference {by_id[i]['reference']}:", {t: round(b, 2) for t, b in d.items()})
print("the reference is the cheapest time on:", preferred)
### END SOLUTION
_time_cases = sorted(c["id"] for c in dev if c["reference"] != ec.UNKNOWN)
assert sorted(time_losses) == _time_cases, \
    f"expected one entry per development case with a time reference; got {sorted(time_losses)}"
_wrong_times = [i for i in time_losses
                if set(time_losses[i]) != set(re.findall(r"\d\d:\d\d", notices[by_id[i]["source_group"]]))]
assert not _wrong_times, f"expected every time its notice names, and no other, for each case; not so for {_wrong_times}"
_off = [i for i in time_losses if abs(time_losses[i][by_id[i]["reference"]] - dev_loss[i].mean_bits) > 1e-6]
assert not _off, f"expected each reference's mean bits per token to match section 2's dev_loss; it differs for {_off}"
assert sorted(preferred) == sorted(i for i, d in time_losses.items() if min(d, key=d.get) == by_id[i]["reference"]), \
    f"expected the case ids whose reference has the lowest loss among its notice's times; got {preferred}"
print("Exercise 2: check passed.")

# %% [markdown] tags=["solution"]
# The loss picks out the right time on two of the five cases, and one of those, `choir-mon`, has only
# one time to choose from. On `exams-tue`, `library-wed` and `swimming-fri` the model finds a wrong
# time from the same notice cheaper. TinyGPT never saw a notice (section 2), so its preferences among
# clock times say something about digits, not the question. A loss can rank answers only for a model
# that has learnt the task.

# %% [markdown]
# ### Exercise 3: How much evidence is enough?
#
# The rule scored 4/5 reserved cases and 2/3 reserved notices in full (section 7's other metric). For
# each metric, how many further successes, with no failures, would lift its Wilson lower bound to
# 90%? To 95%? Store the answers in `needed`, a dict
# `{"cases": {0.9: ..., 0.95: ...}, "notices": {0.9: ..., 0.95: ...}}`.
#
# *Hint:* `ec.cases_needed`, and `ec.all_right_rate(rule_res)` for the notices answered in full.

# %%
# Exercise 3: store the further all-success units needed, per unit ("cases", "notices") and target
#   (0.9, 0.95), in `needed`.
### BEGIN SOLUTION
units = {"cases": ec.success_rate(rule_res), "notices": ec.all_right_rate(rule_res)}
needed = {u: {t: ec.cases_needed(r.k, r.n, t) for t in (0.9, 0.95)} for u, r in units.items()}
print(" | ".join(f"{u} ({units[u].k}/{units[u].n}): {n}" for u, n in needed.items()))
### END SOLUTION
_rates = {"cases": ec.success_rate(rule_res), "notices": ec.all_right_rate(rule_res)}
assert set(needed) == set(_rates) and all(set(needed[u]) == {0.9, 0.95} for u in needed), \
    f"expected needed[unit][target] for the units 'cases' and 'notices' and the targets 0.9 and 0.95; got {needed!r}"
_low = {(u, t): ec.wilson_interval(_rates[u].k + m, _rates[u].n + m)[0] for u in needed for t, m in needed[u].items()}
assert all(low >= t for (u, t), low in _low.items()), \
    f"expected each count to lift the Wilson lower bound to its target; got {needed!r}"
assert all(m == 0 or ec.wilson_interval(_rates[u].k + m - 1, _rates[u].n + m - 1)[0] < t
           for u in needed for t, m in needed[u].items()), \
    f"expected the smallest such count, one fewer falling short of the target; got {needed!r}"
print("Exercise 3: check passed.")

# %% [markdown] tags=["solution"]
# Notices answered in full need more further successes than cases, for both targets. The one miss
# weighs more among three units than among five (107 against 105 for 95%). The two counts answer
# different questions, though. Only the cases count belongs to the per-question target. A target for
# notices answered in full would be set on its own, and lower (section 7).

# %% [markdown]
# ### Exercise 4: Teach the rule "weekdays"
#
# Write `weekday_rule(response, notice, question)`. It answers as `ec.wrap_source_rule` does, but
# when that gives `unknown` for a question about Monday to Friday, it takes the time of a clause that
# says "weekdays". It must make `bus-mon` succeed and keep every development case right. Then list
# in `fresh` the reserved case ids the protocol log has *not* marked as exposed, which could still be
# fresh evidence. Why is a perfect re-score on the reserved cases no longer evidence, and what would
# you need instead?
#
# *Hint:* split a notice into clauses with `re.split(r"(?<=[.;,])\s+", notice)`. See `log.exposed()`,
# and the re-scoring cell in section 6 (`previously_exposed`).

# %%
# Exercise 4: define `weekday_rule(response, notice, question)`; store the reserved ids still
#   unexposed in `fresh`.
### BEGIN SOLUTION
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday"]


def weekday_rule(response, notice, question):
    answer = ec.wrap_source_rule(response, notice, question)
    if answer != ec.UNKNOWN or not any(re.search(rf"\b{d}\b", question, re.I) for d in WEEKDAYS):
        return answer
    for clause in re.split(r"(?<=[.;,])\s+", notice):
        times = re.findall(r"\b\d\d:\d\d\b", clause)
        if re.search(r"\bweekdays\b", clause, re.I) and times:
            return times[0]
    return ec.UNKNOWN


rescored = [ec.task_success(weekday_rule(responses[c["id"]], notices[c["source_group"]], c["question"]),
                            c["reference"]) for c in reserved]
fresh = [i for i in reserved_ids if i not in log.exposed()]
print(f"reserved, re-scored with the new rule: {sum(rescored)}/{len(rescored)}; still unexposed: {fresh}")
### END SOLUTION
_cases = {c["id"]: c for c in task["cases"]}
_bus = _cases["bus-mon"]
_bus_answer = weekday_rule(responses[_bus["id"]], notices[_bus["source_group"]], _bus["question"])
assert ec.task_success(_bus_answer, _bus["reference"]), f"expected bus-mon to succeed; got {_bus_answer!r}"
_lost = [c["id"] for c in dev if not ec.task_success(
    weekday_rule(responses[c["id"]], notices[c["source_group"]], c["question"]), c["reference"])]
assert not _lost, f"expected every development case still right; wrong on {_lost}"
assert weekday_rule("I do not know.", "Open at 09:00 on weekdays.", "When does it open on Saturday?") == ec.UNKNOWN, \
    "expected a Saturday question to stay unknown: Saturday is not a weekday"
assert sorted(fresh) == sorted(i for i in reserved_ids if i not in log.exposed()), \
    f"expected the reserved ids that log.exposed() does not list; got {fresh}"
print("Exercise 4: check passed.")

# %% [markdown] tags=["solution"]
# The new rule gets all five reserved cases, but `fresh` is empty: every reserved case was exposed at
# the reveal, and the change was made *because* of `bus-mon`. A rule tuned on a case scores well on
# it, so the 5/5 is development evidence, as the raters' 0.86 was in-sample. A re-score under a new
# frozen protocol would come back `previously_exposed`. Evidence needs new notices from new source
# groups, reserved and frozen before the rule is scored on them, ideally with phrasings the fix did
# not see ("Monday to Friday", "school days").

# %% [markdown]
# ### Exercise 5: Make clarity matter
#
# Define `clarity_rubric`, a rubric under which clarity can change a verdict (a gate, a pass mark,
# weights). Rerun section 8's check of all label combinations on it. List in `changed` the authored
# responses (delivered raw) whose verdict differs between `RUBRIC` and `clarity_rubric`. Why could
# this rubric not be scored on the revealed reserved cases?
#
# *Hint:* `ec.Rubric(weights, gates=..., threshold=...)`, and
# `ec.score_development(authored_cases, authored, notices, "raw", rubric)`. With the format gate in
# place, is clarity ever 0?

# %%
# Exercise 5: store a rubric in which clarity can change a verdict in `clarity_rubric`; the authored
#   ids whose verdict changes in `changed`.
### BEGIN SOLUTION
clarity_rubric = ec.Rubric(weights, gates=("source_support", "clarity"), threshold=0.75)  # format: points only
for support, fmt in itertools.product([0, 1], repeat=2):
    verdicts = [ec.rubric_score({"source_support": support, "format": fmt, "clarity": c}, clarity_rubric)
                for c in (0, 1)]
    print(f"support {support} format {fmt}: clarity 0 -> passed {verdicts[0]['passed']}, "
          f"clarity 1 -> passed {verdicts[1]['passed']}")
old, new = (ec.score_development(authored_cases, authored, notices, "raw", r) for r in (RUBRIC, clarity_rubric))
changed = [o["id"] for o, n in zip(old, new) if o["passed"] != n["passed"]]
print("authored responses whose verdict changes:", changed)
### END SOLUTION
_flips = [(s, f) for s, f in itertools.product([0, 1], repeat=2)
          if len({ec.rubric_score({"source_support": s, "format": f, "clarity": c}, clarity_rubric)["passed"]
                  for c in (0, 1)}) == 2]
assert _flips, f"expected clarity to change the verdict for some labels; it never does under {clarity_rubric}"
_verdicts = [[r["passed"] for r in ec.score_development(authored_cases, authored, notices, "raw", rub)]
             for rub in (RUBRIC, clarity_rubric)]
assert sorted(changed) == sorted(x for x, p, q in zip(authored, *_verdicts) if p != q), \
    f"expected the authored ids whose verdict differs between RUBRIC and clarity_rubric; got {changed}"
print("Exercise 5: check passed.")

# %% [markdown] tags=["solution"]
# A gate on clarity alone changes nothing while the format gate stays: every answer that passes it is
# a bare value, which the anchored reading always calls clear. So the solution drops the format gate
# and keeps format as points, a different intended use (a sentence may now be delivered). Under it
# `x05`, `x06`, `x11` and `x14` pass: correct, supported, single-value sentences. This rubric is a
# protocol change made after the reveal, so the reserved cases are exposed to it. Scoring them would
# look like evidence and would not be; it needs a new frozen protocol and fresh reserved notices.

# %% [markdown]
# ## Going further
#
# Seven deeper looks at what the lesson found, each marked with its section. They use only names
# defined before the Summary.
#
# ### A. Averaging over cases or over tokens (section 2)
#
# **Here the choice of average moves the loss figure.** A time is five bytes and `unknown` is seven.
# So a mean over *all tokens* of all cases gives the `unknown` cases more say than the time cases,
# while task success gives every case one vote. And the two kinds of reference cost the model
# different amounts:

# %%
# NBVAL_CHECK_OUTPUT
kinds = {"time": [l for c, l in zip(dev, dev_loss.values()) if c["reference"] != ec.UNKNOWN],
         "unknown": [l for c, l in zip(dev, dev_loss.values()) if c["reference"] == ec.UNKNOWN]}
for kind, ls in kinds.items():
    print(f"{kind:<8} references: {len(ls)}, {min(l.mean_bits for l in ls):.4g} to "
          f"{max(l.mean_bits for l in ls):.4g} bits per token")
per_case = sum(l.mean_bits for l in dev_loss.values()) / len(dev_loss)
pooled = sum(sum(l.bits) for l in dev_loss.values()) / sum(len(l.bits) for l in dev_loss.values())
print(f"mean over cases {per_case:.4g} bits | mean over all tokens {pooled:.4g} bits")
assert max(l.mean_bits for l in kinds["unknown"]) < min(l.mean_bits for l in kinds["time"])
assert pooled < per_case  # pooling gives the longer, cheaper 'unknown' references more weight

# %% [markdown]
# Every `unknown` costs the model less per byte than every clock time. Pooling the tokens counts each
# `unknown` seven times and each time five, so it pulls the figure down from 10.67 to 10.33 bits.
# Neither average is wrong. But two loss figures are comparable only if they were averaged the same
# way.

# %% [markdown]
# ### B. Five candidates under the frozen rubric (section 4)
#
# **The gates stop good sentences that break the contract, and the wrapper breaks true ones.** The
# chart scores five candidates under the rubric of section 4:
#
# - TinyGPT's recorded answers, raw and wrapped, and the source rule, all on the nine development
#   cases;
# - the fourteen authored responses, raw and wrapped.
#
# Its bars are the mean weighted score, the share passing on points alone, and the share passing once
# the gates apply. The label above each group counts gate failures among answers that had enough
# points.

# %%
POINTS_ONLY = ec.Rubric(weights, threshold=0.75)  # the frozen rubric without its gates
setups = {"TinyGPT\nraw": (dev, responses, "raw"),  # candidate: (cases, responses, wrapper)
          "TinyGPT\n+first time": (dev, responses, "first_time"),
          "source\nrule": (dev, responses, "source_rule"),
          "authored\nraw": (authored_cases, authored, "raw"),
          "authored\n+first time": (authored_cases, authored, "first_time")}
rubric_rows = []
for name, (cases, resp, w) in setups.items():
    gated_recs = ec.score_development(cases, resp, notices, w, RUBRIC)
    points = ec.score_development(cases, resp, notices, w, POINTS_ONLY)
    rubric_rows.append({"candidate": name, "n": len(cases),
                        "mean score": sum(r["rubric_score"] for r in gated_recs) / len(cases),
                        "pass (points)": sum(r["passed"] for r in points) / len(cases),
                        "pass (gated)": sum(r["passed"] for r in gated_recs) / len(cases),
                        "stopped by a gate": sum(p["passed"] and not g["passed"]
                                                 for p, g in zip(points, gated_recs))})
rubric_df = pd.DataFrame(rubric_rows).round(4)

# %%
fig, ax = plt.subplots(figsize=(10, 4))
x = range(len(rubric_df))
for k, (col, colour) in enumerate([("mean score", "tab:gray"), ("pass (points)", "tab:orange"),
                                   ("pass (gated)", "tab:green")]):
    xs = [i + (k - 1) * 0.27 for i in x]
    ax.bar(xs, rubric_df[col], width=0.27, color=colour, label=col)
    for xi, v in zip(xs, rubric_df[col]):
        ax.text(xi, v + 0.01, f"{v:.2f}", ha="center", fontsize=7)
for i, row in rubric_df.iterrows():
    ax.text(i, 1.1, f"gates stopped {row['stopped by a gate']} of {row['n']}", ha="center",
            fontsize=8)
ax.set_xticks(list(x), [f"{c}\n(n={n})" for c, n in zip(rubric_df["candidate"], rubric_df["n"])])
ax.set(ylim=(0, 1.2), ylabel="share / mean score (0-1)", xlabel="candidate (cases scored)",
       title="Rubric by candidate: weights 2/1/1, pass mark 0.75, gates on support and format")
ax.legend(loc="center left", fontsize=8)
plt.show()

# %%
# NBVAL_CHECK_OUTPUT
flat = rubric_df.assign(candidate=rubric_df["candidate"].str.replace("\n", " "))
print(flat.to_string(index=False))
assert rubric_df["stopped by a gate"].iloc[3] > 0  # fluent, true, but not in the contract's shape
assert (rubric_df["pass (gated)"] <= rubric_df["pass (points)"]).all()


# %% [markdown]
# A weighted score on its own hides all three of these:
#
# - On the raw authored answers, four responses earn 0.75 on points (supported and clear) and are
#   stopped by the format gate. They are good sentences, but the service promised a single value.
# - The wrapper lifts the authored answers' pass rate from 0.14 to 0.50. But in `x03` and `x08` it
#   turns a true sentence into a wrong time. Source support then drops to 0, and with its weight of 2
#   that alone sinks them to 0.5, below the pass mark. They fail on points before any gate is needed.
# - The two answers the gates still stop after wrapping, `x05` and `x11`, are correct sentences with
#   no time in them. The wrapper leaves them as they are, and the format gate fails them.
#
# So print the per-case task success and the list of gate failures next to a weighted score.

# %% [markdown]
# ### C. Why the kappa intervals cannot be trusted (section 5)
#
# **At n = 14, a bootstrap interval for kappa mostly says whether one item was drawn.** The cell
# below resamples the 14 items with replacement, 2000 times (the percentile bootstrap of lesson 01),
# and computes kappa on each resample.

# %%
# NBVAL_CHECK_OUTPUT
def kappa_stat(values, weights):
    # Cohen's kappa on each bootstrap resample: values (n, 2) = labels of A and B; weights (R, n) =
    # how many times each item is drawn in each resample (not the rubric's weights).
    a, b, total = values[:, 0], values[:, 1], weights.sum(-1)
    p_o = (weights * (a == b)).sum(-1) / total
    p_a, p_b = (weights * a).sum(-1) / total, (weights * b).sum(-1) / total
    p_e = p_a * p_b + (1 - p_a) * (1 - p_b)
    return (p_o - p_e) / (1 - p_e)  # nan where every resampled label is the same (kappa undefined)


def kappa_draws(a, b, copies=1):
    # kappa on each of 2000 resamples of the items (the labels repeated `copies` times), undefined ones left out
    draws = ec.bootstrap_distribution([[x, y] for x, y in zip(a * copies, b * copies)], statistic=kappa_stat)
    return draws[draws.isfinite()], int((~draws.isfinite()).sum())


degenerate = {}
for phase, a, b in [("before", a0, b0), ("after", a1, b1)]:
    kept, undefined = kappa_draws(a, b)
    low, high = torch.quantile(kept, torch.tensor([0.025, 0.975], dtype=kept.dtype)).tolist()
    degenerate[phase] = {"exactly 0": (kept == 0).double().mean().item(),
                         "exactly 1": (kept == 1).double().mean().item()}
    print(f"{phase}: kappa {ec.cohen_kappa(a, b):.4g}, 95% bootstrap interval {low:.4g} to {high:.4g} "
          f"({undefined} of {len(kept) + undefined} resamples undefined, left out)")
    print(f"   resamples with kappa exactly 0: {degenerate[phase]['exactly 0']:.1%}, "
          f"exactly 1: {degenerate[phase]['exactly 1']:.1%}")
assert degenerate["before"]["exactly 0"] > 0.3 and degenerate["after"]["exactly 1"] > 0.3, degenerate

# %% [markdown]
# Look at what produced the ends of the two intervals:
#
# - Before the anchor, rater A says "unclear" to one response in 14. About a third of the resamples
#   (33%) miss that one response. Then A's labels are all 1, so $p_A = 1$ and $p_e = p_B$. That is
#   also the observed agreement $p_o$, so kappa is exactly 0. The interval's lower end is those
#   degenerate resamples, not a plausible kappa.
# - After the anchor, the two raters disagree on one response (`x08`). The 37% of resamples that miss
#   it agree perfectly and give kappa exactly 1, the interval's upper end.
#
# A resample misses a given item with probability (13/14)^14 ≈ 35%. With n items it is (1 − 1/n)^n,
# which hardly changes once n passes 10 and tends to e^-1 ≈ 37%. The 33% and 37% printed above are
# that 35%, seen through 2000 random resamples. So more items help only if they add to the rare
# cell, the cell of the confusion table that holds a single item. With one item there, a percentile
# interval is mostly a statement about whether that item was drawn.
#
# What would make an interval trustworthy is **more items**: enough that each rare cell (A's
# "unclear", the disputes) holds several of them. A resample misses all m items of a cell with
# probability about e^-m, 37% at m = 1 and under 1% at m = 5. Suppose the same pattern held on five
# times as many items (70, with five of each rare kind). Then the degenerate resamples all but
# vanish:

# %%
# NBVAL_CHECK_OUTPUT
for phase, a, b in [("before", a0, b0), ("after", a1, b1)]:
    kept, _ = kappa_draws(a, b, copies=5)
    low, high = torch.quantile(kept, torch.tensor([0.025, 0.975], dtype=kept.dtype)).tolist()
    print(f"{phase}, the 14 labels five times over: 95% interval {low:.4g} to {high:.4g}; "
          f"exactly 0: {(kept == 0).double().mean().item():.1%}, exactly 1: {(kept == 1).double().mean().item():.1%}")
    assert ((kept == 0) | (kept == 1)).double().mean().item() < 0.02

# %% [markdown]
# That is a thought experiment, not data. Repeating 14 labels five times is not 70 new responses, and
# the narrower interval it prints is not evidence about these raters. It shows what the study needs:
# new responses, rated by both raters, until the rare cells are no longer single items.

# %% [markdown]
# ### D. The code reading of the anchor, in and out of sample (section 5)
#
# **The code reading matches the raters on its own items, and misses two of eight new ones.**
# `ec.anchored_clarity` matches every label on which the raters agree. But it was written from these
# same items, so this too is in-sample:

# %%
machine = [ec.anchored_clarity(r) for r in authored.values()]
agreed = [i for i in range(len(a1)) if a1[i] == b1[i]]
assert all(machine[i] == a1[i] for i in agreed)
print(f"matches the raters on all {len(agreed)} agreed labels; "
      f"on the dispute (x08) it says {machine[list(examples).index('x08')]}")

# %% [markdown]
# A held-out check of the code reading is something we *can* run. Below are eight new responses to
# development questions, **authored for this check and fictional**. Each comes with the label the
# lesson's author gives it by reading the anchor text. They were not among the 14 that the anchor and
# the code were written from. This is one reader's reading, not a rater study. So it tests the code
# against the anchor's words, not the anchor against raters.

# %%
# NBVAL_CHECK_OUTPUT
held_out_clarity = [  # (case, authored response, the author's reading of the anchor)
    ("chess-thu", "Thursday, 16:15.", 1),
    ("exams-wed", "There is no history exam on the notice.", 1),
    ("swimming-fri", "Year 8 swims at twenty-five past eleven on Friday.", 1),  # one time, in words
    ("swimming-fri", "11:25 on Friday, not Thursday.", 1),  # one value; "not" points at the day
    ("choir-mon", "Choir is at 12:40, or maybe 12:45?", 0),  # two times and a question
    ("library-wed", "The library is open 08:00-18:00 on Wednesday.", 0),  # two times to choose from
    ("chess-fri", "I'm not sure; try 15:30.", 0),  # a hedge plus another day's time
    ("library-sat", "Closed for stocktaking, so there is no opening time on Saturday.", 1),
]
code_says = [ec.anchored_clarity(r) for _, r, _ in held_out_clarity]
misses = [(r, want, got) for (_, r, want), got in zip(held_out_clarity, code_says) if want != got]
print(f"code agrees with the anchor's reading on {len(held_out_clarity) - len(misses)} of "
      f"{len(held_out_clarity)} new responses")
for r, want, got in misses:
    print(f"  {r!r}: anchor says {want}, code says {got}")
assert len(misses) == 2, f"expected the code to miss 2 of the anchor's labels, got {misses}"

# %% [markdown]
# On its own 13 agreed items the code was perfect. On eight new ones it misses two, both in the same
# direction. It calls a clear answer unclear when the time is written in words, or when a "not"
# refers to something other than the time. Eight authored items cannot give a rate. But they are
# enough to show that "matches every agreed label" was a statement about the items the rule was
# written from.

# %% [markdown]
# ### E. What TinyGPT was trained on (section 6)
#
# **None of the notices' times or phrases occur in TinyGPT's training text.** For TinyGPT we can do
# better than usual, because its whole training text is in `data/fixtures.json`. The probes are every
# time the notices name, and a few of their words and phrases:

# %%
train = json.loads(ec.FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
train_text = " ".join(train["statements"] + [q + " " + a for q, a in train["qa"]])
probes = {t for n in notices.values() for t in re.findall(r"\d\d:\d\d", n)}  # every notice time
probes |= {"notice", "Notice", "chess", "Year 8", "library", "rehearsal", "Bus 7"}
found = sorted(p for p in probes if p in train_text)
print(len(probes), "probe strings; found in the training text:", found)
assert not any(p in train_text for p in probes)

# %% [markdown]
# That clears TinyGPT only. The cases are published, so a future model may still have read them
# (section 6).

# %% [markdown]
# ### F. Small numbers, and questions that share a notice (sections 7 and 8)
#
# **Few cases give wide intervals, and questions on one notice are not independent cases.** First, a
# check on intuition: one success in four.

# %%
# NBVAL_CHECK_OUTPUT
one_in_four = ec.success_rate([{"success": s} for s in (True, False, False, False)])
print(one_in_four)
assert abs(one_in_four.low - 0.0456) < 1e-4 and abs(one_in_four.high - 0.6994) < 1e-4

# %% [markdown]
# 25% on four cases is compatible with anything from about 5% to 70%. Four cases tell you about those
# four cases, and very little about how often the system would succeed in general.
#
# **Resampling whole notices changes the interval, not the rate, and here not the decision.** A
# Wilson interval also assumes that every case is an independent draw. Ours are not. Questions on one
# notice share its wording and its template, and section 1 already treats them as one piece of
# evidence when splitting.
#
# The target was frozen per question (95% of questions answered exactly), so the rate stays per
# question: k of n cases. What changes is how much that rate could move with other notices. For that
# we resample whole notices, a **cluster bootstrap**: each resample draws notices with replacement
# and keeps every question of each notice drawn. In evalcore it is
# `ec.success_rate(records, group_key="source_group")`. When every notice has the same rate (every
# one all right, say, or every one all wrong), every resample gives that rate and the bootstrap
# cannot vary at all. Then it falls back to Wilson with n = the number of notices, the cautious
# extreme that treats each notice as a single question.

# %%
# NBVAL_CHECK_OUTPUT
clustered = {}
for name, recs in [("source rule, development", dev_rule), ("source rule, reserved", rule_res)]:
    clustered[name] = ec.success_rate(recs, group_key="source_group")
    print(f"{name}:\n   cases independent:  {ec.success_rate(recs)}\n   notices resampled:  {clustered[name]}")
    per = {}
    for r in recs:
        per.setdefault(r["source_group"], []).append(r["success"])
    print("   per notice:", {g: f"{sum(v)}/{len(v)}" for g, v in per.items()})
reserved_rate = clustered["source rule, reserved"]
assert (reserved_rate.k, reserved_rate.n) == (4, 5), reserved_rate  # still per question
assert (reserved_rate.low, reserved_rate.high) == (0.5, 1.0), reserved_rate
assert "Wilson over 5" in clustered["source rule, development"].method

# %% [markdown]
# On the reserved cases the rate is still 4/5. Resampling the three notices gives 50% to 100%,
# against Wilson's 37.6% to 96.4% for five independent cases. The lower end is higher, though
# resampling notices is meant to be the more careful reading. A resample's rate is a weighted
# average of the notices' own rates (1/1, 1/2, 2/2), so it never falls below the worst of them, 1/2.
# With three notices the bootstrap is coarse: less cautious, not more.
#
# On the development cases every notice is all right, so every resample is 100%. A bootstrap that
# cannot move is no interval at all: the same failure the Wilson interval was chosen to avoid at
# n/n. The fallback, Wilson over the 5 notices, gives 56.6% to 100%.
#
# **How sure are we?**
#
# - The bootstrap is crude here. Three notices allow only 27 equally likely draws, so its ends are
#   the worst and best of a handful of possible rates. All three notices drawn as the bus notice
#   gives 1/2, and any draw without it gives 100%.
# - Both readings still assume the notices are independent draws from the notices the service will
#   meet. Eight notices by one author in a few templates are not.
#
# The same briefs as in section 8, with the interval resampling notices:

# %%
# NBVAL_CHECK_OUTPUT
notice_briefs = {name: ec.decision_brief(name, use, recs, log, f["protocol_sha256"],
                                         group_key="source_group")
                 for name, recs, f in candidates}
for b in notice_briefs.values():
    print(f"{b['candidate']}, notices resampled: {b['decision'].upper()}")
    for line in [b["reasons"][0], b["would_change"][0]]:
        print("   -", line)
in_full = ec.all_right_rate(rule_res)  # the other metric, held by mistake to the per-question target
print(f"notices answered in full {in_full}: held to 95% it would read 'reject'")
assert notice_briefs["source rule"]["decision"] == briefs["source rule"]["decision"] == "restrict"
assert notice_briefs["TinyGPT + first time"]["decision"] == "reject"
assert (in_full.k, in_full.n) == (2, 3) and in_full.high < 0.95, in_full
questions_needed = ec.cases_needed(4, 5, 0.95)
assert questions_needed == 105, f"expected 105 further questions, got {questions_needed}"

# %% [markdown]
# **Both readings restrict the rule and reject TinyGPT.** With the notices resampled, the rule's 4/5
# has an interval of 50% to 100%, which still straddles the target. Neither reading is strong: five
# questions on three notices cannot settle a 95% claim either way.

# %% [markdown]
# ### G. The brief in words (section 8)
#
# For the source rule, **decision: restrict** (details in the last two items):
#
# - **Intended use**: answer learners' time questions from approved notices, returning one time or
#   `unknown`.
# - **Case mix**: 14 questions on 8 invented notices in a handful of templates, 6 of them `unknown`.
#   Reserved: 5 questions on 3 notices.
# - **Evidence**: per question, 9/9 on development and 4/5 on reserved. With the cases treated as
#   independent, the Wilson intervals are 70% to 100% and 38% to 96%. With notices resampled, since
#   questions on a notice depend on each other, they are 57% to 100% and 50% to 100%. (At 9/9 the
#   bootstrap cannot vary, so the first is Wilson over 5 notices. With three notices the 50% is just
#   the worst notice's own rate.)
# - **Failures**: no wrong time was delivered. The one miss said `unknown` for a time the notice
#   states as "weekdays".
# - **Another metric**: notices answered in full, 5/5 and 2/3. The protocol froze no target for it.
# - **Rubric and raters**: under the frozen rubric the rule passes exactly where it succeeds. The
#   clarity criterion could not have changed any verdict, so the decision rests on task success
#   alone.
# - **Decision: restrict**, in either reading of the interval. The evidence neither shows that the
#   rule meets 95% per question nor rules it out. Allow only a narrower use: only notices in the
#   tested templates, with every `unknown` passed to a person. That is a new intended use, with its
#   own frozen protocol and its interval resampling notices.
# - **What would change it**: new notices from new source groups, sampled the way real notices
#   arrive. To accept, 105 further questions answered right, with none failing, would be needed to
#   lift the Wilson lower bound to 95%. More would be needed if several come from one notice. A
#   single wrong time would mean reject.
#
# TinyGPT is rejected in either reading, with 0/5 reserved cases. Its interval tops out near 43% with
# the cases independent, and near 56% over its 3 notices. Neither brief claims readiness. Filling in
# every field, or scoring well on the rubric, does not by itself show that the service is fit to
# deploy.
