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
# question. That contract is easy to state and easy to check, which makes it a good place to practise
# the part of evaluation that is not a formula: deciding what counts as success *before* looking at
# the answers, keeping the evidence that decided it, and reporting only what the evidence supports.
#
# **What you will learn**
#
# - to tell four measurements apart (prediction loss, exact task success, source support, human
#   judgement) and say what each one cannot establish on its own;
# - to compute a reference loss in bits under teacher forcing, token by token, including the edge
#   cases (probability 1 costs 0 bits, probability 0 costs infinity, an empty reference has nothing to
#   average, a rule has no loss at all);
# - what a wrapper (a post-processor between the model and the scorer) can fix and what it can break,
#   and why it never changes the model's loss;
# - to build a rubric with weights and mandatory gates, and see a fluent wrong answer pass without them;
# - to read rater disagreement with Cohen's kappa and a confusion table, sharpen a criterion
#   instead of averaging the disagreement away, and see why agreement measured on the items the
#   criterion was written from (this lesson's **in-sample trap**) is not evidence that it works;
# - to freeze a protocol (candidate, rubric, clarity reading, threshold, case list) in an append-only
#   log before revealing the reserved cases, and to report rates as k/n with an interval: Wilson when
#   cases are independent, a cluster bootstrap over notices when questions share a notice, ending in
#   an accept / restrict / reject brief; and why "every question on a notice right" is a different
#   metric that cannot be held to a per-question target;
# - why a bootstrap interval for kappa on 14 items cannot be trusted, and what would make it so;
# - to check that every part of a protocol can actually change its decision.
#
# **Time needed:** about 115 minutes. **Builds on:** lesson 01 (next-token loss), lesson 02 (exact match and
# normalisation), lesson 04 (judges) and lesson 05 (weights are a product decision).

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
# question, a reference (`HH:MM` or `unknown`) and a split. The model's answers come from a
# **recording**, `data/recording_06.json`: greedy completions of the shipped TinyGPT for every case,
# made once by `python evalcore.py record`. `ec.load_recording` refuses a recording whose checkpoint
# or notices file has changed since, so the recorded *answers* cannot drift when torch does. The
# reference losses in section 2 are different: they are computed live from the model, so a new torch
# version or machine can move them in the last digits (the checked prints round them).

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
# `HH:MM` time or the word `unknown`, *and* that value equals the reference. A polite sentence that
# contains the right time still fails: the software reading the answer expects a single value it
# can parse.
#
# **The split.** *Development* cases are open to us: we read them while building and tuning a
# system. *Reserved* cases are locked away before we settle on one, and stay unread until then. Questions on the same notice share one source,
# so they are one piece of evidence, not two: the split is made by source group, and
# `ec.check_split` refuses a notice that crosses it. Only the development questions are shown now.

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
# | prediction loss | how surprised the model is, token by token, by the correct answer | whether the text the service actually returns is usable |
# | exact task success | whether the returned value is precisely the reference time or `unknown` | helpfulness beyond this narrow contract, and safety |
# | source support | whether the approved notice backs each claim the answer makes | whether anything is missing, whether the shape is right, and facts the notice does not cover |
# | human judgement | whether a person following a written rubric finds the answer clear and fitting | correctness: raters can agree and still be wrong |
#
# The rest of the lesson measures all four on the same cases.

# %% [markdown]
# ## 2. Reference loss, made inspectable
#
# The loss of a reference answer asks: if we feed the model the prompt and then the *correct*
# reference one token at a time (**teacher forcing**: the model always sees the true earlier tokens,
# never its own guesses), what probability $p_i$ does it give each correct token? The surprise of a
# token is $-\log_2 p_i$ bits, and the reference loss is the mean over its $N$ tokens:
#
# $$L = \frac{1}{N}\sum_{i=1}^{N} -\log_2 p_i .$$
#
# In words: the average surprise per reference token.
# A token the model was sure of costs nothing; one it ruled out costs infinitely much.

# %%
# NBVAL_CHECK_OUTPUT
for p in [1, 0.5, 0.25, 0.01, 0]:
    print(f"p = {p:<5} -> {ec.surprise_bits(p):.4g} bits")
half_then_quarter = ec.mean_bits([ec.surprise_bits(0.5), ec.surprise_bits(0.25)])
print("mean of 1/2 then 1/4:", half_then_quarter, "bits per token")
print("mean over an empty reference:", ec.mean_bits([]))
assert half_then_quarter == 1.5 and ec.mean_bits([]) is None  # no tokens: no mean, not 0

# %% [markdown]
# An empty reference gives `None`: there is nothing to average, and writing 0 would claim a perfect
# prediction. Now the real model. `ec.reference_loss` runs TinyGPT once over prompt + reference and
# reads off the probability of each reference byte. The model is deterministic, so the notebook may
# use it here; the *answers* still come from the recording.

# %% tags=["live"]
# Reference loss by hand: build the prompt, then ec.reference_loss(model, tok, prompt, reference); defines: model, tok, case, prompt, loss
model, tok = ec.load_pretrained(), ec.InstructionTokenizer()
case = dev[0]  # chess-thu: the notice gives Thursday's time, 16:15
prompt = ec.notice_prompt(notices[case["source_group"]], case["question"])
loss = ec.reference_loss(model, tok, prompt, case["reference"])
pd.DataFrame({"token": loss.tokens, "probability": [f"{p:.3g}" for p in loss.probs],
              "bits": [round(b, 3) for b in loss.bits]})

# %% [markdown]
# For contrast, the same calculation on a question about a fact TinyGPT *was* trained on. The bar chart puts the
# two references side by side; note the logarithmic probability axis.

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
# The model never saw a notice or a clock time in training, and it shows: every byte of `16:15`
# costs it more than four bits, the second `1` more than twenty (a probability below one in five
# million), and the mean is about eleven bits per byte, against a few hundredths of a bit per byte
# for `Paris`. The loss is a fine diagnostic of what the model expects. It says nothing yet about
# what the service *delivers*.
#
# The loss of every development reference, with its length:

# %%
def case_prompt(c):
    return ec.notice_prompt(notices[c["source_group"]], c["question"])


dev_loss = {c["id"]: ec.reference_loss(model, tok, case_prompt(c), c["reference"]) for c in dev}
loss_table = pd.DataFrame([{"id": i, "reference": "".join(l.tokens), "tokens": len(l.tokens),
                            "mean bits": l.mean_bits, "total bits": sum(l.bits)}
                           for i, l in dev_loss.items()]).round(3)
loss_table

# %% [markdown]
# A time is five bytes and `unknown` is seven, so a mean over *all tokens* of all cases gives the
# `unknown` cases more say than the time cases, while task success gives every case one vote. Here
# that choice moves the figure, because the two kinds of reference cost the model different amounts:

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
# Every `unknown` costs the model less per byte than every clock time, so pooling the tokens, which
# counts each `unknown` seven times and each time five, pulls the figure down from 10.67 to 10.33
# bits. Neither average is wrong, but two loss figures are comparable only if they were computed the
# same way: the same tokenizer, the same reference strings, the same choice of which tokens count
# (here: the answer bytes, without an end marker) and the same averaging. A "bit" here measures
# surprise; it says nothing about the size of a file.
#
# A rule-based system has no probability distribution over tokens at all, so it has no loss. The
# tempting shortcut is to write 0:

# %%
# BUGGY ON PURPOSE: 0 bits claims the rule was sure of every token; it has no distribution at all
buggy_rule_bits = 0.0
rule_loss = ec.reference_loss(None, tok, prompt, case["reference"])  # correct: model None = a rule
print("buggy:", buggy_rule_bits, "| evalcore:", repr(rule_loss.mean_bits))
assert rule_loss.mean_bits == ec.NOT_APPLICABLE and rule_loss.mean_bits != 0

# %% [markdown]
# ## 3. Raw output, a wrapper, and a rule
#
# A **wrapper** sits between the model and the scorer and post-processes the raw text. evalcore has
# three, each a function `(response, notice, question) -> delivered answer`:
#
# - `ec.wrap_raw`: deliver the response as it is;
# - `ec.wrap_first_time`: deliver the first time found in the response (or `unknown` if it says so);
# - `ec.wrap_source_rule`: ignore the model; find the first clause of the notice that names the day
#   asked about and take its time (its last time when the question asks about closing). Easy to
#   read, and built to do well on the way these notices are written.
#
# Here is each one on TinyGPT's recorded answers for the development cases.

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
# TinyGPT's completions are babble: a 0.86M-parameter model trained on 170 short statements and
# question-answer pairs about capitals, animals and basic science knows nothing about notices: it
# repeats one letter, then a few fragments such as "does". There is no time in them to extract, so
# the first-time wrapper cannot help. The rule reads the notice itself and gets all nine. That is an
# honest result, and it is also a warning: nine cases from five notices, all written by the same
# person in the same few templates, are a narrow test.
#
# **The wrapper did not change the model.** Its loss is computed from the model and the reference
# alone, so the raw and wrapped candidates have the same loss by construction; the rule has none.

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
# To see a wrapper fix and break something we need answers that contain times. TinyGPT produces none,
# so we use fourteen **authored** responses, written for this lesson as illustrative answers to
# development cases (they are also what the raters read in section 5). One of them, `x12`, is babble
# copied from an earlier recording, made with a TinyGPT checkpoint that has since been retrained (the
# shipped model's answer to that case is different babble, checked below); the other thirteen were
# written by hand and come from no model. Two of them:

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
# `x02` had the right time followed by a question, so the raw text fails the contract and the
# wrapper repairs it. `x03` mentions Monday's maths exam before Tuesday's science exam: as written,
# every claim in it is true (it merely fails the format), but the wrapper keeps the first time and
# delivers `09:00`, a confident wrong answer. A post-processor belongs to the system being evaluated,
# so it is tested at the task level like any other part (see `tests/test_evidence.py`, which tests each wrapper without
# the reference file).

# %% [markdown]
# ## 4. Rubrics, weights and gates
#
# A rubric scores separate criteria. Ours has three binary ones: **source support** (the notice
# backs the answer), **format** (the contract's shape) and **clarity** (section 5 pins down what
# that means). The weighted score is $\sum_c w_c s_c / \sum_c w_c$. Take weights 2, 1, 1
# and an answer the notice does not back, though its shape and wording are fine: it scores
# $(0\cdot2 + 1\cdot1 + 1\cdot1)/4$:

# %%
# NBVAL_CHECK_OUTPUT
weights = {"source_support": 2, "format": 1, "clarity": 1}
unsupported = {"source_support": 0, "format": 1, "clarity": 1}
print(ec.rubric_score(unsupported, ec.Rubric(weights, threshold=0.5)))
assert ec.rubric_score(unsupported, ec.Rubric(weights))["score"] == 0.5

# %% [markdown]
# Half marks for a wrong answer. Now suppose someone decides clarity is what users notice and moves
# all the weight there. Authored response `x07` answers a question about Saturday, when the library
# is closed, with a fluent sentence about opening at 08:00:

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
# The answer is exactly as wrong as before; only the scoring rule moved. A **gate** is a
# criterion that fails the answer whatever its points: no amount of clarity buys back a wrong
# library time. The rubric we will freeze keeps weights 2, 1, 1, a pass mark of 0.75, and gates on
# source support and format (the contract is not negotiable).
#
# The chart scores five candidates under that rubric: TinyGPT's recorded answers raw and wrapped, the
# source rule (all on the nine development cases), and the fourteen authored responses raw and
# wrapped. Bars are the mean weighted score, the share passing on points alone, and the share passing
# once the gates apply; the label above each group counts gate failures among answers that had enough
# points.

# %%
RUBRIC = ec.Rubric(weights, gates=("source_support", "format"), threshold=0.75)
POINTS_ONLY = ec.Rubric(weights, threshold=0.75)  # the same, without gates
setups = {"TinyGPT\nraw": (dev, responses, "raw"),
          "TinyGPT\n+first time": (dev, responses, "first_time"),
          "source\nrule": (dev, responses, "source_rule"),
          "authored\nraw": (authored_cases, authored, "raw"),
          "authored\n+first time": (authored_cases, authored, "first_time")}

# %%
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
# On the authored answers, four responses earn 0.75 on points (supported and clear) and are
# stopped by the format gate: they are good sentences, but the service promised a single value. The
# wrapper lifts the authored answers' pass rate from 0.14 to 0.50, but in `x03` and `x08` it turns a
# true sentence into a wrong time. Source support then drops to 0, and with its weight of 2 that
# alone sinks them to 0.5, below the pass mark: they fail on points before any gate is needed. The
# two answers the gates still stop after wrapping, `x05` and `x11`, are correct sentences with no
# time in them: the wrapper leaves them as they are, and the format gate fails them. A weighted
# score on its own hides both effects, so print the per-case task success and the list of gate
# failures next to it.
#
# The source-support labels here come from `ec.source_support`, a coarse automatic check (every time
# named must appear in the notice, and the asked value must be among them). It is not a truth
# detector: it cannot tell which day a correctly copied time was attached to.

# %% [markdown]
# ## 5. When raters disagree
#
# Clarity needs a human reading. `data/raters.json` holds two raters' 0/1 clarity labels for the
# fourteen authored responses. **The raters and their labels are authored and fictional**: they were
# invented to show how a vague criterion splits two readers, and no study produced them. Rater A looks at the opening sentence; rater B asks
# whether a learner could act on the whole response without asking again. The first round used only
# the word "clear".

# %%
a0, b0 = ec.rater_labels(raters, "before", "A"), ec.rater_labels(raters, "before", "B")
pd.DataFrame({"id": list(examples), "response": list(authored.values()), "A": a0, "B": b0})

# %%
# NBVAL_CHECK_OUTPUT
kappa0 = ec.cohen_kappa(a0, b0)
print(f"agreement {ec.percent_agreement(a0, b0):.4g}, Cohen's kappa {kappa0:.4g}")
print("confusion (rows A = 0/1, columns B = 0/1):", ec.confusion_table(a0, b0))
assert abs(kappa0 - cohen_kappa_score(a0, b0)) < 1e-12  # evalcore agrees with scikit-learn

# %% [markdown]
# Half the labels agree, but A says "clear" to 13 of 14 responses, so two raters guessing with
# those rates would agree a good deal by chance. Cohen's kappa subtracts that chance agreement
# $p_e$ from the observed agreement $p_o$ and rescales: $\kappa = (p_o - p_e)/(1 - p_e)$. At about
# 0.11 the raters are barely doing better than chance.
#
# The tempting fix is to average the two labels:

# %% tags=["live"]
# Average the two raters (the bug), then keep every dispute with ec.rater_disputes instead
# BUGGY ON PURPOSE: the mean hides that the raters disagree on half the examples, and why
averaged = [(a + b) / 2 for a, b in zip(a0, b0)]
print("averaged clarity:", sum(averaged) / len(averaged))
disputes = pd.DataFrame(ec.rater_disputes(raters, "before"))  # correct: keep labels and reasons
disputes[["id", "response", "A_reason", "B_reason"]]

# %% [markdown]
# A mean of 0.68 reads as "mostly clear" and says nothing about the seven 0.5s behind it. The
# dispute list explains them: in each one, A judged the opening words and B judged whether the
# whole reply could be acted on. The fix is in the
# criterion, not the arithmetic. Both raters re-rated against a sharper **anchor**:

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


# %%
# NBVAL_CHECK_OUTPUT
def kappa_stat(values, weights):
    # Cohen's kappa on each bootstrap resample: values (n, 2) = labels of A and B, weights (R, n).
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
# Agreement rose from 0.11 to 0.86 in kappa, and one honest dispute remains (`x08`: is a time
# labelled as Monday's a "second time"?). That is the anchor's next revision, recorded rather than
# voted away. Agreement is not truth: both raters call `x07` clear, and it is wrong. That is why
# clarity sits beside source support and never replaces it.
#
# **These two intervals cannot be trusted.** Look at what produced their ends. Before the anchor,
# rater A says "unclear" to one response in 14. About a third of the resamples (33%) miss that one
# response, so A's labels are all 1, chance agreement equals observed agreement, and kappa is exactly
# 0: the interval's lower end is those resamples, not a plausible kappa. After the anchor the two
# raters disagree on one response (`x08`); the 37% of resamples that miss it agree perfectly and give
# kappa exactly 1, the interval's upper end. A resample misses a given item with probability
# (13/14)^14, about e^-1 = 37%, however many items there are; what matters is how many items sit in
# the rare cell. With one item there, a percentile interval is mostly a statement about whether that
# item was drawn. So at n = 14 report the kappa and the confusion table, and no interval.
#
# What would make an interval trustworthy is **more items**, enough that each rare cell (A's
# "unclear", the disputes) holds several of them: a resample misses all m items of a cell with
# probability about e^-m, 37% at m = 1 and under 1% at m = 5. If the same pattern held on five times
# as many items (70, with five of each rare kind), the degenerate resamples all but vanish:

# %%
# NBVAL_CHECK_OUTPUT
for phase, a, b in [("before", a0, b0), ("after", a1, b1)]:
    kept, _ = kappa_draws(a, b, copies=5)
    low, high = torch.quantile(kept, torch.tensor([0.025, 0.975], dtype=kept.dtype)).tolist()
    print(f"{phase}, the 14 labels five times over: 95% interval {low:.4g} to {high:.4g}; "
          f"exactly 0: {(kept == 0).double().mean().item():.1%}, exactly 1: {(kept == 1).double().mean().item():.1%}")
    assert ((kept == 0) | (kept == 1)).double().mean().item() < 0.02

# %% [markdown]
# That is a thought experiment, not data: repeating 14 labels five times is not 70 new responses,
# and the narrower interval it prints is not evidence about these raters. It shows what the study
# needs: new responses, rated by both raters, until the rare cells are no longer single items.
#
# **The in-sample trap.** The sharper anchor was written *after* reading the disputes on these 14
# responses, to settle exactly those disputes, and the raters were then checked on the same 14.
# Success there is close to guaranteed, the way a rule tuned on the development cases scores well on
# them. So the kappa of 0.86 is **not evidence** that the anchor makes raters agree on new
# responses, and its bootstrap interval could not say so even if it were trustworthy: it only
# describes resampling these 14. Evidence would be both raters labelling responses the anchor was
# not written from, under the frozen anchor. We have no such labels, and inventing rater labels would prove nothing.
#
# A sharp anchor can also be partly checked by code. `ec.anchored_clarity` is its checkable reading
# (one time, or a plain statement that there is none, and no question back); the protocol uses it
# to label clarity on outputs no rater has seen. It matches every label on which the raters agree,
# but it was written from these same items, so this too is in-sample:

# %%
machine = [ec.anchored_clarity(r) for r in authored.values()]
agreed = [i for i in range(len(a1)) if a1[i] == b1[i]]
assert all(machine[i] == a1[i] for i in agreed)
print(f"matches the raters on all {len(agreed)} agreed labels; "
      f"on the dispute (x08) it says {machine[list(examples).index('x08')]}")

# %% [markdown]
# A held-out check of the machine reading is something we *can* run. Below are eight new responses
# to development questions, **authored for this check and fictional**, each with the label the
# lesson's author gives it by reading the anchor text. They were not among the 14 the anchor and the
# code were written from. This is one reader's reading, not a rater study, so it tests the code
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
# On its own 13 agreed items the code was perfect; on eight new ones it misses two, both in the same
# direction: it calls a clear answer unclear when the time is written in words, or when a "not"
# refers to something other than the time. Eight authored items cannot give a rate, but they are
# enough to show that "matches every agreed label" was a statement about the items the rule was
# written from.

# %% [markdown]
# ## 6. Freeze, then reveal
#
# On the development cases the source rule is the clear choice. Before touching the reserved cases
# we **freeze** a protocol: the candidate (model + wrapper), the rubric's weights and gates, the
# clarity reading, the pass threshold and the exact case list. `ec.freeze_protocol` writes all of
# that, with a SHA-256 over it, as one line of an append-only log. We also freeze TinyGPT with the
# first-time wrapper, as a comparison, *before* anything is revealed. (The log goes to a temporary
# folder, not the repository.)

# %% tags=["live"]
# Freeze both protocols in an append-only log before any reserved case is read: ec.freeze_protocol; defines: log, anchor, reserved_ids, RULE, frozen_rule, frozen_tiny
log = ec.ProtocolLog(Path(tempfile.mkdtemp()) / "protocol_log.jsonl")
anchor = raters["anchors"]["after"]
reserved_ids = [c["id"] for c in reserved]
RULE = {"model": None, "wrapper": "source_rule"}  # no model: the rule reads the notice
TINY = {"model": rec["checkpoint"]["sha256"], "wrapper": "first_time"}
frozen_rule = ec.freeze_protocol(log, RULE, RUBRIC, anchor, reserved_ids)
frozen_tiny = ec.freeze_protocol(log, TINY, RUBRIC, anchor, reserved_ids)

# %%
# NBVAL_CHECK_OUTPUT
for name, f in [("source rule", frozen_rule), ("TinyGPT + first time", frozen_tiny)]:
    print(f"{name:<21} protocol {f['protocol_sha256'][:16]}...  cases {len(f['cases'])}")
print(json.dumps({k: frozen_rule[k] for k in ["candidate", "rubric", "threshold", "cases"]}))

# %% [markdown]
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
# Every reserved case is now marked **exposed**. The rule's one miss, `bus-mon`, is a template the
# development notices did not contain: the bus notice gives 07:50 "on weekdays", and the rule only
# looks for the day's name. Changing the rule in response would mean tuning it on these cases; from
# that point they could only count as development data. Suppose we change the protocol anyway (a lower pass mark): the change is
# a **new** entry, the old line is untouched, and the re-scored cases say they were seen before.

# %%
log_before = log.path.read_bytes()
relaxed = ec.Rubric(weights, gates=("source_support", "format"), threshold=0.5)
frozen_later = ec.freeze_protocol(log, RULE, relaxed, anchor, reserved_ids)
again = ec.reveal_reserved(log, frozen_later["protocol_sha256"], task["cases"], responses, notices)
assert log.path.read_bytes().startswith(log_before)  # appended, never rewritten
assert all(r["previously_exposed"] for r in again)  # the second look is not fresh evidence
pd.DataFrame([{"#": e["index"], "kind": e["kind"], "protocol": e["protocol_sha256"][:12],
               "cases": len(e["cases"]), "previous entry": (e["prev_sha256"] or "-")[:12]}
              for e in log.verify()])

# %% [markdown]
# Each line carries the hash of the line before it, so editing an earlier line in place breaks the
# chain and `log.verify()` raises (the tests do exactly that).
#
# **Exposure versus contamination.** The log vouches only for what *this* workflow did: the
# reserved cases were not scored before the freeze. It cannot vouch for the wider world. The cases
# are published with the course, so anyone, including whoever trains a future model, may have read
# them. For TinyGPT we can do better than usual, because its whole training text is in
# `data/fixtures.json`: none of the notices' times or phrases occur there.

# %%
train = json.loads(ec.FIXTURES_PATH.read_text(encoding="utf-8"))["train"]
train_text = " ".join(train["statements"] + [q + " " + a for q, a in train["qa"]])
probes = {t for n in notices.values() for t in re.findall(r"\d\d:\d\d", n)}  # every notice time
probes |= {"notice", "Notice", "chess", "Year 8", "library", "rehearsal", "Bus 7"}
found = sorted(p for p in probes if p in train_text)
print(len(probes), "probe strings; found in the training text:", found)
assert not any(p in train_text for p in probes)

# %% [markdown]
# ## 7. Report what was established
#
# Every rate is a numerator over a denominator with a 95% **Wilson score interval**, which behaves
# sensibly at 0/n and n/n where the textbook $\hat p \pm 1.96\sqrt{\hat p(1-\hat p)/n}$ collapses to
# a point. First a calibration of intuition: one success in four.

# %%
# NBVAL_CHECK_OUTPUT
one_in_four = ec.success_rate([{"success": s} for s in (True, False, False, False)])
print(one_in_four)
assert abs(one_in_four.low - 0.0456) < 1e-4 and abs(one_in_four.high - 0.6994) < 1e-4

# %% [markdown]
# 25% on four cases is compatible with anything from about 5% to 70%. Four cases tell you about those
# four cases, and very little about how often the system would succeed in general. Our own figures,
# first with every case treated as independent:

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
ax.axhline(0.95, color="tab:red", linestyle="--", label="target 95%")
ax.set(xlim=(-0.5, len(report) - 0.3), ylim=(-0.05, 1.05), xlabel="candidate and split",
       ylabel="exact task success (95% Wilson interval)",
       title="Development vs reserved task success")
ax.legend(loc="center right")
plt.show()

# %% [markdown]
# ### Questions that share a notice
#
# A Wilson interval assumes every case is an independent draw. Ours are not: questions on one notice
# share its wording and its template, and section 1 already treats them as one piece of evidence
# when splitting. The 5 reserved cases come from only 3 notices, and the 9 development cases from 5.
#
# That changes the **interval**, not what is measured. The target was set per question (95% of
# questions answered exactly), so the rate stays per question: k of n cases. What changes is how
# much that rate could move with other notices, and for that we resample whole notices (a
# **cluster bootstrap**): `ec.success_rate(records, group_key="source_group")`. Where the bootstrap
# cannot vary at all (every notice all right, or all wrong), it falls back to Wilson with n = the
# number of notices, the cautious extreme that treats each notice as a single question.

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
# against Wilson's 37.6% to 96.4% for five independent cases. The bootstrap is crude here: three
# notices allow only 27 equally likely draws, so its ends are the worst and best of a handful of
# possible rates (all three notices drawn as the bus notice gives 1/2; any draw without it gives
# 100%). On the development cases every notice is all right, so every resample is 100%: a
# bootstrap that cannot move is no interval at all, the same failure the Wilson interval was chosen
# to avoid at n/n. The fallback, Wilson over the 5 notices, gives 56.6% to 100%. Both readings
# still assume the notices are independent draws from the notices the service will meet, which
# eight notices by one author in a few templates are not.
#
# **A different metric: every question on a notice right.** It is tempting to count notices
# instead, a notice succeeding only when every question on it is right: 2 of the 3 reserved
# notices. That is not the per-question rate with a better interval; it measures something else,
# and it cannot be held to the per-question target. A system right on exactly 95% of questions
# gets a notice of two questions fully right only 0.95² ≈ 90% of the time:

# %%
# NBVAL_CHECK_OUTPUT
sizes = pd.Series([r["source_group"] for r in rule_res]).value_counts().sort_index()
full_at_95 = float((0.95 ** sizes).mean())  # each question right with probability 0.95, independently
print("reserved questions per notice:", sizes.to_dict())
print(f"notices answered in full: {ec.all_right_rate(rule_res)}")
print(f"a system right on exactly 95% of questions answers in full {full_at_95:.3f} of these notices")
assert abs(full_at_95 - 0.918) < 5e-4 and full_at_95 < 0.95

# %% [markdown]
# So a rule that met the 95% target exactly would fail a 95% target on notices answered in full,
# by construction. If a team wants that metric (a learner reads one notice and asks several
# questions), it needs its own target, set before the reveal, such as "notices answered in full,
# at least 90%". Our protocol set none, so we report it as a description and decide nothing on it.

# %% [markdown]
# Behind the rates: each failed case, the notices the cases came from, and what was excluded:

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
# ## 8. The decision brief
#
# A brief states the intended use, the case mix, the evidence and its limits, then decides:
# **accept** (the interval clears the target), **reject** (even its top falls short, or the system
# delivered a wrong time, the failure that sends a learner to the wrong place), or **restrict** (the
# evidence neither clears nor rules out the target: allow only a narrower use). We set the target
# at 95% exact task success per question before the reveal, and the brief as frozen then treated
# the cases as independent (a Wilson interval).

# %%
# NBVAL_CHECK_OUTPUT
use = "answer learners' time questions from approved school notices"
candidates = [("source rule", rule_res), ("TinyGPT + first time", tiny_res)]
briefs = {name: ec.decision_brief(name, use, recs, target=0.95) for name, recs in candidates}
for b in briefs.values():
    print(f"{b['candidate']}, cases independent: {b['decision'].upper()}")
    for line in b["reasons"] + b["would_change"]:
        print("   -", line)
assert briefs["source rule"]["decision"] == "restrict"
assert briefs["TinyGPT + first time"]["decision"] == "reject"

# %% [markdown]
# The second reason prints the three figures of section 7 side by side. Questions on one notice
# depend on each other, so the same brief with its interval resampling notices:

# %%
# NBVAL_CHECK_OUTPUT
notice_briefs = {name: ec.decision_brief(name, use, recs, target=0.95, group_key="source_group")
                 for name, recs in candidates}
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
# **Both readings restrict the rule.** The per-question rate of 4/5 has an interval that straddles
# the 95% target whether the cases are treated as independent (37.6% to 96.4%) or the notices are
# resampled (50% to 100%). Counting notices answered in full instead (2/3, Wilson 20.8% to 93.9%)
# would turn that into a reject, but only by holding a different metric to the per-question target,
# which section 7 showed a rule meeting that target would fail by construction. Neither reading is
# strong: five questions on three notices cannot settle a 95% claim either way. Lifting the Wilson
# lower bound to 95% would take 105 further questions answered right, with none failing, and they
# should come from new notices: questions on notices already seen add less than independent ones.
#
# There is still a protocol gap. The protocol froze the rate and the target but not how the
# interval treats questions that share a notice. Here the choice does not change the decision, but
# choosing it after the reveal is a protocol change made with the results in view. The next
# protocol should freeze it (resample notices), and freeze a target for notices answered in full if
# the team wants that metric, before any fresh reserved notices are revealed.

# %% [markdown]
# ### Could clarity have changed the decision?
#
# The protocol froze a clarity anchor, and section 5 spent real effort on it. Did it matter? Check
# every combination of the three labels under the frozen rubric, with clarity 0 and with clarity 1:

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
# Clarity never changes a verdict. With both gates passed, the score is at least (2 + 1 + 0)/4 = 0.75,
# the pass mark, so clarity's weight of 1 can only move a score that has already passed; with a gate
# failed, nothing passes. It is redundant twice over: anything that passes the format gate is a bare
# time or `unknown`, which the anchored reading always calls clear. And the brief decides on exact
# task success alone; it does not read the rubric at all. So **the rater work fed no decision**, in
# this protocol as frozen. That is a design flaw, not a finding about clarity. Making clarity matter
# would mean, for example, a gate on it, or a pass mark of 1.0, together with a use in which a
# delivered answer can be something other than a bare value, and the change would need a new frozen
# protocol and fresh reserved notices: the revealed ones are exposed.

# %% [markdown]
# In words, for the source rule:
#
# - **Intended use**: answer learners' time questions from approved notices, returning one time or
#   `unknown`.
# - **Case mix**: 14 questions on 8 invented notices in a handful of templates, 6 of them `unknown`;
#   reserved: 5 questions on 3 notices.
# - **Evidence**: per question, 9/9 on development and 4/5 on reserved. With the cases treated as
#   independent, Wilson 70% to 100% and 38% to 96%; with notices resampled, since questions on a
#   notice depend on each other, 57% to 100% (Wilson over 5 notices: at 9/9 the bootstrap cannot
#   vary) and 50% to 100%. No wrong time was delivered; the one miss said `unknown` for a time the
#   notice states as "weekdays". Notices answered in full: 5/5 and 2/3 (another metric; the
#   protocol set no target for it).
# - **Rubric and raters**: under the frozen rubric the rule passes exactly where it succeeds, and the
#   clarity criterion could not have changed any verdict; the decision rests on task success alone.
# - **Decision: restrict**, in either reading of the interval: the evidence neither shows the rule
#   meets 95% per question nor rules it out. Allow only a narrower use (only notices in the tested
#   templates, every `unknown` passed to a person), which is a new intended use with its own frozen
#   protocol, its interval resampling notices.
# - **What would change it**: new notices from new source groups, sampled the way real notices
#   arrive. To accept, 105 further questions answered right, with none failing, would be needed to
#   lift the Wilson lower bound to 95%, more if several come from one notice. A single wrong time
#   would mean reject.
#
# TinyGPT is rejected in either reading: 0/5 reserved cases, with an interval that tops out near
# 43% with the cases independent and near 56% over its 3 notices. Neither brief claims
# readiness: filling in every field, or scoring well on the rubric, does not by itself show that
# the service is fit to deploy.

# %% [markdown]
# ## Summary
#
# **What the lesson established**
#
# - Define success before looking: a contract (one `HH:MM` or `unknown`), and a split by **source
#   group**, so questions that share a notice are treated as one source.
# - Reference loss under teacher forcing is the mean of $-\log_2 p$ over the correct tokens:
#   probability 1 costs 0 bits, 0 costs infinity (kept as `inf`, written as `null` plus a flag in
#   JSON), an empty reference gets `None` rather than a mean, and a rule's loss is "not applicable", never 0.
#   TinyGPT spends 10.9 bits per byte on `16:15` and 0.025 on `Paris`. Its `unknown` references
#   cost less per byte than its times, so a mean over cases and a mean over tokens differ.
# - On the recording, TinyGPT succeeds on 0/9 development cases raw or wrapped; the source rule on
#   9/9. A wrapper changes what is delivered, never the model's loss; it fixed `x02` and broke `x03`
#   by taking another day's time.
# - Weights decide what a rubric rewards; clarity-only weights pass a fluent wrong answer, and a
#   gate on source support stops it.
# - The authored raters agreed on 7/14 labels (kappa 0.11) with the bare word "clear" and on 13/14
#   (kappa 0.86) after a sharper anchor; the remaining dispute is kept with both reasons. No
#   interval for those kappas can be trusted at n = 14: a third of the bootstrap resamples give
#   kappa exactly 0 (before) or exactly 1 (after), because each hinges on one item. More items, with
#   several in each rare cell, are what an interval would need.
# - Frozen before the reveal, the rule scored 4/5 reserved questions: Wilson 38% to 96% with the
#   cases independent, 50% to 100% resampling its 3 notices (questions on a notice depend on each
#   other); TinyGPT 0/5. The log only grows; re-scoring marks cases as previously exposed.
# - Clustering changes the interval, not the metric: the rate stays per question, against the
#   per-question target, and both readings restrict the rule; TinyGPT is rejected. "Every question on
#   a notice right" (2/3) is another metric: a rule right on exactly 95% of questions would score
#   about 0.918 on it here, so it needs a target of its own.
# - **The in-sample trap and its held-out check**: the anchor and its code reading were written from
#   the 14 responses they were then checked on. On eight new authored responses the code reading
#   missed two of the anchor's labels.
#
# **What it did not establish**
#
# - That the sharper anchor makes raters agree on new responses: the 0.86 is in-sample, and no
#   rater labelled new items.
# - Any effect of clarity on the decision: under the frozen weights, pass mark and gates it cannot
#   change a verdict, and the brief reads task success only. That is a flaw of the protocol.
# - How the rule does on notices in general: 3 reserved notices by one author, in a few templates;
#   105 more questions answered right, from new notices and none failing, would be needed to claim
#   95%.
# - How well the cluster bootstrap covers with 3 notices: it has only 27 equally likely draws, and
#   at 9/9 it cannot vary at all (the fallback there is Wilson over notices).
# - Any reliability of the anchor beyond these 14 responses, with or without an interval.

# %% [markdown]
# ## Exercises
#
# Each exercise has one code cell. Write your code where the stub says, then run the cell: its last
# lines check your answer and say what they expected if it is not right yet.

# %% [markdown]
# ### Exercise 1: Another wrapper
#
# Write `wrap_last_time(response, notice=None, question=None)`, a wrapper that delivers the *last*
# time in the response (and otherwise behaves like `ec.wrap_first_time`). Then run both wrappers on
# the fourteen authored responses and list the ids the last-time wrapper gets right and the
# first-time wrapper gets wrong (`fixed`), and the other way round (`broken`).
#
# *Hint:* `ec.wrap_first_time` shows the shape, and `re.findall(r"\d\d:\d\d", text)` finds the
# times; `authored`, `examples` and `by_id` from section 3 give each response and its case. `x03`
# and `x10` are the interesting ones.

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
# The two wrappers score the same total, on different cases: taking the last time repairs `x03`
# and breaks `x10`, where the question's day comes first. A single count hides that trade; the list
# of cases shows it.

# %% [markdown]
# ### Exercise 2: Does the loss prefer the right time?
#
# For each development case with a time reference, compute the reference loss (mean bits per
# token) of *every* time its notice names, the correct one included. Store them in `time_losses`, a
# dict from case id to `{time: mean bits}`, and list in `preferred` the case ids whose reference is
# the cheapest time for the model. Does a low loss pick out the right answer?
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
# The loss picks out the right time on two of the five cases, and one of those, `choir-mon`, has
# only one time to choose from. On `exams-tue`, `library-wed` and `swimming-fri` the model finds a
# wrong time from the same notice cheaper than the right one. That fits section 2: TinyGPT never saw
# a notice, so its preferences among clock times say something about digits, not about the
# question. A loss can rank answers only for a model that has learnt the task.

# %% [markdown]
# ### Exercise 3: How much evidence is enough?
#
# The rule scored 4/5 reserved cases and answered 2/3 reserved notices in full (section 7's other
# metric). For each of the two metrics, how many further successes, with no failures, would lift
# its Wilson lower bound to 90%? To 95%? Store the answers in `needed`, a dict
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
# Notices answered in full need more further successes than cases, for both targets: the one miss
# weighs more among three units than among five (107 against 105 for 95%). The two counts answer
# different questions, though, and only the cases count belongs to the per-question target; a target
# for notices answered in full would be set on its own, and lower (section 7).

# %% [markdown]
# ### Exercise 4: Teach the rule "weekdays"
#
# Write `weekday_rule(response, notice, question)`, which answers as `ec.wrap_source_rule` does, but
# when that gives `unknown` for a question about a day from Monday to Friday, takes the time of a
# clause that says "weekdays". It must make `bus-mon` succeed and keep every development case right.
# Then list in `fresh` the reserved case ids that the protocol log has *not* marked as exposed: the
# ones that could still be fresh evidence for the new rule. Why is a perfect re-score on the reserved
# cases no longer evidence, and what would you need instead?
#
# *Hint:* split a notice into clauses with `re.split(r"(?<=[.;,])\s+", notice)`; `log.exposed()`,
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
# The new rule gets all five reserved cases, but `fresh` is empty: every reserved case was exposed
# at the reveal, and the change was made *because* of `bus-mon`. A rule tuned on a case will score
# well on it, so the 5/5 is development evidence, just as the raters' 0.86 was in-sample. A re-score
# under a new frozen protocol would come back marked `previously_exposed`. Evidence for the new rule
# needs new notices from new source groups, reserved and frozen before the rule is scored on them,
# ideally including other phrasings ("Monday to Friday", "school days") that the fix did not see.

# %% [markdown]
# ### Exercise 5: Make clarity matter
#
# Define `clarity_rubric`, a rubric under which clarity can change a verdict (a gate, a different
# pass mark, different weights). Rerun the check of all label combinations from section 8 on it. Then
# list in `changed` the authored responses (delivered raw) whose verdict differs between `RUBRIC` and
# `clarity_rubric`. Why could this rubric not be scored on the revealed reserved cases?
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
# A gate on clarity alone changes nothing while the format gate stays: every answer that passes the
# format gate is a bare value, which the anchored reading always calls clear. The solution therefore
# drops the format gate and keeps format as points, which is a different intended use (a sentence
# may now be delivered). Under it `x05`, `x06`, `x11` and `x14` now pass: correct, supported,
# single-value sentences. This rubric is a protocol change made after the reveal, so the reserved
# cases are exposed to it; scoring them would look like evidence and would not be. It needs a new
# frozen protocol and fresh reserved notices.
