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
# # 09 · A real judge over HTTP
#
# **What you will learn**
#
# - to call an LLM judge over the OpenAI-compatible chat-completions API with `ec.HTTPJudge`, a judge
#   with exactly `ec.mock_judge`'s signature, so `judge_eval` needs no other change;
# - to serve a judge on your machine and evaluate through it;
# - why a failed judgement is recorded as **unscored** with its reason, never as a number, and
#   reported as *scored/total*;
# - an on-disk cache, and keeping the API key out of everything you write;
# - three bias checks: padding, agreement with exact match and token F1 (Cohen's kappa), and agreement
#   between two judges;
# - to read a real judge, SmolLM2-135M-Instruct served by vLLM, two ways: its parsed reply, and
#   G-Eval's probability-weighted formula from the server's log-probabilities;
# - to measure that judge's position and verbosity bias, and its agreement with labels the course
#   wrote, against the mock judge and chance;
# - in "Going further": a paired comparison of the two judges, and why a self-selected subset gets no
#   interval.
#
# **Time needed:** about 90 minutes. **Going further:** about 5 minutes more. **Builds on:** 04 (the mock judge) and 05 (the aggregate and its report).
# Nothing here leaves your machine: every server binds to 127.0.0.1.

# %%
import json
import logging
import shutil
import statistics
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import matplotlib.pyplot as plt
import pandas as pd
import torch

import evalcore as ec

torch.set_num_threads(1)  # on purpose: see the README's "Threads" section
model, tok, fx = ec.load_pretrained(), ec.InstructionTokenizer(), ec.load_fixtures()

# %% [markdown]
# ## 1. A judge server on localhost
#
# Any judge function can sit behind an HTTP server, and evaluating through it changes nothing. The
# **OpenAI-compatible API** is the HTTP interface OpenAI defined for its own models. vLLM, llama.cpp's server and Ollama serve it too (section 7 names
# their docs), so one client talks to all of them. Its chat-completions route,
# `POST /v1/chat/completions`, takes a list of chat messages and returns the model's reply.
#
# `ec.JudgeServer` puts a judge function (by default `ec.mock_judge`) behind that route, in a thread of
# this kernel. By default it listens on port 0, which asks the operating system for any free port.
# From a terminal, `python evalcore.py serve-judge --port 8000` does the same.
#
# The server lives across the next sections, so no cell can hold a `with` block around it. The cell
# first stops a server left from an earlier run (harmless to leave listening, but wasteful). The
# clean-up cell at the end stops every server in a `finally`.

# %%
if "server" in globals():  # a re-run: stop the server the earlier run started
    server.stop()
server = ec.JudgeServer().start()  # mock_judge behind POST /v1/chat/completions, on 127.0.0.1
print(server.url, server.model)

# %% [markdown]
# A judge request is a list of chat messages. The system message holds the rubric (lesson 04): what
# each score from 1 to 5 means, and a reminder that length earns nothing. The user message holds the
# item as JSON and asks for a JSON reply. `ec.judge_messages` builds them, so you can read exactly what
# the judge reads:

# %%
# NBVAL_CHECK_OUTPUT
preds = ec.generate(model, tok, [q for q, _ in fx["judge"]])
q, ref = fx["judge"][1]
for message in ec.judge_messages(q, preds[1], ref):
    print(f"--- {message['role']} ---\n{message['content']}")

# %% [markdown]
# `HTTPJudge(base_url, model)` builds a judge that sends those messages and parses the reply. It asks
# for a sampling **temperature** of 0. The temperature sets how randomly each next token is drawn, and
# at 0 the server takes the most likely one at each step (greedy decoding, lesson 04; not lesson 07's
# fitted temperature). Parsing is forgiving about what surrounds the JSON (code fences, chatty prose)
# and strict about the score: an integer from 1 to 5. The cache directory (section 3) is temporary.

# %% tags=["live"]
# An HTTP judge: ec.HTTPJudge(server.url, server.model, cache_dir=...), called like mock_judge; defines: cache_dir, judge, verdict
cache_dir = tempfile.mkdtemp(prefix="judge-cache-")
judge = ec.HTTPJudge(server.url, server.model, cache_dir=cache_dir)
verdict = judge(q, preds[1], ref)
print(verdict)
assert verdict == ec.mock_judge(q, preds[1], ref)  # same verdict, now over a real socket

# %% [markdown]
# Through the server we get the mock judge's numbers exactly, and every example is scored:
# `judge_eval` takes the HTTP judge as `judge_fn`, and nothing else changes. Like every eval's value,
# the judge's comes with a 95% interval, `extras["ci95"]`: a percentile bootstrap over the scored
# examples (lesson 01).

# %%
# NBVAL_CHECK_OUTPUT
over_http = ec.judge_eval(model, tok, fx["judge"], judge_fn=judge)
direct = ec.judge_eval(model, tok, fx["judge"])
n = over_http.extras
lo, hi = n["ci95"]
print(f"over HTTP {over_http.value:.4g}, 95% CI [{lo:.4g}, {hi:.4g}] ({n['scored']}/{n['total']} scored), "
      f"direct {direct.value:.4g}")
assert [r["score"] for r in over_http.per_example] == [r["score"] for r in direct.per_example]
assert n["ci95"] == direct.extras["ci95"] and n["ci_method"].startswith("percentile")
assert n["n"] == len(fx["judge"]), f"expected all {len(fx['judge'])} examples scored, got {n['n']}"


# %% [markdown]
# ## 2. When the judge fails
#
# An example whose judgement fails must be recorded as **unscored**, with its reason, never as a
# number. A real endpoint fails now and then: overloaded (HTTP 429 or 503), crashed (500), too slow, or
# replying with something that is not a score.
#
# The HTTP judge retries 429, 5xx (any status from 500 to 599), timeouts and dropped connections. It
# honours a `Retry-After` header, the server's "wait this many seconds". Between tries it waits with
# exponential backoff and jitter: the longest wait doubles with each try, up to a cap, and each wait is
# drawn at random between half of that longest wait and all of it. When the last retry fails, or the
# reply can't be used (unparseable JSON, a score of 7), it raises `ec.JudgeUnavailable(reason)`.
# `judge_eval` then records that example as unscored. Here is a judge broken on purpose on three items:

# %%
def unreliable_judge(instruction, prediction, reference):
    # BROKEN ON PURPOSE: stands in for an endpoint that misbehaves on some items
    if "spider" in instruction:
        raise RuntimeError("out of memory")  # the server answers HTTP 500
    if "Moon" in instruction:
        return 7, "a seven out of five!"  # out of range: unusable, not a 5
    if "ocean" in instruction:
        time.sleep(1.5)  # slower than the client will wait
    return ec.mock_judge(instruction, prediction, reference)


# %% [markdown]
# Retries are logged as warnings (below, on stderr). The short timeout and backoff keep this
# demonstration quick; against a hosted API, keep the defaults (a 30 s timeout, backoff from 0.5 s).
# This server is needed in one cell only, so a `with` block starts it and stops it, even if the block
# fails.

# %%
with ec.JudgeServer(judge_fn=unreliable_judge) as flaky_server:
    flaky = ec.HTTPJudge(flaky_server.url, flaky_server.model, timeout=0.5, max_retries=2,
                               backoff=0.05)
    shaky = ec.judge_eval(model, tok, fx["judge"], judge_fn=flaky)
print(flaky.stats)

# %%
# NBVAL_CHECK_OUTPUT
unscored = pd.DataFrame(shaky.extras["unscored"])
unscored["instruction"] = [fx["judge"][i][0] for i in unscored["index"]]
unscored

# %% [markdown]
# None of the three failures became a number, and each carries its reason: the 500 after two retries,
# the timeout after two retries, and the 7. The 7 was not retried: at temperature 0, asking again would
# most likely give the same reply (here certainly, since this judge is a fixed function). Only most
# likely: vLLM, for one, does not promise identical outputs across requests by default. The value is
# the mean over the 17 examples that were scored. The report (lesson 05's table) says so in its `n`
# column:

# %%
# NBVAL_CHECK_OUTPUT
scored = [r["score"] for r in shaky.per_example if r["score"] is not None]
assert all(shaky.per_example[i]["score"] is None for i in unscored["index"])
n_left = len(fx["judge"]) - len(unscored)  # every example the broken judge did not fail on
assert len(unscored) == 3, f"expected the 3 broken items unscored, got {len(unscored)}"
assert len(scored) == n_left, f"expected {n_left} scored examples, got {len(scored)}"
assert abs(shaky.value - sum(scored) / len(scored)) < 1e-12
assert shaky.extras["n"] == n_left, f"expected the report's n to count the {n_left} scored, got {shaky.extras['n']}"
assert shaky.extras["ci95"][0] < shaky.value < shaky.extras["ci95"][1]
print(ec.aggregate([shaky]).table(worst=0))

# %% [markdown]
# Evaluation frameworks disagree about what to do with a judgement they cannot parse:
#
# - **dropped**: FastChat's MT-Bench code turns it into -1, then drops every -1 before the mean,
#   without reporting how many;
# - **scored 0, kept in the mean**: G-Eval's code and lighteval's MT-Bench task;
# - **the lowest score, kept in the mean**: OpenAI's evals, where `get_choice_score` gives
#   `__invalid__` the minimum, and which also count it (`counts/__invalid__`);
# - **wrong, then unscored**: Inspect's `model_graded_qa` returned
#   `Score(value=INCORRECT, explanation="Grade not found in model output: ...")` up to inspect-ai
#   0.3.244, scoring the failure as a wrong answer. Since 0.3.245 (pull request #4048) it returns
#   `Score.unscored(...)`, which its metrics skip, and 0.3.285 still does.
#
# evalcore records the failure as unscored and reports the count. The next cell writes out the
# policies that turn a failure into a number, **wrong on purpose**, to show how far they move the
# value. On this 1-5 scale, "wrong" (old Inspect) and "the lowest score" (OpenAI's evals) are the same
# move: a failure counts as 1.

# %% tags=["live"]
# Two wrong policies: each failure as 1, or as 0, in a mean over all 20; defines: as_lowest, as_zero, policies, lost
# BUGGY ON PURPOSE: two policies that turn a failure into a number
as_lowest = sum(r["score"] or 1 for r in shaky.per_example) / len(shaky.per_example)
as_zero = sum(r["score"] or 0 for r in shaky.per_example) / len(shaky.per_example)
# the correct value is evalcore's: the mean over the scored examples, reported as 17/20
policies = {"no failures\n(direct)": direct.value, "unscored, 17/20\n(evalcore)": shaky.value,
            "failure = 1\n(lowest score)": as_lowest, "failure = 0\n(below the scale)": as_zero}
assert as_zero < as_lowest < shaky.value
lost = {i: direct.per_example[i]["score"] for i in unscored["index"]}  # what the failed items scored directly
print("direct scores of the failed items:", lost)
assert lost == {4: 5, 7: 3, 11: 2} and shaky.value < direct.value, lost  # the only exact match was lost

# %%
fig, ax = plt.subplots(figsize=(8, 4))
bars = ax.bar(list(policies), list(policies.values()), color=["tab:gray", "tab:green", "tab:red", "tab:red"])
ax.bar_label(bars, fmt="%.3f")
ax.set(ylabel="judge value (mean score, 1-5)", ylim=(0, 3),
       title="Three failed judgements: how each policy moves the judge's value")
plt.show()

# %% [markdown]
# The unscored value, 1.706 (95% CI [1.294, 2.118]), is not "the truth" either. It is the mean over a
# different set of examples, which is why the report carries the 17/20 beside it. Here it is *lower*
# than the direct 1.95 (95% CI [1.5, 2.45]). One of the three failures (example 4, the spider) was the
# model's only exact match: which items fail decides which way the value moves.
#
# The whole gap, 0.24, is *which* three items were lost, so it says nothing about the model's quality.
# The next cell checks it: the direct judge's mean over the same 17 items *is* the unscored value. The
# two values come from the same answers and the same judge: they are not two samples to compare. Their
# intervals' overlap is beside the point, and overlapping intervals are no test of a difference anyway.
# A difference needs a paired interval of its own (lesson 05; for judge scores, a paired bootstrap over
# the questions).

# %%
# NBVAL_CHECK_OUTPUT
kept = [i for i in range(len(fx["judge"])) if i not in set(unscored["index"])]
direct_on_kept = sum(direct.per_example[i]["score"] for i in kept) / len(kept)
print(f"direct judge over the same {len(kept)} items: {direct_on_kept:.4g}; unscored value: {shaky.value:.4g}")
assert abs(direct_on_kept - shaky.value) < 1e-12, "the whole gap is which items were lost"

# %% [markdown]
# An interval measures the noise of sampling examples, not the systematic shift of losing particular
# ones. When
# failures are rare and unrelated to answer quality, dropping them is close to harmless. When they
# cluster on hard items (or, as here, hit an easy one), the count warns you. A failure scored as 1 or
# 0 hides that warning inside the number.
#
# **How sure are we?**
#
# - The report's 95% CI for the unscored value is a bootstrap over the 17 scored examples only. It
#   describes how much the mean of the examples we *have* would move under resampling. It knows
#   nothing about the three that failed.
#
# *Sources:* each policy was checked in the framework's own files: FastChat's
# `fastchat/llm_judge/common.py` (`run_judge_single`) and `fastchat/llm_judge/show_result.py`; G-Eval's
# `meta_eval_summeval.py` (`parse_output`); lighteval's `src/lighteval/tasks/tasks/mt_bench/main.py`
# (`process_judge_response`); OpenAI's `evals/elsuite/modelgraded/classify_utils.py` and
# `classify.py`; Inspect's `src/inspect_ai/scorer/_model.py`. vLLM's docs page "Reproducibility":
# "vLLM does not guarantee the reproducibility of the results by default".

# %% [markdown]
# ## 3. A cache, so re-running costs nothing
#
# Evaluating again makes no request at all: every verdict comes from a cache on disk. The judge keys
# each verdict by a SHA-256 hash (a fixed-length fingerprint) of (base URL, model, prompt). Failures
# are never cached. The judge starts with one cache hit already: section 1 judged item 1 once before
# `judge_eval` met it again.

# %%
before = dict(judge.stats)
again = ec.judge_eval(model, tok, fx["judge"], judge_fn=judge)
print("before:", before)
print("after: ", judge.stats)
assert judge.stats["requests"] == before["requests"]  # not one new request
hits = judge.stats["cache_hits"] - before["cache_hits"]
assert hits == len(fx["judge"]), f"expected one cache hit per example ({len(fx['judge'])}), got {hits}"
assert again.value == over_http.value

# %% [markdown]
# ## 4. The API key stays out of everything you write
#
# The key never appears in a record, a log line, the JSON report or an exception message. It comes
# from the `api_key` argument or the `OPENAI_API_KEY` environment variable, and is sent only as an
# `Authorization` header. A careless server that echoes it back gets it replaced by `[api key]`, and
# the judge's repr only says whether a key is set:

# %%
keyed = ec.HTTPJudge(server.url, server.model, api_key="sk-demo-0000-not-a-real-key")
keyed_result = ec.judge_eval(model, tok, fx["judge"][:3], judge_fn=keyed)
written = json.dumps(ec.aggregate([keyed_result]).to_dict())
print(keyed)
assert "sk-demo" not in written + repr(keyed) + repr(keyed_result)

# %% [markdown]
# ## 5. Bias checks
#
# ### Verbosity: does padding move the score?
#
# The mock judge penalises padding, and a judge biased on purpose rewards it. A judge has **verbosity
# bias** when it gives longer answers higher scores, whatever they say. A judge of content alone should
# ignore padding. Recall the mock judge's rule (lesson 04): 5 for an exact match, 4 for token F1 ≥ 0.8,
# 3 for F1 ≥ 0.5, 2 for F1 ≥ 0.2, and 1 below. `ec.verbosity_check` scores every answer twice, as given
# and with a sentence of filler appended, and reports how far each score moved.
#
# The default filler, `ec.VERBOSITY_FILLER`, adds length *and* a claim that the answer was "considered
# with great care", so a shift could come from either. The control is `ec.NEUTRAL_FILLER`: the same
# frame, the same 14 words (and 16 tokens for section 6's model), and no claim about the answer's
# quality. It says when the answer was written, which is irrelevant. The cell prints both and runs them
# through the server:

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Verbosity check, both fillers: ec.verbosity_check(judge, over_http, filler=...); defines: padded
padded = ec.verbosity_check(judge, over_http)
padded_neutral = ec.verbosity_check(judge, over_http, filler=ec.NEUTRAL_FILLER)
for filler, check in ((ec.VERBOSITY_FILLER, padded), (ec.NEUTRAL_FILLER, padded_neutral)):
    print(f"{filler!r}\n  mean shift {check['mean_shift']:.4g}: up {check['up']}, down {check['down']}, "
          f"same {check['same']} (of {check['scored']})")
assert padded["up"] == padded_neutral["up"] == 0, "expected no score to rise with padding"  # never rewarded
assert [r["shift"] for r in padded["rows"]] == [r["shift"] for r in padded_neutral["rows"]]  # words, not claims


# %% [markdown]
# The mock judge never rewards padding, but it is not blind to it either: padding *costs* points. Both
# fillers move the mean score by -0.7. Each answer's score moves by the same amount under one filler as
# under the other (11 down, 9 unchanged). The filler's words are not in the reference, so token F1's
# precision falls, and an exact match stops being one. The mock judge counts words and reads no claims.
#
# LLM judges tend to err the other way. The MT-Bench paper (Zheng et al. 2023), which grades chat
# models' answers with an LLM judge, lists *verbosity bias* among the judge biases it examines. Here is
# a judge with that bias, **biased on purpose**, served over the same API:

# %%
def wordy_judge(instruction, prediction, reference):
    # BIASED ON PURPOSE: the mock judge, plus a point for every 40 characters of answer
    score, why = ec.mock_judge(instruction, prediction, reference)
    return min(5, score + len(prediction) // 40), why + "; and it is thorough"


if "wordy_server" in globals():  # a re-run: stop the server the earlier run started
    wordy_server.stop()
wordy_server = ec.JudgeServer(judge_fn=wordy_judge, model="wordy-judge").start()  # used until section 5 ends
wordy = ec.HTTPJudge(wordy_server.url, wordy_server.model)

# %%
# NBVAL_CHECK_OUTPUT
wordy_padded = ec.verbosity_check(wordy, over_http)
print(f"mean shift: mock judge {padded['mean_shift']:.4g}, wordy judge {wordy_padded['mean_shift']:.4g}")
assert wordy_padded["mean_shift"] > 0 > padded["mean_shift"]

# %%
shifts = pd.DataFrame({"mock judge": pd.Series([r["shift"] for r in padded["rows"]]).value_counts(),
                       "wordy judge": pd.Series([r["shift"] for r in wordy_padded["rows"]]).value_counts()})
shifts = shifts.fillna(0).sort_index()
ax = shifts.plot.bar(figsize=(8, 4), rot=0, color=["tab:blue", "tab:orange"])
ax.set(xlabel="score(padded answer) - score(answer)", ylabel="number of answers",
       title="Padding an answer with filler: the mock judge penalises it, the wordy judge rewards it")
plt.show()

# %% [markdown]
# The wordy judge's mean shift is +1.3: it rewards the padding that the mock judge penalises.
#
# *Sources:* the MT-Bench paper is arXiv:2306.05685. A figure often quoted from it, that a "repetitive
# list" attack fooled GPT-3.5 91% of the time, is unverified here: we have it only from a secondary
# summary.
#
# ### Agreement with exact match and token F1
#
# The mock judge agrees perfectly with exact match and only weakly with token F1. Call an answer a
# pass when the judge gives it 4 or more, and compare with exact match and with token F1 ≥ 0.5 on the
# same answers. `ec.judge_metric_agreement` reports Cohen's kappa (lesson 06), agreement corrected for
# chance: 1 is perfect, 0 is no better than chance, and below 0 is less agreement than chance. It also
# gives the raw agreement and the confusion table (lesson 06): its rows are the judge's fail and pass,
# its columns the metric's.

# %%
# NBVAL_CHECK_OUTPUT
agree = ec.judge_metric_agreement(over_http, pass_score=4, f1_pass=0.5)
# confusion[judge][metric], 0 = fail, 1 = pass: 5 answers pass F1 >= 0.5 yet the judge gives them a 3
assert agree["exact_match"]["confusion"] == [[19, 0], [0, 1]], agree["exact_match"]["confusion"]
assert agree["token_f1"]["confusion"] == [[14, 5], [0, 1]], agree["token_f1"]["confusion"]
pd.DataFrame([{"metric": metric, "kappa": round(a["kappa"], 4), "agreement": round(a["agreement"], 4),
               "n": a["n"]} for metric, a in agree.items()]).set_index("metric")

# %%
fig, axes = plt.subplots(1, 2, figsize=(8, 4))
for ax, (metric, a) in zip(axes, agree.items()):
    ax.imshow(a["confusion"], cmap="Blues", vmin=0, vmax=a["n"])
    for i in range(2):
        for j in range(2):
            v = a["confusion"][i][j]
            colour = "white" if v > a["n"] / 2 else "black"
            ax.text(j, i, v, ha="center", va="center", fontsize=14, color=colour)
    ax.set(xticks=[0, 1], xticklabels=["fail", "pass"], yticks=[0, 1], yticklabels=["fail", "pass"],
           xlabel=metric, ylabel="judge (score >= 4)", title=f"{metric}: kappa {a['kappa']:.2f}")
fig.suptitle("The mock judge's pass/fail against exact match and token F1")
fig.tight_layout()
plt.show()

# %% [markdown]
# Against exact match the agreement is perfect. The shipped model's near-misses never reach F1 0.8, the
# mock judge's bar for a 4, so a 4 or 5 here always means an exact match. Against F1 ≥ 0.5 the judge is
# stricter: five answers pass F1 and still get a 3. That is why kappa is only 0.22 although 15 of the 20
# verdicts agree. The judge passes only one answer in 20, so most of that agreement, on failures, is
# what chance would give.
#
# **How sure are we?**
#
# - Neither result tells you the judge is *right*. Kappa measures agreement, not correctness.
# - A real judge deserves the same table against a few dozen labels a person wrote.
#
# ### Two judges
#
# `ec.judge_pair_agreement` compares two judges on the examples both of them scored:

# %%
# NBVAL_CHECK_OUTPUT
wordy_result = ec.judge_eval(model, tok, fx["judge"], judge_fn=wordy)
pair = ec.judge_pair_agreement(over_http, wordy_result)
print(f"kappa {pair['kappa']:.4g}, pass/fail agreement {pair['agreement']:.4g}, "
      f"same score {pair['same_score']:.4g}, on {pair['n']}/{pair['total']}")
n_same = round(pair["same_score"] * pair["n"])
assert pair["n"] == len(fx["judge"]), f"expected both judges to score all {len(fx['judge'])}, got {pair['n']}"
assert n_same == 16, f"expected 16 answers with the same score, got {n_same}"  # 4 scored differently

# %% [markdown]
# The two judges agree on pass or fail for every answer (kappa 1), yet they give different scores to 4
# answers in 20. A pass/fail kappa can hide disagreement lower down the scale, so look at both figures.

# %% [markdown]
# ## 6. A real judge: SmolLM2-135M-Instruct behind vLLM
#
# A 135M-parameter judge fails every check below. The checks themselves are the method to use on any
# judge.
#
# The judge is SmolLM2-135M-Instruct (lesson 13 studies it), an **instruct model**: one tuned to follow
# instructions in a chat. The engine serving it is vLLM, which serves models over the OpenAI-compatible
# API. Here it runs from its CPU build (lesson 14 builds that path). `make serve` starts it on 127.0.0.1 and prints
# an `export EVALCORE_SERVED_URL=...` line; with that variable set, this section talks to the live
# server. Without it, `ec.served_source` starts a replay server on 127.0.0.1. It answers each HTTP
# request with the reply vLLM gave to that same request, stored in `data/recording_09.json`. It first
# checks that the recording came from the model file installed here, as lesson 06's recording is
# checked. Either way, the code below sends real HTTP requests and reads vLLM's responses.
#
# The items are the 20 judge questions with four answers each, 80 in all: TinyGPT's, SmolLM2's own, and
# one right and one wrong answer written for the course. Each has a pass/fail label that one of the
# **course's authors** wrote, applying one stated rule once to each answer before any judge was run
# (`data/judge_labels_by_course_authors.json`). They are the course's reference labels, not human
# raters' judgements. The cell prints the rule and the first question's four answers.

# %%
source = ec.served_source(ec.RECORDING_09_PATH)  # live vLLM if EVALCORE_SERVED_URL is set, else replayed
judge_model, judge_tok = ec.load_served(source.url, source.model, ec.smollm2_folder(), progress=False)
labels = ec.load_course_labels()
items = [(it["instruction"], it["answer"], it["reference"]) for it in labels["items"]]
truth = [it["label"] for it in labels["items"]]
question = [it["question"] for it in labels["items"]]  # the cluster: four answers share a question
print(f"{'live' if source.live else 'recorded'} replies from {source.model!r}; {len(items)} items, "
      f"{sum(truth)} labelled pass by the course's rule:\n  {labels['rule']}")
first = pd.DataFrame(labels["items"][:4])[["source", "answer", "label"]]
first["mock judge"] = [ec.mock_judge(*item)[0] for item in items[:4]]  # section 5's rule
print(f"{items[0][0]!r} (reference {items[0][2]!r}):\n{first.to_string(index=False, max_colwidth=40)}")

# %% [markdown]
# ### Reading 1: the parsed reply
#
# The same `HTTPJudge` now has a real model behind it, with `max_tokens=64` (vLLM's default would let a
# rambling reply run to the end of the context window, lesson 01). A reply with no JSON score is
# **unscored**.
#
# A Wilson interval (lesson 02) for the share that fails would treat the 80 answers as **i.i.d.**:
# independent and identically distributed, each drawn on its own from the same pool. They are not: the
# four answers to one question share its prompt and its difficulty. So the interval here resamples
# the 20 questions (a cluster bootstrap, lesson 06), as every interval in this section does.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# The real judge's parsed replies: ec.HTTPJudge(..., max_tokens=64) on every item; defines: real, parsed, failed
real = ec.HTTPJudge(source.url, source.model, max_tokens=64, max_retries=1)


def parse_one(item):
    try:
        return real(*item)[0], None
    except ec.JudgeUnavailable as exc:
        return None, exc.reason


with ThreadPoolExecutor(4) as pool:  # four requests in flight: vLLM batches them
    replies = list(pool.map(parse_one, items))
parsed, failed = [p for p, _ in replies], [why for _, why in replies if why is not None]
lo, hi = ec.bootstrap_ci([float(p is None) for p in parsed], groups=question)
wilson = ec.wilson_interval(len(failed), len(items))  # 80 answers as if independent: too narrow
print(f"unparseable: {len(failed)}/{len(items)} = {len(failed) / len(items):.3f}, 95% CI [{lo:.3f}, {hi:.3f}] "
      f"(questions resampled; Wilson over the answers: [{wilson[0]:.3f}, {wilson[1]:.3f}])")
print("first reason:", failed[0] if failed else None)
assert len(parsed) == len(items) and len(failed) == sum(p is None for p in parsed)
assert hi - lo > wilson[1] - wilson[0], "expected resampling questions to widen the interval"

# %%
# NBVAL_CHECK_OUTPUT
echoes = sum('"instruction"' in why for why in failed)  # the reply opens by restating the item's JSON
print(f"unparseable replies that echo the item's JSON back: {echoes} of {len(failed)}")

# %% [markdown]
# SmolLM2 wrote a usable JSON score for only 12 of the 80 items. The other 68 are unparseable, a
# failure rate of 0.850 (95% CI [0.750, 0.938], questions resampled). Of those 68, 52 echo the item's
# JSON back instead of grading it, as the first reason does. A Wilson interval over the 80 answers
# would claim [0.756, 0.912]: too narrow.
#
# ### Reading 2: G-Eval's formula, read from log-probabilities where the server gives them
#
# **G-Eval** (Liu et al. 2023) scores an answer by the probability-weighted mean of the scores, the sum
# of i × p(i) over "1" to "5", not by the one score a reply states. The p(i) can come from the model's
# **log-probabilities** (logprobs): the log of the probability it gives each possible next token. An
# OpenAI-compatible server returns the top few on request.
#
# To make the next token the score, we write the start of the reply ourselves.
# `ec.ProbabilityJudge` turns the judge's messages into one text with the model's **chat template**
# (the markers a chat model's tokenizer wraps around each turn; lesson 11 returns to it). It appends
# `{"score": ` and sends that text to the plain-text route `/v1/completions`, not section 1's chat
# route. It asks for the next token's top-20 log-probabilities (`logprobs=20`, `max_tokens=1`). On an
# in-process model it reads the logits (lesson 01) instead.
#
# The five digits' probabilities are then rescaled to sum to 1, and the score is Σ i·p(i), so it always
# lies between 1 and 5. The code calls it `expected`: the expected score under those five
# probabilities. No reply is ever unparseable this way. But a model can still put little probability
# on the five digits: `mass`, their total before rescaling, says how much.
#
# G-Eval's own code does not read log-probabilities. It estimates p(i) by sampling 20 replies from
# GPT-4 at temperature 2 and averaging the score each reply starts with. Three of its four prompts also
# hold **evaluation steps**: a checklist for the criterion, which the paper has the model write
# beforehand. Each prompt then asks for the score only. We take the formula, without steps or sampling.
#
# *Sources:* Liu et al. 2023, "G-Eval: NLG Evaluation using GPT-4 with Better Human Alignment"; code and
# prompts (`prompts/summeval/*_detailed.txt`) in `nlpyang/geval`. There `gpt4_eval.py` asks for the 20
# replies (`n=20`, `temperature=2`, `max_tokens=5`; its `logprobs` line is commented out), and
# `meta_eval_summeval.py` averages each reply's leading number (`parse_output`).

# %% tags=["live"]
# Probability-weighted scores: ec.ProbabilityJudge(judge_model, judge_tok).scores(items); defines: prob_judge, dists, expected
prob_judge = ec.ProbabilityJudge(judge_model, judge_tok)
dists = prob_judge.scores(items)
expected, mass = [d["expected"] for d in dists], [d["mass"] for d in dists]
print(f"mass on the digits: min {min(mass):.3f}, median {statistics.median(mass):.3f}, max {max(mass):.3f}")

# %% [markdown]
# Between 65% and 80% of the next token's probability is on the five digits (min 0.653, median 0.757,
# max 0.795).
#
# The served log-probabilities are the ones the same weights give in-process (lesson 14 checks this on
# every token). The next cell checks the first four items' prompts against SmolLM2 loaded in this
# notebook. The server runs on the CPU too, but vLLM and torch compute with different low-level
# routines. So the two agree only to rounding, by an amount that depends on the CPU. The cell prints
# the bound they meet, `ec.JUDGE_SERVED_TOLERANCE`.
#
# *Sources:* the bound is ten times the largest gap measured on all 80 items, under three choices of
# torch's CPU code path (`ATEN_CPU_CAPABILITY` default, avx2 and AVX512) and 1 and 2 threads.

# %%
# NBVAL_CHECK_OUTPUT
local_model, local_tok = ec.load_smollm2()
in_process = ec.ProbabilityJudge(local_model, local_tok).scores(items[:4])
gap = max(abs(a["expected"] - b["expected"]) for a, b in zip(in_process, dists[:4]))
tolerance = ec.JUDGE_SERVED_TOLERANCE  # 10x the largest gap measured across CPU kernels and threads
print(f"served and in-process agree within {tolerance:.0e} (expected scores "
      f"{', '.join(format(d['expected'], '.3f') for d in dists[:4])})")
assert gap < tolerance, f"expected the served and in-process scores to agree within {tolerance:.0e}, got {gap:.2g}"

# %% [markdown]
# The probability-weighted score does not tell a right answer from a wrong one. The next cell compares
# it on the items the course labelled pass with those labelled fail. Beside it are the parsed replies
# and the mock judge (a function of exact match and F1 against the reference):

# %%
# NBVAL_CHECK_OUTPUT
mock_scores = [ec.mock_judge(*item)[0] for item in items]
by_label = pd.DataFrame({"label": ["pass" if t else "fail" for t in truth], "SmolLM2 (expected)": expected,
                         "SmolLM2 (parsed)": parsed, "mock judge": mock_scores})
print(by_label.groupby("label").agg(["mean", "count"]).round(3))
gap_pass_fail = statistics.mean(e for e, t in zip(expected, truth) if t) - statistics.mean(
    e for e, t in zip(expected, truth) if not t)
diff_ci = ec.bootstrap_ci([[e, t] for e, t in zip(expected, truth)], groups=question,
                          statistic=lambda v, w: (w.double() @ (v[:, 0] * v[:, 1])) / (w.double() @ v[:, 1])
                          - (w.double() @ (v[:, 0] * (1 - v[:, 1]))) / (w.double() @ (1 - v[:, 1])))
print(f"SmolLM2: pass minus fail {gap_pass_fail:+.4g}, 95% CI [{diff_ci[0]:+.4g}, {diff_ci[1]:+.4g}] (questions resampled)")

# %%
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, (name, values) in zip(axes, {"SmolLM2, probability-weighted": expected, "mock judge": mock_scores}.items()):
    ax.hist([[v for v, t in zip(values, truth) if t], [v for v, t in zip(values, truth) if not t]],
            bins=[1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5.01], label=["labelled pass", "labelled fail"],
            color=["tab:green", "tab:red"])
    ax.set(xlabel="score", ylabel="answers", title=name)
    ax.legend()
fig.suptitle("Scores of the 80 answers, split by the course's label")
plt.show()

# %% [markdown]
# Answers labelled pass average 2.647 and those labelled fail 2.667, a difference of
# -0.020 (95% CI [-0.052, +0.015], questions resampled). Of the 12 parsed replies, the 7 labelled pass
# got a mean of 1.0, the 5 labelled fail 3.4.
#
# ### Agreement with the course's labels: kappa, and a measure with no threshold
#
# Neither judge is shown to agree with the labels. A pass is a probability-weighted score of at least
# 3 (the middle of the scale, fixed before looking) or a mock-judge score of at least 4 (section 5's
# rule). An easy question makes all four of its answers easier to judge, so the interval resamples
# whole **questions**, 20 clusters, not 80 answers (`ec.kappa_with_interval`, a percentile bootstrap
# over groups).
#
# "Chance" is a judge that passes answers at random at the same rate: its kappa is 0 on average. A
# judge that passes *none* has no kappa. It agrees exactly on the answers labelled fail, and chance
# agreement is that same share. So kappa, (observed − chance) / (1 − chance), comes out 0 whatever the
# labels say. That 0 measures nothing, so `kappa_with_interval` gives `None` with the reason.

# %% tags=["live"]
# NBVAL_CHECK_OUTPUT
# Kappa with the course's labels, questions resampled: ec.kappa_with_interval(passes, truth, question); defines: agreement
agreement = {
    "SmolLM2, probability-weighted >= 3": ec.kappa_with_interval([e >= 3 for e in expected], truth, question),
    "mock judge >= 4": ec.kappa_with_interval([m >= 4 for m in mock_scores], truth, question),
}
for name, a in agreement.items():
    if a["kappa"] is None:
        print(f"{name:36s} kappa undefined: {a['reason'].replace('a passes', 'the judge passes')}")
    else:
        print(f"{name:36s} kappa {a['kappa']:+.3f}, 95% CI [{a['ci95'][0]:+.3f}, {a['ci95'][1]:+.3f}], "
              f"n {a['n']} in {a['groups']} questions")
print(f"highest probability-weighted score: {max(expected):.3f}")
assert max(expected) < 3 and agreement["SmolLM2, probability-weighted >= 3"]["kappa"] is None

# %% [markdown]
# No probability-weighted score reaches 3 (the highest is 2.878). So "pass at 3 or more" passes
# nothing, and its kappa is undefined. The mock judge's kappa is -0.094 (95% CI [-0.213, +0.044]), an
# interval that holds chance. Choosing the threshold afterwards to make kappa look better would be
# fitting noise (lesson 06).
#
# The 12 parsed replies get a kappa too, but no interval (Going further B).
#
# A threshold throws information away, and here it threw away all of it. The **AUC** needs no threshold.
# Slide a threshold down the scores: the **true-positive rate** (TPR) is the share of answers labelled
# pass that the judge passes, and the **false-positive rate** (FPR) the share labelled fail that it
# passes. The AUC is the area under the curve of TPR against FPR (the ROC curve). It equals the chance
# that an answer labelled pass scores higher than one labelled fail, ties counting one half: 0.5 for a
# score that knows nothing, 1 for one that separates them perfectly. `ec.auc_with_interval` gives it
# with the same interval over questions:

# %%
# NBVAL_CHECK_OUTPUT
separation = {"SmolLM2, probability-weighted": ec.auc_with_interval(expected, truth, question),
              "mock judge": ec.auc_with_interval(mock_scores, truth, question)}
for name, sep in separation.items():
    print(f"{name:30s} AUC {sep['auc']:.3f}, 95% CI [{sep['ci95'][0]:.3f}, {sep['ci95'][1]:.3f}] "
          f"(questions resampled)")
assert separation["SmolLM2, probability-weighted"]["ci95"][0] < 0.5 < separation["SmolLM2, probability-weighted"]["ci95"][1]
assert all(sep["ci95"][0] < 0.5 < sep["ci95"][1] for sep in separation.values())  # neither beats chance

# %% [markdown]
# Neither judge is shown to beat chance. SmolLM2's AUC is 0.443 (95% CI [0.346, 0.546]) and the mock
# judge's 0.587 (95% CI [0.480, 0.687]): both intervals hold chance, 0.5.
#
# Nor is either shown better than the other: Going further A compares them, paired on the same
# answers.
#
# **How sure are we?**
#
# - The mock judge rewards word overlap with the reference. So it passes "Lyon is the capital of
#   France." and fails "It is Paris." (printed with the labels above): the course's right paraphrases
#   and overlapping wrong answers are exactly what it cannot judge.

# %% [markdown]
# ### Position bias: the same two answers, in both orders
#
# A pairwise judge, shown answers A and B, says which is better. It has **position bias** when its
# choice depends on the order of the two. For each question we ask about the course's right and wrong
# answers in both orders, and read P("A") from the next token after `{"better": "`. An order-blind
# judge gives the first position 0.5 on average over the two orders. A judge that picks by position
# gets the right answer in one order and the wrong one in the other. In the plot, a judge that favours
# the first position puts its points at the bottom right.

# %%
# NBVAL_CHECK_OUTPUT
pairs = [(it["instruction"], it["reference"], right["answer"], wrong["answer"])
         for it, right, wrong in zip(labels["items"][::4], labels["items"][2::4], labels["items"][3::4])]
order = ec.position_bias(judge_model, judge_tok, pairs)
lo, hi = order["ci95"]
print(f"mean P(first position) {order['mean_p_first']:.4g}, 95% CI [{lo:.4g}, {hi:.4g}] over {order['n']} pairs")
print(f"same position picked in both orders: {order['same_position_both_orders']}/{order['n']}; "
      f"right answer in both orders: {order['right_both_orders']}/{order['n']}")
assert order["n"] == 20 and order["consistent"] + order["same_position_both_orders"] == order["n"]

# %%
fig, ax = plt.subplots(figsize=(8, 4))
ax.scatter([r["p_right_first"] for r in order["rows"]], [r["p_right_second"] for r in order["rows"]])
ax.plot([0, 1], [0, 1], color="gray", lw=0.8)
ax.axhline(0.5, color="gray", ls=":", lw=0.8)
ax.axvline(0.5, color="gray", ls=":", lw=0.8)
ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="P(right answer) when shown first",
       ylabel="P(right answer) when shown second",
       title="Position bias: an order-blind judge's points lie on the diagonal")
plt.show()

# %% [markdown]
# SmolLM2's choice follows the position, never the content. It gives the first position a mean
# probability of 0.937 (95% CI [0.919, 0.954]; 0.5 is order-blind), and picks the first answer in both
# orders for all 20 pairs.
#
# ### Verbosity bias
#
# Both fillers raised SmolLM2's score, and the one that claims care raised it more. We append each
# filler of section 5 to every answer and score it by the probability-weighted reading. Each filler is
# one batch of requests, with four in flight at a time: sent, and not yet answered (lesson 14). The
# shifts are paired per answer. The neutral filler's shift is what appending this irrelevant sentence
# does; the difference between the two is what this sentence claiming care adds:

# %%
# NBVAL_CHECK_OUTPUT
padding_shift = {}
for name, filler in (("claims care", ec.VERBOSITY_FILLER), ("neutral", ec.NEUTRAL_FILLER)):
    padded_scores = [d["expected"] for d in prob_judge.scores([(q, a + filler, r) for q, a, r in items])]
    padding_shift[name] = [b - a for a, b in zip(expected, padded_scores)]
claim, neutral = padding_shift["claims care"], padding_shift["neutral"]
padding_shift["claim minus neutral"] = [c - n for c, n in zip(claim, neutral)]
for name, shift in padding_shift.items():
    lo, hi = ec.bootstrap_ci(shift, groups=question)
    print(f"{name:20s} mean shift {statistics.mean(shift):+.3f}, 95% CI [{lo:+.3f}, {hi:+.3f}]; "
          f"up {sum(x > 0 for x in shift)}, down {sum(x < 0 for x in shift)} of {len(shift)}")
assert all(len(shift) == len(items) for shift in padding_shift.values())
ec.close_served_source(source, ec.RECORDING_09_PATH)  # a live run records here when asked

# %% [markdown]
# The filler that claims care raises the score by +0.086 (95% CI [+0.072, +0.099]), for 77 of the 80
# answers. The neutral sentence of the same length and frame raises it by +0.040 (95% CI [+0.023,
# +0.056]), for 60. So this sentence claiming care raised the score 0.046 more than the neutral one
# (95% CI [+0.040, +0.052]), for every one of the 80 answers: small on a 1-5 scale, but consistent.
#
# **How sure are we?**
#
# - The intervals resample questions, not fillers. With one sentence per condition, they say nothing
#   about other sentences of padding or other claims of care: that would need several fillers per
#   condition, resampled as well.
#
# ### What these numbers say, and what to check before trusting any judge
#
# A 135M-parameter judge is a poor judge, and these checks say how poor without trusting its verdicts.
# They were measured on the recorded replies, and live runs may differ in the last digits.
#
# Before trusting **any** judge, a model one hundred times larger included, check at least:
#
# - how often its reply cannot be used, and which items those are;
# - whether its score separates answers you have labelled right and wrong, with an interval over
#   questions, not answers;
# - whether swapping the order of two answers changes its choice;
# - whether padding changes its score;
# - whether it beats the trivial baselines (chance, and a metric like the mock judge) on your own
#   labels, paired on the same answers.

# %% [markdown]
# ## 7. Pointing it at a real endpoint
#
# Only the URL and the model name change. Run these yourself: they are not executed here, because the
# notebook must run offline. The llama.cpp line loads a **GGUF** file, llama.cpp's single-file format
# for a model: its weights together with its tokenizer and settings.
#
# ```python
# # vLLM:              vllm serve Qwen/Qwen2.5-7B-Instruct   (serves http://localhost:8000/v1)
# judge = ec.HTTPJudge("http://localhost:8000/v1", "Qwen/Qwen2.5-7B-Instruct", cache_dir="judge-cache")
# # Ollama:            ollama serve; ollama pull llama3.1
# judge = ec.HTTPJudge("http://localhost:11434/v1", "llama3.1", cache_dir="judge-cache")
# # llama.cpp:         llama-server -m model.gguf --port 8080
# judge = ec.HTTPJudge("http://localhost:8080/v1", "local", cache_dir="judge-cache")
# # a hosted API: the key comes from the environment, never from the notebook's text
# #   export OPENAI_API_KEY=...   (in the shell that starts Jupyter)
# judge = ec.HTTPJudge("https://api.openai.com/v1", "gpt-4o-mini", cache_dir="judge-cache")
#
# result = ec.judge_eval(model, tok, fx["judge"], judge_fn=judge)
# print(result.extras["scored"], "/", result.extras["total"], result.extras["unscored"])
# print(ec.verbosity_check(judge, result)["mean_shift"])          # a length bias?
# print(ec.judge_pair_agreement(direct, result))                   # agreement with the mock judge
# ```
#
# A 7B model may wrap its JSON in prose or a code fence, and the parser accepts that. If it answers
# with a score outside 1-5, the example is unscored, and the count tells you how often that happened.
#
# *Sources:* the base URLs follow each server's own docs: vLLM's
# `docs/serving/openai_compatible_server.md` (`http://localhost:8000/v1`), Ollama's
# `docs/api/openai-compatibility.mdx` (formerly `docs/openai.md`; `http://localhost:11434/v1`), and
# llama.cpp's `tools/server/README.md` (OpenAI-compatible chat completions under `/v1`, on the port you
# pass).
#
# Finally, delete the temporary cache and stop the two servers that outlived their cells. The
# `finally` stops them even if a step before it fails. (If the kernel dies instead, the servers die
# with it: they run in its threads.)

# %%
try:
    for j in (judge, flaky, keyed, wordy, real, judge_model):
        j.close()
    shutil.rmtree(cache_dir)
finally:
    for s in (server, wordy_server):
        s.stop()

# %% [markdown]
# ## Summary
#
# **What this lesson established**
#
# - `ec.HTTPJudge(base_url, model)` speaks the OpenAI-compatible chat-completions API with
#   `mock_judge`'s signature, so `judge_eval(..., judge_fn=...)` works unchanged. Served by
#   `ec.JudgeServer`, the mock judge gave exactly the direct values: 1.95 (95% CI [1.5, 2.45]), 20/20.
# - 429, 5xx, timeouts and dropped connections are retried with exponential backoff, jitter and
#   `Retry-After`. After the last retry, or for an unusable reply, the example is **unscored** with its
#   reason.
# - Three failures gave 1.706 over 17/20, below the direct 1.95: all three had scored above that (5, 3
#   and 2), and one was the only exact match. Scored as 1 they would give 1.6, and as 0, 1.45. The
#   report prints the value, its interval and the scored/total count side by side.
# - The second run cost 0 requests. The API key never reached a record, the JSON or a repr.
# - Padding moved the mock judge by -0.7 on average with either filler, and a judge biased on purpose
#   by +1.3.
# - The mock judge's pass/fail (score ≥ 4) has kappa 1.0 with exact match and 0.2187 with F1 ≥ 0.5.
#   The wordy judge agrees with it on pass/fail for all 20 answers, on the score for only 16.
# - SmolLM2-135M-Instruct was unparseable for 68 of the 80 answers. Its probability-weighted score did
#   not separate right from wrong (AUC 0.443) and never reached 3, so its kappa at that threshold is
#   undefined. It favoured the first position (P = 0.937), and both filler sentences raised its score.
#   Section 6 gives every interval, each over the 20 questions.
# - Neither judge is shown to beat chance: the mock judge's kappa is -0.094 and its AUC 0.587, both
#   intervals holding chance.
#
# **What it did not establish**
#
# - Anything about a capable LLM judge: the real judge here has 135M parameters and failed every check.
#   The checks are the method: a larger judge must pass them on your own labels before you trust it.
# - That the course's labels are right: one author wrote them by one rule, not human raters, so
#   agreement with them measures agreement with that rule.
# - That the judge is *right*: kappa measures agreement, and 0.2187 against F1 rests on the judge's
#   single pass, one answer in 20.
# - That either judge is better than the other: paired on the same answers, SmolLM2's AUC minus the
#   mock judge's is -0.144 (95% CI [-0.292, +0.001]), on 20 questions (Going further A).
# - That padding or claims of care in general move the score: each condition was one sentence, and the
#   intervals resample questions, not fillers.
# - Anything from SmolLM2's 12 parsed verdicts: their kappa, -0.538, is on items it chose to answer, in
#   8 questions, with no usable interval (Going further B).
# - That the model got worse when three judgements failed: the 0.24 gap is exactly the effect of
#   *which* items failed. No interval can show that, overlapping or not.

# %% [markdown]
# ## Exercises
#
# Each exercise has a code cell. Write your code where the stub says and run the cell: its last lines
# check your answer. The servers above are stopped, so each exercise starts (and stops) its own.

# %% [markdown]
# ### Exercise 1: Rate limiting
#
# Write a tiny server that answers the first request with HTTP 429 and the header `Retry-After: 1`,
# and every later one with a chat-completions reply holding a verdict. Point `ec.HTTPJudge` at it.
# Store the judge in `patient` and its verdict on `(q, preds[1], ref)` in `patient_verdict`. The judge
# should have waited at least the second the server asked for: `patient.waits[0] >= 1`. Stop the
# server when you are done, even if a step fails.
#
# The next cell gives you the parts this lesson has not taught:
#
# - Python's `http.server` calls a handler's `do_POST` once per POST request. The handler reads the
#   request's body from `self.rfile` and writes its answer to `self.wfile`. `JSONHandler` does the
#   writing for you: `self.send_json(status, body, headers)`.
# - `chat_reply(content)` is the smallest reply `HTTPJudge` accepts: the judge reads
#   `choices[0].message.content`, a JSON verdict like `{"score": 4, "rationale": "..."}`. The cell
#   prints that reply's shape.
# - `ThreadingHTTPServer(("127.0.0.1", 0), YourHandler)` binds a free port (`.server_port`). Run its
#   `serve_forever` in a daemon `threading.Thread` (one that Python does not wait for at exit), and
#   stop it with `.shutdown()`, then
#   `.server_close()`. The judge's base URL is `f"http://127.0.0.1:{port}/v1"`.
# - Inside the handler, `self.server` is that server object: a place to count requests.

# %%
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def chat_reply(content, model="limited"):
    # a chat-completions reply: HTTPJudge reads choices[0]["message"]["content"]
    message = {"role": "assistant", "content": content}
    return {"object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}


class JSONHandler(BaseHTTPRequestHandler):
    # a skeleton: subclass it and write do_POST, which must read the request and send one answer
    def log_message(self, *args):  # no access log in the notebook
        pass

    def send_json(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in {**(headers or {}), "Content-Type": "application/json",
                            "Content-Length": str(len(data))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def read_request(self):  # the request's JSON body: HTTPJudge sends its messages here
        return json.loads(self.rfile.read(int(self.headers["Content-Length"])))


print(json.dumps(chat_reply(json.dumps({"score": 4, "rationale": "a fixed verdict"})), indent=1))

# %%
# Exercise 1: store the HTTP judge that met a 429 in `patient` and its verdict in `patient_verdict`.
### BEGIN SOLUTION
class RateLimitedHandler(JSONHandler):
    # the first request gets HTTP 429 with Retry-After: 1, every later one a fixed verdict of 4
    def do_POST(self):
        self.read_request()
        self.server.hits += 1
        if self.server.hits == 1:
            return self.send_json(429, {"error": {"message": "slow down"}}, {"Retry-After": "1"})
        self.send_json(200, chat_reply(json.dumps({"score": 4, "rationale": "a fixed verdict"})))


limited = ThreadingHTTPServer(("127.0.0.1", 0), RateLimitedHandler)
limited.hits = 0
threading.Thread(target=limited.serve_forever, daemon=True).start()
try:
    patient = ec.HTTPJudge(f"http://127.0.0.1:{limited.server_port}/v1", "limited")
    patient_verdict = patient(q, preds[1], ref)
    patient.close()
finally:
    limited.shutdown()
    limited.server_close()
print(patient_verdict, patient.waits, patient.stats)
### END SOLUTION
assert patient.waits, f"expected the judge to wait before a retry; it never waited (stats {patient.stats})"
assert patient.waits[0] >= 1, f"expected the first wait to honour Retry-After: 1 (at least 1 s); got {patient.waits[0]:.3g} s"
assert patient.stats["requests"] >= 2, f"expected the 429, then a second request; got {patient.stats}"
assert patient_verdict[0] in range(1, 6), f"expected a verdict with a score from 1 to 5; got {patient_verdict!r}"
print("Exercise 1: check passed.")


# %% [markdown]
# ### Exercise 2: A stricter pass
#
# Store `ec.judge_metric_agreement(direct, pass_score=5)` in `strict`, and the number of answers in
# `direct` that the mock judge scores 5 in `n_five`. Why is kappa with exact match exactly 1 for the
# mock judge, whatever the answers? (Some must pass and some fail: otherwise kappa is undefined.)
#
# *Hint:* read `ec.mock_judge`'s first line.

# %%
# Exercise 2: store the agreement at pass_score=5 in `strict` and the number of 5s in `direct` in
#   `n_five`.
### BEGIN SOLUTION
strict = ec.judge_metric_agreement(direct, pass_score=5)
n_five = sum(r["score"] == 5 for r in direct.per_example)
print(f"{n_five} fives; kappa with exact match {strict['exact_match']['kappa']}")
### END SOLUTION
em_table = strict["exact_match"]["confusion"]  # [judge][exact match], 0 = fail, 1 = pass
assert strict["exact_match"]["kappa"] == 1.0, f"expected perfect agreement with exact match at pass_score=5; got {strict['exact_match']['kappa']}"
assert n_five == sum(em_table[1]), f"expected n_five to count the answers the judge passes at 5; got {n_five}"
assert em_table[0][1] == em_table[1][0] == 0, f"expected no answer to pass one and fail the other; got {em_table}"
print("Exercise 2: check passed.")


# %% [markdown] tags=["solution"]
# `mock_judge` returns 5 exactly when `exact_match` holds: its first line checks exact match, and every
# later branch returns at most 4. So "score ≥ 5" *is* exact match: the two pass/fail labels are
# identical, and kappa is 1 on any answers with at least one pass and one fail. At `pass_score=4` the
# same held here only because no near miss reached F1 0.8: a fact about these answers, not about the
# judge.

# %% [markdown]
# ### Exercise 3: Pad harder
#
# Store `ec.verbosity_check(ec.mock_judge, direct, times=3)` in `harder`. Does the mean shift grow
# compared with one sentence of filler (`padded`), and does any score go up?
#
# *Hint:* F1's precision is shared tokens / predicted tokens.

# %%
# Exercise 3: store the verbosity check with three sentences of filler in `harder`.
### BEGIN SOLUTION
harder = ec.verbosity_check(ec.mock_judge, direct, times=3)
print(f"mean shift {padded['mean_shift']:.4g} with one filler sentence, {harder['mean_shift']:.4g} "
      f"with three; up {harder['up']}, down {harder['down']}")
### END SOLUTION
assert harder["total"] == len(direct.per_example), f"expected every answer in `direct` checked; got {harder['total']}"
assert harder["mean_shift"] < padded["mean_shift"], f"expected more filler to cost more than one sentence did; got mean shift {harder['mean_shift']:.4g}"
assert harder["up"] == 0, f"expected padding never to raise a score; {harder['up']} went up"
print("Exercise 3: check passed.")


# %% [markdown] tags=["solution"]
# Three sentences cost more than one, and no score goes up. Padding adds predicted tokens that are not
# in the reference. So F1's precision, shared tokens / predicted tokens, falls further with each
# sentence, and an exact match stops being one at the first. The mock judge reads its score off F1, so
# it can only move down. A real judge with a verbosity bias would show the opposite sign.

# %% [markdown]
# ### Exercise 4: Your own endpoint
#
# Rehearse section 7 offline. Write a judge of your own, for example one point more generous than
# `ec.mock_judge`, capped at 5. Serve it with `ec.JudgeServer(judge_fn=..., model=...)` in a `with`
# block, and point `HTTPJudge` at it with a temporary `cache_dir`. Store the judge in `my_judge`, its
# `judge_eval` result in `mine`, its verbosity check in `mine_padded`, and its agreement with the mock
# judge (`ec.judge_pair_agreement(direct, mine)`) in `mine_pair`. Is it length-biased? How many
# examples end up unscored?
#
# *Hint:* set `cache_dir` so that re-runs are free, and keep `max_retries` small while you experiment.

# %%
# Exercise 4: store your HTTP judge in `my_judge` and its eval, verbosity check and agreement with
#   `direct` in `mine`, `mine_padded` and `mine_pair`.
### BEGIN SOLUTION
def generous_judge(instruction, prediction, reference):
    # the mock judge, one point kinder (at most 5)
    score, why = ec.mock_judge(instruction, prediction, reference)
    return min(5, score + 1), why + "; and one point for effort"


my_cache = tempfile.mkdtemp(prefix="my-judge-cache-")
try:
    with ec.JudgeServer(judge_fn=generous_judge, model="generous-judge") as my_server:
        with ec.HTTPJudge(my_server.url, my_server.model, cache_dir=my_cache, max_retries=1) as my_judge:
            mine = ec.judge_eval(model, tok, fx["judge"], judge_fn=my_judge)
            mine_padded = ec.verbosity_check(my_judge, mine)
    mine_pair = ec.judge_pair_agreement(direct, mine)
finally:
    shutil.rmtree(my_cache)
print(f"{mine.extras['scored']}/{mine.extras['total']} scored, mean shift {mine_padded['mean_shift']:.4g}, "
      f"kappa with the mock judge {mine_pair['kappa']:.4g}, same score {mine_pair['same_score']:.4g}")
### END SOLUTION
total = len(fx["judge"])
assert isinstance(my_judge, ec.HTTPJudge) and my_judge.stats["calls"] >= total, (
    f"expected an HTTP judge from HTTPJudge that judged every example; got {my_judge!r}")
assert mine.extras["total"] == total and mine.extras["scored"] + len(mine.extras["unscored"]) == total, (
    f"expected every example either scored or unscored with a reason; got {mine.extras['scored']}/{mine.extras['total']}")
assert mine_padded["total"] == total and {"mean_shift", "up", "down"} <= set(mine_padded), (
    f"expected a verbosity check of every answer; got keys {sorted(mine_padded)}")
assert mine_pair["n"] <= mine.extras["scored"] and "kappa" in mine_pair, (
    f"expected an agreement on the examples both judges scored; got {mine_pair}")
print("Exercise 4: check passed.")


# %% [markdown] tags=["solution"]
# The generous judge scores all 20 answers (none unscored). Padding still only costs points (a mean
# shift of -0.65): one point of kindness does not make a judge length-biased, since its score still
# comes from F1. It gives the mock judge's exact score to one answer in 20, the exact match that stays
# a 5. Its pass/fail kappa with the mock judge is 0.22, because the five 3s it turns into 4s now pass.
# Against a real model, expect some unparseable replies, and a positive mean shift if it rewards length.


# %% [markdown]
# ## Going further
#
# ### A. Is one judge better than the other? The paired AUC difference
#
# Neither judge is shown better than the other: the paired interval of their AUC difference just
# includes 0, on 20 questions. Two overlapping intervals could not answer this. Both AUCs come from the
# same 80 answers, so the comparison is paired, like lesson 05's paired bootstrap of the judge's scores.
# `ec.auc_difference_with_interval` computes both AUCs on the same resample of the questions and takes
# their difference.
#
# A bootstrap is itself random: its seed fixes which resamples it draws. With 2,000 resamples, this
# interval's upper end moves by a few thousandths from one seed to the next, and it lies near 0. So the
# cell prints that end over seeds 0 to 10. The interval it reports draws 20,000 resamples, which
# steadies the end.

# %%
# NBVAL_CHECK_OUTPUT
versus_mock = ec.auc_difference_with_interval(expected, mock_scores, truth, question, n_resamples=20000)
print(f"AUC, SmolLM2 minus the mock judge: {versus_mock['diff']:+.3f}, 95% CI "
      f"[{versus_mock['ci95'][0]:+.3f}, {versus_mock['ci95'][1]:+.3f}] (questions resampled; both "
      f"AUCs on each resample)")
upper_ends = [ec.auc_difference_with_interval(expected, mock_scores, truth, question, seed=s)["ci95"][1]
              for s in range(11)]
print(f"its upper end with 2,000 resamples, seeds 0 to 10: from {min(upper_ends):+.3f} to {max(upper_ends):+.3f}")
auc_gap = separation["SmolLM2, probability-weighted"]["auc"] - separation["mock judge"]["auc"]
assert abs(versus_mock["diff"] - auc_gap) < 1e-12, "expected the difference of the two AUCs above"
assert versus_mock["ci95"][0] < 0 and abs(versus_mock["ci95"][1]) < 0.01, \
    f"expected an interval whose upper end lies at 0, got {versus_mock['ci95']}"

# %% [markdown]
# On these labels the mock judge's AUC is higher by 0.144. The paired interval, [−0.292, +0.001], just
# includes 0. With 2,000 resamples its upper end lands on either side of 0 (from −0.006 to +0.005),
# depending on the seed. So neither judge is shown better than the other: SmolLM2 is not shown to beat
# the mock judge, and the mock judge is not shown to beat SmolLM2.
#
# **How sure are we?**
#
# - The difference is borderline, on 20 questions, in one comparison chosen after both AUCs were seen.
#   It supports neither "SmolLM2 is worse" nor "the two are equal".

# %% [markdown]
# ### B. The parsed replies' kappa, and why it gets no interval
#
# The parsed replies get a kappa too, but no interval. The judge scored only the items it chose to
# answer, so those are no sample of the 80. They also fall in a handful of questions. A percentile
# bootstrap over so few clusters does not keep its 95% promise: its coverage (lesson 05) falls short.

# %%
# NBVAL_CHECK_OUTPUT
scored_parsed = [i for i, p in enumerate(parsed) if p is not None]
parsed_agreement = ec.pass_fail_agreement([parsed[i] >= 4 for i in scored_parsed],
                                          [truth[i] for i in scored_parsed])
parsed_questions = len({question[i] for i in scored_parsed})
kappa = "undefined" if parsed_agreement["kappa"] is None else f"{parsed_agreement['kappa']:+.3f}"
print(f"SmolLM2, parsed >= 4: kappa {kappa} on the {len(scored_parsed)} items it scored, in "
      f"{parsed_questions} questions; confusion[judge][label] {parsed_agreement['confusion']}")

# %% [markdown]
# On the 12 items it scored, the parsed replies' kappa is -0.538, in 8 questions: too few and too
# self-selected for an interval, or for any conclusion.
